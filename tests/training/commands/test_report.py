"""What a run records (metrics.jsonl, loss.png), `report` on it, and `evaluate`."""

from __future__ import annotations

import json
import math
import struct

import pytest

from tests.support.training_runs import cli, losses, one_line_error, train
from training.observability import plots, run_log


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def resumed_run(data_dir, tmp_path_factory):
    """8 steps, then resumed to 12: validation every 4 steps, a checkpoint every 4."""
    run = tmp_path_factory.mktemp("recorded") / "run"
    common = ["--eval-every", "4", "--checkpoint-every", "4"]
    assert train(data_dir, run, "--max-steps", "8", "--no-export", *common)[0] == 0
    code, out, err = train(data_dir, run, "--max-steps", "12", *common)
    assert code == 0, err
    return run


def test_metrics_file_holds_what_tensorboard_holds(resumed_run):
    log = run_log.read(resumed_run)
    for tag in ("train/loss", "val/loss", "train/lr", "perf/tokens_per_s"):
        tensorboard = losses(resumed_run, tag)
        recorded = {step: value for step, _, value in log.series[tag]}
        assert sorted(recorded) == sorted(tensorboard), tag
        for step, value in tensorboard.items():
            assert recorded[step] == pytest.approx(value, rel=1e-6), (tag, step)
    assert [s for s, _, _ in log.series["val/loss"]] == [4, 8, 12]
    assert all(tokens == step * 8 * 32 for step, tokens, _ in log.series["train/loss"])  # batch 8 x block 32
    assert [e["event"] for e in log.events] == ["start", "end", "start", "end"]
    assert log.events[2]["step"] == 8 and log.events[2]["world_size"] == 1


def test_loss_png_is_drawn(resumed_run):
    width, height = png_size(resumed_run / plots.LOSS_PNG)
    assert width >= 800 and height >= 600
    assert not list(resumed_run.glob(".loss.png-*")), "drawn atomically: no temporary file left"


def test_report_summarizes_the_run(resumed_run):
    code, out, err = cli(["report", str(resumed_run), "--json"])
    assert code == 0, err
    summary = json.loads(out)
    val = losses(resumed_run, "val/loss")
    best_step = min(val, key=val.get)
    assert summary["steps"] == 12 and summary["max_steps"] == 12
    assert summary["tokens"] == 12 * 8 * 32
    assert summary["sessions"] == 2 and summary["wall_seconds"] > 0
    assert summary["best_val_step"] == best_step
    assert summary["best_val_loss"] == pytest.approx(val[best_step], rel=1e-6)
    assert summary["best_val_perplexity"] == pytest.approx(math.exp(val[best_step]), rel=1e-6)
    assert summary["tokens_per_s"] > 0 and summary["mfu"] is None  # CPU: no peak FLOP/s
    assert summary["checkpoints"] == [4, 8, 12]
    assert summary["export"].endswith("export") and summary["loss_png"].endswith("loss.png")

    code, out, err = cli(["report", str(resumed_run)])
    assert code == 0, err
    assert f"{val[best_step]:.4f} nats/token at step {best_step}, on " in out  # with its unit and tokens (issue 30)
    assert "12 of 12" in out and "in 2 session(s)" in out and "loss.png" in out


def test_report_refuses_what_is_not_a_run(tmp_path):
    one_line_error(cli(["report", str(tmp_path / "nope")]), "is not a directory")
    one_line_error(cli(["report", str(tmp_path)]), "has no metrics.jsonl")


def test_plot_reads_a_file_cut_short_and_keeps_the_last_value_of_a_step(tmp_path):
    lines = [{"event": "start", "step": 0, "tokens_per_step": 100, "max_steps": 30, "time": 1.0}]
    lines += [{"step": s, "tokens": 100 * s, "tag": "train/loss", "value": 9.0 - s / 10, "time": 1.0 + s}
              for s in range(1, 21)]
    lines += [{"event": "start", "step": 10, "tokens_per_step": 100, "max_steps": 30, "time": 100.0}]
    lines += [{"step": s, "tokens": 100 * s, "tag": "train/loss", "value": 1.0, "time": 100.0 + s} for s in range(11, 16)]
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"step": 21, "tag": "tra'
    (tmp_path / run_log.METRICS).write_text(text)
    log = run_log.read(tmp_path)
    curve = {s: v for s, _, v in log.series["train/loss"]}
    assert curve[12] == 1.0 and curve[20] == pytest.approx(7.0) and 21 not in curve
    assert log.wall_seconds() == pytest.approx(20.0 + 15.0)  # two sessions, the gap between them not counted
    assert png_size(plots.draw(tmp_path))[0] > 0
    (tmp_path / run_log.METRICS).write_text(json.dumps(lines[0]) + "\n")
    assert plots.draw(tmp_path) is None  # nothing to draw yet


