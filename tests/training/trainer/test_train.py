"""Training in one process: loss falls, stop-and-resume is exact, checkpoints survive crashes, export loads."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch

from tests.support.training_runs import REPO, checkpoint_steps, env, losses, train
from training.checkpoints import checkpoint


def test_loss_falls_on_a_tiny_model(data_dir, tmp_path):
    code, out, err = train(data_dir, tmp_path / "run", "--max-steps", "40", "--no-export")
    assert code == 0, err
    curve = losses(tmp_path / "run")
    assert sorted(curve) == list(range(1, 41))
    first, last = sum(curve[s] for s in range(1, 6)) / 5, sum(curve[s] for s in range(36, 41)) / 5
    assert last < first - 0.5, f"loss did not fall: {first:.3f} -> {last:.3f}"


def test_stop_and_resume_reproduces_the_uninterrupted_run(data_dir, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert train(data_dir, whole, "--max-steps", "16", "--checkpoint-every", "8", "--no-export")[0] == 0
    assert train(data_dir, split, "--max-steps", "8", "--checkpoint-every", "8", "--no-export")[0] == 0
    code, out, err = train(data_dir, split, "--max-steps", "16", "--checkpoint-every", "8", "--no-export")
    assert code == 0, err
    assert "resumed from" in out and "step 8" in out
    reference, resumed = losses(whole), losses(split)
    assert sorted(resumed) == list(range(1, 17))
    for step in range(9, 17):
        assert resumed[step] == pytest.approx(reference[step], rel=1e-6, abs=1e-6), step


def test_checkpoint_holds_everything_needed_to_resume(data_dir, tmp_path):
    assert train(data_dir, tmp_path / "run", "--max-steps", "4", "--checkpoint-every", "2", "--keep-checkpoints", "2",
                 "--no-export")[0] == 0
    assert checkpoint_steps(tmp_path / "run") == [2, 4]  # the newest two kept
    states = checkpoint.latest_valid(tmp_path / "run").load()
    assert set(states) == {"model", "optimizer", "trainer"}
    trainer = states["trainer"]
    assert trainer["step"] == 4
    assert {"python", "numpy", "torch"} <= set(trainer["rng"][0])
    assert trainer["run_config"]["global_batch_size"] == 8
    assert trainer["schedule"]["warmup_steps"] == 2
    assert states["optimizer"]["state"], "optimizer moments must be saved"


def test_crash_during_checkpoint_write_leaves_the_previous_one_loadable(data_dir, tmp_path):
    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "4", "--checkpoint-every", "4", "--no-export")[0] == 0
    # A real process dies (kill -9) in the middle of writing a large checkpoint.
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, torch; from pathlib import Path; from training.checkpoints import checkpoint\n"
        "big = {'w': torch.zeros(64_000_000)}\n"
        "checkpoint.save(Path(sys.argv[1]), 8, {'model': big, 'optimizer': big, 'trainer': {'step': 8}}, keep=3)\n"
    ), str(run)], env=env(), cwd=REPO)
    deadline = time.monotonic() + 60
    while not list((run / "checkpoints").glob(".tmp-*/model.pt")) and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.kill()
    writer.wait()
    assert list((run / "checkpoints").glob(".tmp-step_00000008-*")), "the writer should have died mid-write"
    latest = checkpoint.latest_valid(run)
    assert latest is not None and latest.step == 4
    code, out, err = train(data_dir, run, "--max-steps", "6", "--checkpoint-every", "6", "--no-export")
    assert code == 0, err
    assert "resumed from" in out and "step 4" in out
    assert not list((run / "checkpoints").glob(".tmp-*")), "the next save clears the dead writer's leftovers"


def test_an_exception_while_writing_leaves_no_checkpoint_and_keeps_the_old(tmp_path):
    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    good = {"model": {"w": torch.ones(3)}, "optimizer": {}, "trainer": {"step": 1}}
    checkpoint.save(tmp_path, 1, good, keep=3)
    with pytest.raises(RuntimeError, match="disk full"):
        checkpoint.save(tmp_path, 2, {**good, "trainer": Unpicklable()}, keep=3)
    assert checkpoint.latest_valid(tmp_path).step == 1
    assert checkpoint_steps(tmp_path) == [1]


def test_retention_never_counts_damaged_newer_checkpoints(tmp_path):
    state = {"model": {"w": torch.ones(2)}, "optimizer": {}, "trainer": {"step": 0}}
    for step in (2, 4, 6):
        checkpoint.save(tmp_path, step, state, keep=3)
    (tmp_path / "checkpoints" / "step_00000006" / "model.pt").write_bytes(b"garbage")
    assert checkpoint.latest_valid(tmp_path).step == 4
    checkpoint.save(tmp_path, 5, state, keep=1)  # training went on from step 4
    assert checkpoint_steps(tmp_path) == [5, 6]
    assert checkpoint.latest_valid(tmp_path).step == 5


def test_a_damaged_newest_checkpoint_is_skipped_with_a_warning_and_kept(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "6", "--checkpoint-every", "3", "--no-export")[0] == 0
    newest = run / "checkpoints" / "step_00000006" / "model.pt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    code, out, err = train(data_dir, run, "--max-steps", "8", "--checkpoint-every", "8", "--no-export")
    assert code == 0, err
    assert "step_00000006 is damaged (model.pt fails its checksum); falling back" in err
    assert "resumed from" in out and "step 3" in out
    assert newest.exists(), "a damaged checkpoint is evidence: never deleted"


def test_export_loads_with_transformers_pipeline(data_dir, tmp_path):
    from transformers import AutoModelForCausalLM, pipeline

    run = tmp_path / "run"
    code, out, err = train(data_dir, run, "--max-steps", "3")
    assert code == 0, err
    export = run / "export"
    model = AutoModelForCausalLM.from_pretrained(export)
    assert model.config.n_layer == 2 and model.config.vocab_size == 512
    generator = pipeline("text-generation", model=str(export))
    text = generator("def ", max_new_tokens=8, do_sample=False)[0]["generated_text"]
    assert text.startswith("def ") and len(text) > len("def ")
    assert json.loads((export / "config.json").read_text())["model_type"] == "gpt2"


def test_sample_from_checkpoint_and_export(data_dir, tmp_path):
    from tests.support.training_runs import cli

    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "2", "--no-export")[0] == 0
    code, out, err = cli(["sample", str(run), "--prompt", "import", "--max-new-tokens", "5"])
    assert code == 0, err
    assert out.startswith("import")


def test_bench_prints_one_json_line_with_the_measurements(tmp_path, monkeypatch):
    from tests.support.training_runs import cli

    # A cache of its own: another process compiling the same kernel into the shared /tmp cache at the same
    # moment can leave a half-written .so that this one loads ("file too short").
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))

    code, out, err = cli(["bench", "--preset", "tiny", "--batch-size", "2", "--block-size", "16",
                          "--vocab-size", "256", "--steps", "2", "--warmup", "1"])
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["tokens_per_s"] > 0 and result["step_ms"] > 0
    assert result["device"].startswith("cpu") and result["mfu"] is None  # no peak FLOP/s for CPUs
    assert result["tokens_per_s"] == pytest.approx(2 * 16 / (result["step_ms"] / 1000), rel=0.01)


def test_fine_tune_resumes_without_fetching_the_pretrained_model_again(data_dir, tmp_path):
    pretrained = tmp_path / "pretrained"
    assert train(data_dir, tmp_path / "base", "--max-steps", "2")[0] == 0
    (tmp_path / "base" / "export").rename(pretrained)
    code, out, err = train(data_dir, tmp_path / "ft", "--init-from", str(pretrained), "--max-steps", "2",
                           "--checkpoint-every", "2", "--no-export")
    assert code == 0, err
    pretrained.rename(tmp_path / "gone")  # a restarted pod may not reach the hub: it must not need to
    code, out, err = train(data_dir, tmp_path / "ft", "--init-from", str(pretrained), "--max-steps", "4",
                           "--no-export")
    assert code == 0, err
    assert "resumed from" in out and "step 2" in out
    assert checkpoint_steps(tmp_path / "ft")[-1] == 4


def test_one_pass_cross_entropy_matches_torch_in_value_and_gradient():
    from training.model.loss import cross_entropy

    torch.manual_seed(0)
    logits = torch.randn(64, 300, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 300, (64,))
    ours = cross_entropy(logits, target)
    (grad,) = torch.autograd.grad(ours * 3.0, logits)
    reference = torch.nn.functional.cross_entropy(logits, target)
    (expected,) = torch.autograd.grad(reference * 3.0, logits)
    assert ours.item() == pytest.approx(reference.item(), rel=1e-12)
    assert torch.allclose(grad, expected, rtol=1e-10, atol=1e-12)


def test_resuming_with_another_max_steps_says_how_the_learning_rate_changes(data_dir, tmp_path):
    run = tmp_path / "run"
    assert train(data_dir, run, "--max-steps", "4", "--min-lr", "3e-4", "--no-export")[0] == 0
    code, out, err = train(data_dir, run, "--max-steps", "8", "--min-lr", "3e-4", "--no-export")
    assert code == 0, err
    # A finished cosine (lr at its floor) stretched to 8 steps: step 4 is a third into the decay again.
    # Only what changed (issue 30: not "lr 0.003 -> 0.003").
    assert ("the learning-rate schedule changed on resume (max steps 4 -> 8): the lr at step 4 is now 0.00232 "
            "instead of 0.0003") in out


def test_a_schedule_change_that_keeps_the_resume_steps_lr_says_so(capsys):
    """Not 'the lr at step 5 is now 0.0003 instead of 0.0003' (the re-check's case 16 saw it)."""
    from training.trainer.optim import Schedule
    from training.trainer.train import _announce_schedule_change

    _announce_schedule_change(vars(Schedule(6e-4, 6e-5, 10, 100)), Schedule(6e-4, 6e-5, 10, 200), 4)
    assert capsys.readouterr().out == (
        "[trainstack] the learning-rate schedule changed on resume (max steps 100 -> 200): the lr at step 4 stays "
        "0.0003; the steps after it follow the new schedule\n")


def test_background_checkpoint_is_a_snapshot_of_the_moment_it_was_taken(tmp_path):
    from training.checkpoints.writer import BackgroundCheckpointer

    weights = {"w": torch.arange(1_000_000, dtype=torch.float32)}
    weights["tied"] = weights["w"]
    saver = BackgroundCheckpointer(tmp_path, keep=3)
    saver.save(1, {"model": weights, "optimizer": {"state": {0: {"m": torch.ones(3)}}}, "trainer": {"step": 1}})
    weights["w"].mul_(-1)  # the next optimizer step, while the write may still be running
    saver.wait()
    states = checkpoint.latest_valid(tmp_path).load()
    assert torch.equal(states["model"]["w"], torch.arange(1_000_000, dtype=torch.float32))
    assert states["model"]["tied"].data_ptr() == states["model"]["w"].data_ptr(), "tied tensors stay one copy"


def test_a_failed_background_write_is_raised_and_keeps_the_previous_checkpoint(tmp_path):
    from training.checkpoints.writer import BackgroundCheckpointer

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    saver = BackgroundCheckpointer(tmp_path, keep=3)
    good = {"model": {"w": torch.ones(3)}, "optimizer": {}, "trainer": {"step": 1}}
    saver.save(1, good, wait=True)
    saver.save(2, {**good, "trainer": Unpicklable()})
    with pytest.raises(RuntimeError, match="disk full"):
        saver.wait()
    assert checkpoint.latest_valid(tmp_path).step == 1
    saver.save(3, good, wait=True)  # the error was reported once; saving goes on
    assert checkpoint_steps(tmp_path) == [1, 3]


def test_the_interpreter_finishes_a_background_write_before_exiting(tmp_path):
    done = subprocess.run([sys.executable, "-c", (
        "import sys, torch; from pathlib import Path\n"
        "from training.checkpoints.writer import BackgroundCheckpointer\n"
        "big = {'w': torch.randn(16_000_000)}\n"
        "BackgroundCheckpointer(Path(sys.argv[1]), keep=3).save(5, {'model': big, 'optimizer': {}, "
        "'trainer': {'step': 5}})\n"  # returns at once; the process then ends with the write in flight
    ), str(tmp_path)], env=env(), cwd=REPO, timeout=120)
    assert done.returncode == 0
    latest = checkpoint.latest_valid(tmp_path)
    assert latest is not None and latest.step == 5
