"""bench/distill_step.py on the tiniest shapes: it runs our real plain and distillation steps
interleaved, counts FLOPs as train.py does, writes its JSON, and refuses bad flags in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import distill_step
from tests.support.training_runs import env
from trainstack.contract.shapes import ModelShape, gpt2_params_without_positions

REPO = Path(__file__).resolve().parents[2]
PEER = REPO / "bench" / ".peers" / "transformers-research-projects"
HAS_PEER = (PEER / "distillation" / "distiller.py").is_file()


def bench(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.distill_step", *flags], cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def quick_run(data_dir, tmp_path_factory) -> dict:
    """One --quick run on the `test` shapes; with the HF example where a checkout of it is at hand."""
    out = tmp_path_factory.mktemp("distill-bench") / "r.json"
    # --compile off: compilation would take most of a minute on 2 cores; the code path is the same
    flags = [] if HAS_PEER else ["--no-hf"]
    done = bench("--quick", "--models", "test", "--compile", "off", "--data", str(data_dir), "--out", str(out), *flags)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_quick_run_times_plain_and_distillation_steps_interleaved(quick_run):
    result = quick_run
    m = result["models"]["test"]
    assert result["device"] == "cpu" and result["machine"]["torch"]
    assert m["teacher"]["n_layer"] == 2 and m["student"]["n_layer"] == 1, "the student has half the layers"
    for name in ("plain", "distill"):
        assert len(m["step_ms"][name]["runs"]) == 2 * 6 and m["step_ms"][name]["median"] > 0
    # the same student weights and the same first batch: the first LM losses are the same number
    assert m["first_step_lm_loss"]["plain"] == m["first_step_lm_loss"]["distill"]
    # FLOPs as train.py counts them for MFU: the student's forward and backward plus the teacher's forward;
    # parameters (without positions) from the shapes' closed form, not from the models
    s, t, block = m["student"], m["teacher"], m["block_size"]
    assert s["params"] == gpt2_params_without_positions(ModelShape(1, 32, 2, block), m["vocab_size"])
    assert t["params"] == gpt2_params_without_positions(ModelShape(2, 32, 2, block), m["vocab_size"])
    plain = 6 * s["params"] + 12 * 1 * 32 * block
    teacher_forward = 2 * t["params"] + 4 * 2 * 32 * block
    assert m["flops_per_token"] == {"plain": plain, "distill": plain + teacher_forward}
    assert m["flop_ratio"] == pytest.approx((plain + teacher_forward) / plain)
    assert m["ratio_distill_vs_plain"] == pytest.approx(m["step_ms"]["distill"]["median"] / m["step_ms"]["plain"]["median"])
    assert m["measured_over_flop_ratio"] == pytest.approx(m["ratio_distill_vs_plain"] / m["flop_ratio"])


@pytest.mark.skipif(not HAS_PEER, reason=f"no checkout of Hugging Face's distillation example at {PEER} "
                                          "(bench/hf_distiller.py says how to get one)")
def test_quick_run_with_the_hf_example(quick_run):
    m = quick_run["models"]["test"]
    assert quick_run["peers"]["hf_example"].endswith("distillation/distiller.py")
    assert len(m["step_ms"]["hf_example"]["runs"]) == 2 * 6
    assert m["ratio_hf_vs_ours"] == pytest.approx(m["step_ms"]["hf_example"]["median"] / m["step_ms"]["distill"]["median"])
    # its causal-LM term on the same windows (first and last token <|endoftext|>, one target fewer)
    assert m["first_step_lm_loss"]["hf_example_clm"] == pytest.approx(m["first_step_lm_loss"]["plain"], abs=0.05)


@pytest.mark.parametrize("flags, message", [
    (["--models", "tiny,nope"], "--models: unknown nope"),
    (["--steps", "0"], "must be at least 1"),
    (["--device", "cuda"], "--device cuda: no CUDA GPU"),
    (["--hf-distiller", "/nonexistent"], "no distillation example (distiller.py) in /nonexistent"),
])
def test_bad_flags_one_line_exit_2_nothing_written(flags, message, tmp_path, capsys):
    if "cuda" in flags and torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(SystemExit) as exited:
        distill_step.main([*flags, "--out", str(tmp_path / "r.json"), "--data", str(tmp_path / "no-data")])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r.json").exists()