def test_evaluate_matches_the_runs_validation_loss(resumed_run, data_dir):
    # The run evaluated the first 16 validation windows (TINY: --eval-samples 16) at step 12.
    code, out, err = cli(["evaluate", str(resumed_run), "--data", str(data_dir), "--max-windows", "16", "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["windows"] == 16 and result["tokens"] == 16 * 32 and result["block_size"] == 32
    assert result["loss"] == pytest.approx(losses(resumed_run, "val/loss")[12], rel=1e-5)
    assert result["perplexity"] == pytest.approx(math.exp(result["loss"]))


def test_evaluate_a_text_file_and_a_text_shorter_than_a_block(resumed_run, corpus_dir, tmp_path):
    code, out, err = cli(["evaluate", str(resumed_run / "export"), "--data", str(corpus_dir / "glob.txt")])
    assert code == 0, err
    assert out.startswith("perplexity ") and "glob.txt" in out
    (tmp_path / "short.txt").write_text("import os\n")
    code, out, err = cli(["evaluate", str(resumed_run), "--data", str(tmp_path / "short.txt"), "--json"])
    assert code == 0, err
    assert json.loads(out)["windows"] == 1


def test_evaluate_bad_input(resumed_run, data_dir, corpus_dir, tmp_path):
    run = str(resumed_run)
    one_line_error(cli(["evaluate", str(tmp_path / "nope"), "--data", str(data_dir)]), "does not exist")
    one_line_error(cli(["evaluate", run, "--data", str(tmp_path / "nope")]), "does not exist")
    one_line_error(cli(["evaluate", run, "--data", str(tmp_path)]), "not a prepared DATA_DIR")
    (tmp_path / "blob.txt").write_bytes(b"\xff\xfe\x00binary")
    one_line_error(cli(["evaluate", run, "--data", str(tmp_path / "blob.txt")]), "is not UTF-8")
    (tmp_path / "empty.txt").write_text("")
    one_line_error(cli(["evaluate", run, "--data", str(tmp_path / "empty.txt")]), "perplexity needs at least 2")
    one_line_error(cli(["evaluate", run, "--data", str(data_dir), "--block-size", "64"]), "exceeds the model's 32")
    other = tmp_path / "other"
    assert cli(["prepare", "--data", str(corpus_dir / "glob.txt"), "--out", str(other), "--tokenizer", "train:300",
                "--num-proc", "1"])[0] == 0
    one_line_error(cli(["evaluate", run, "--data", str(other)]), "different tokenizer")


# ---------------------------------------------------------------- re-check case 7: a damaged manifest
DAMAGED_MANIFESTS = [bytes(range(256)) * 2, b"[1, 2]", b'{"files": [1]}', b'{"files": {"model.pt": 3}}',
                     b'{"files": {"model.pt": {"bytes": "x"}}}',
                     b'{"files": {"../../metrics.jsonl": {"bytes": 1, "sha256": "0"}}}']


def tree_bytes(root):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("manifest", DAMAGED_MANIFESTS)
def test_report_on_a_damaged_checkpoint_manifest_names_it_and_goes_on(resumed_run, tmp_path, manifest):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(resumed_run, run)
    steps = sorted((run / "checkpoints").iterdir())
    (steps[-1] / "manifest.json").write_bytes(manifest)
    before = tree_bytes(run)
    code, out, err = cli(["report", str(run)])
    assert code == 0 and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[trainstack] warning: checkpoint {steps[-1]} is damaged ("), err
    assert lines[0].endswith("; reporting without it"), err
    assert f"newest intact checkpoint    {steps[-2]}" in out, out
    assert tree_bytes(run) == before, "report changes nothing in RUN_DIR"


def test_report_with_nothing_readable_is_one_line(resumed_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(resumed_run, run)
    shutil.rmtree(run / "export")
    for step in (run / "checkpoints").iterdir():
        (step / "manifest.json").write_bytes(bytes(range(256)))
    (run / run_log.METRICS).write_bytes(bytes(range(128, 256)) * 4)
    before = tree_bytes(run)
    one_line_error(cli(["report", str(run)]), "nothing in", "is readable")
    assert tree_bytes(run) == before
