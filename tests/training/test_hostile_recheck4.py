"""Issue 21, fourth re-check: an --out inside another run or inside prepared data, a hard link in the
place of a file train writes, and an export that cannot be replaced: one line, nothing lost."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from tests.support.training_runs import one_line_error, train
from tests.training.test_bad_input import tree
from tests.training.test_hostile_inputs import listing


@pytest.mark.parametrize("inner", ["checkpoints/step_00000002/inner", "export/sub", "tokenizer/sub", "sub",
                                   "sub/deeper/run"])
def test_out_inside_another_run_is_refused(data_dir, finished_run, inner):
    """The outer run's next start rotated checkpoints, replaced its export and rewrote its tokenizer:
    a run made inside them was deleted without a word."""
    before = tree(finished_run)
    one_line_error(train(data_dir, finished_run / inner, "--max-steps", "2"), f"is inside the run directory "
                   f"{finished_run}", "a directory of its own, outside it")
    assert tree(finished_run) == before


def test_out_inside_prepared_data_other_than_data_is_refused(data_dir, tmp_path):
    other = tmp_path / "other-data"
    shutil.copytree(data_dir, other)
    before = listing(other)
    one_line_error(train(data_dir, other / "run", "--max-steps", "2"), f"inside the prepared data directory {other}")
    assert listing(other) == before


def test_a_file_named_meta_json_above_out_is_not_prepared_data(data_dir, tmp_path):
    (tmp_path / "meta.json").write_text('{"app": "not ours"}')
    code, _, err = train(data_dir, tmp_path / "run", "--max-steps", "1")
    assert code == 0, err


@pytest.mark.parametrize("name", ["metrics.jsonl", "run_config.json"])
def test_a_file_train_writes_as_a_hard_link_is_refused(data_dir, finished_run, tmp_path, name):
    """n08: metrics.jsonl hard-linked to the user's file: train appended its metrics to it."""
    target = finished_run / name
    kept = target.read_bytes()
    mine = tmp_path / "mine.txt"
    mine.write_bytes(kept)
    target.unlink()
    os.link(mine, target)
    try:
        before = tree(finished_run)
        one_line_error(train(data_dir, finished_run, "--max-steps", "4"), str(target), "hard link", "copy")
        assert mine.read_bytes() == kept
        assert tree(finished_run) == before
    finally:
        target.unlink()
        target.write_bytes(kept)


def test_an_export_that_cannot_be_replaced_is_one_line_and_the_previous_stays(data_dir, finished_run, tmp_path,
                                                                              monkeypatch):
    """n49: export/ on its own mount: the rename that replaces it fails (EBUSY) after the last checkpoint."""
    from training.model import export as exporting

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    previous = tree(run / "export")
    real_rename = os.rename

    def busy(src, dst):
        if str(src) == str(run / "export"):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src))
        return real_rename(src, dst)

    monkeypatch.setattr(exporting.os, "rename", busy)
    one_line_error(train(data_dir, run, "--max-steps", "4", "--checkpoint-every", "2"),
                   f"cannot put the new export in place at {run / 'export'}", "the previous export is untouched")
    assert tree(run / "export") == previous
    assert not [p.name for p in run.iterdir() if p.name.startswith(".export-")]
    assert (run / "checkpoints" / "step_00000004").is_dir()  # the training is kept; `train` again re-exports


def test_an_export_mount_point_is_refused_before_training(data_dir, finished_run, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    real_ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(run / "export") or real_ismount(p))
    before = tree(run)
    one_line_error(train(data_dir, run, "--max-steps", "4"), f"{run / 'export'} is a mount point", "unmount it")
    assert tree(run) == before


@pytest.mark.parametrize("name, make", [
    ("tensorboard", lambda p: p.write_text("x")),     # n81: tensorboard's makedirs traceback on resume
    ("checkpoints", lambda p: p.write_text("x")),
    ("metrics.jsonl", lambda p: os.mkfifo(p)),         # n91: train blocked forever on the FIFO
    ("run_config.json", lambda p: p.mkdir()),
])
def test_a_run_dir_entry_of_the_wrong_kind_is_refused(data_dir, finished_run, tmp_path, name, make):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    target = run / name
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    make(target)
    before = listing(run)
    one_line_error(train(data_dir, run, "--max-steps", "4"), str(target), "move it aside")
    assert listing(run) == before


def test_evaluate_on_a_fifo_says_what_it_is(finished_run, tmp_path):
    """n77: a FIFO was reported as a --data that does not exist."""
    from tests.support.training_runs import cli

    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    one_line_error(cli(["evaluate", str(finished_run), "--data", str(pipe)]), f"--data {pipe} is a FIFO (named pipe)")


@pytest.mark.parametrize("uri", ["s3://bucket/..", "gs://bucket/runs/../other", "s3://bucket/./run", "s3://bucket//x"])
def test_a_snapshot_uri_with_a_dot_part_is_refused(data_dir, tmp_path, uri):
    """n44: a bucket has no parent directory; '..' became part of the object names."""
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "1", "--snapshot-uri", uri),
                   f"--snapshot-uri {uri}: an empty, . or .. part")
    assert not (tmp_path / "run").exists()
