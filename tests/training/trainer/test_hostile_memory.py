"""Issue 21 item 3: a start that dies on memory leaves nothing that overrides the user's fix."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
import torch

from testbed.processes import kill_tree, wait_for
from tests.support.training_runs import TINY, one_line_error, spawn, train
from training.data.dataset import TokenWindows
from training.trainer.step import Stepper


def _numpy_cannot_allocate(self, indices):
    return np.empty(2**50, dtype=np.int64)  # numpy's own allocation failure (_ArrayMemoryError)


def _compiled_oom(self, batches):
    try:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    except torch.OutOfMemoryError as exc:
        raise RuntimeError("backend compiler failed") from exc  # how a wrapper (compile, DDP) re-raises it


def _python_memory_error(self, batches):
    raise MemoryError


@pytest.mark.parametrize("failure", [(TokenWindows, "batch", _numpy_cannot_allocate),
                                     (Stepper, "step", _compiled_oom), (Stepper, "step", _python_memory_error)],
                         ids=["numpy", "wrapped-oom", "MemoryError"])
def test_allocation_failures_on_the_first_step_are_one_line_and_leave_no_run_dir(data_dir, tmp_path, monkeypatch,
                                                                                   failure):
    owner, name, replacement = failure
    monkeypatch.setattr(owner, name, replacement)
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "2", "--batch-size", "64"),
                   "micro-batch of 64 x 32 tokens does not fit", "lower --batch-size")
    assert not (tmp_path / "run").exists()


def test_a_start_killed_before_its_first_checkpoint_does_not_keep_its_batch_size(data_dir, tmp_path):
    """The out-of-memory killer's SIGKILL runs no cleanup: the next start must not inherit its settings."""
    import sys

    run = tmp_path / "run"
    log = tmp_path / "log"
    proc = spawn([sys.executable, "-m", "training", "train", "--data", str(data_dir), "--out", str(run), *TINY,
                  "--batch-size", "6", "--max-steps", "100000", "--checkpoint-every", "100000"], log)
    try:
        wait_for(lambda: "step 2/" in log.read_text(), 120, "the first steps")
    finally:
        kill_tree(proc.pid, signal.SIGKILL)
        proc.wait()
    assert json.loads((run / "run_config.json").read_text())["global_batch_size"] == 6
    assert not (run / "checkpoints").exists() or not list((run / "checkpoints").glob("step_*"))
    code, out, err = train(data_dir, run, "--max-steps", "2", "--batch-size", "2", "--no-export")
    assert code == 0, err
    assert "global batch 2 x 32 tokens" in out, out
    assert json.loads((run / "run_config.json").read_text())["global_batch_size"] == 2
    assert "saved no checkpoint" in out
