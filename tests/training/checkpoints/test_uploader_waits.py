"""The uploader's wait for a checkpoint that the background writer is still committing.

On a run's first save the upload job may start before the writer has even made RUN_DIR/checkpoints;
by the time a retry comes, local retention may have removed that checkpoint. The uploader must not
fail the first and then wait its full commit timeout for the second: that held up every later
upload (test_snapshots' killed-mid-upload test, now and then: no upload ever completed).
"""

from __future__ import annotations

import time

import torch

from training.checkpoints import checkpoint
from training.checkpoints.snapshots import Store, Uploader


def states(step: int) -> dict:
    return {"model": {"w": torch.full((4,), float(step))}, "optimizer": {}, "trainer": {"step": step}}


def test_a_first_checkpoint_pruned_before_its_upload_does_not_hold_up_the_later_ones(tmp_path):
    run, bucket = tmp_path / "run", tmp_path / "bucket"
    run.mkdir()
    uploader = Uploader(Store(f"file://{bucket}"), run, keep=2, backoff_s=1.0)
    uploader.submit_checkpoint(4)  # before the writer has made checkpoints/
    time.sleep(0.5)
    for step in (4, 8, 12):  # keep=2: step 4 is gone again before the upload gets to it
        checkpoint.save(run, step, states(step), keep=2)
        if step > 4:
            uploader.submit_checkpoint(step)
    assert not (run / "checkpoints" / "step_00000004").exists()
    assert uploader.wait(timeout_s=20), "the uploads of steps 8 and 12 were held up"
    for step in (8, 12):
        name = f"step_{step:08d}"
        assert (bucket / "checkpoints" / name / "manifest.json").read_bytes() == \
            (run / "checkpoints" / name / "manifest.json").read_bytes()
    assert not (bucket / "checkpoints" / "step_00000004" / "manifest.json").exists()
