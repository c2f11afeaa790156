"""Issue 21 item 1: a --snapshot-uri that points at another run, at the data or at RUN_DIR itself is
refused before anything is written; resuming the same run from its snapshots still works and says so."""

from __future__ import annotations

import pytest

from tests.support.training_runs import one_line_error, train
from tests.training.test_bad_input import tree


@pytest.fixture(scope="module")
def other_run(data_dir, tmp_path_factory):
    """A finished run (with its export), trained without --snapshot-uri."""
    run = tmp_path_factory.mktemp("other") / "run"
    code, _, err = train(data_dir, run, "--max-steps", "2", "--checkpoint-every", "2")
    assert code == 0, err
    return run


@pytest.mark.parametrize("inside", ["", "/", "/checkpoints", "/export", "/tensorboard/x"])
def test_another_runs_directory_is_refused_and_left_untouched(data_dir, other_run, tmp_path, inside):
    before = tree(other_run)
    result = train(data_dir, tmp_path / "new", "--max-steps", "4", "--snapshot-uri", f"file://{other_run}{inside}")
    one_line_error(result, "--snapshot-uri", "of another run", "of its own")
    assert tree(other_run) == before
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("inside", ["", "/", "/sub", "/.cache/x"])
def test_the_data_directory_is_refused(data_dir, tmp_path, inside):
    before = tree(data_dir)
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", f"file://{data_dir}{inside}"),
                   "prepared data directory")
    assert tree(data_dir) == before and not (tmp_path / "new").exists()


def test_another_prepared_data_directory_is_refused(data_dir, tmp_path):
    other = tmp_path / "data2"
    other.mkdir()
    (other / "meta.json").write_text((data_dir / "meta.json").read_text())
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", f"file://{other}/snap"),
                   "prepared data directory")


@pytest.mark.parametrize("inside", ["", "/snap", "/checkpoints"])
def test_run_dir_itself_is_refused(data_dir, tmp_path, inside):
    run = tmp_path / "run"
    one_line_error(train(data_dir, run, "--snapshot-uri", f"file://{run}{inside}"), "inside this run's --out")
    assert not run.exists()


def test_a_folder_holding_the_run_dir_is_refused(data_dir, tmp_path):
    one_line_error(train(data_dir, tmp_path / "a" / "run", "--snapshot-uri", f"file://{tmp_path / 'a'}"),
                   "contains this run's --out")
    assert not (tmp_path / "a").exists()


def test_a_bucket_holding_prepared_data_is_refused(data_dir, tmp_path):
    """What a store is checked for when it is not a local path (the check reads meta.json through fsspec)."""
    import shutil

    copy = tmp_path / "bucket" / "data"
    shutil.copytree(data_dir, copy)
    (copy / "extra").mkdir()
    one_line_error(train(data_dir, tmp_path / "run", "--snapshot-uri", f"file://{copy}/"), "prepared data")


def test_a_run_with_checkpoints_of_its_own_cannot_take_another_runs_snapshots(data_dir, tmp_path):
    store = tmp_path / "store"
    assert train(data_dir, tmp_path / "a", "--max-steps", "2", "--no-export", "--snapshot-uri", f"file://{store}")[0] == 0
    assert train(data_dir, tmp_path / "b", "--max-steps", "2", "--no-export")[0] == 0
    before = tree(store)
    one_line_error(train(data_dir, tmp_path / "b", "--max-steps", "4", "--no-export", "--snapshot-uri",
                         f"file://{store}"), "holds the snapshots of another run", "checkpoints of its own")
    assert tree(store) == before


def test_the_same_run_resumes_from_its_snapshots_and_says_so(data_dir, tmp_path):
    store = tmp_path / "store"
    assert train(data_dir, tmp_path / "a", "--max-steps", "2", "--no-export", "--snapshot-uri", f"file://{store}")[0] == 0
    code, out, err = train(data_dir, tmp_path / "fresh", "--max-steps", "4", "--no-export", "--snapshot-uri",
                           f"file://{store}")
    assert code == 0, err
    assert "resuming run" in out and "checkpoint of step 2" in out


# ---------------------------------------------------------------- re-check cases 1, 2, 13, 14
@pytest.mark.parametrize("where, expected", [
    ("user_file", "is a file"),
    ("/dev/null", "is not a directory"),
    ("user_file/sub", "which is a file"),
    ("link_to_file", "is a file"),
])
def test_a_location_that_is_not_a_directory_is_refused(data_dir, tmp_path, where, expected):
    (tmp_path / "user_file").write_text("mine")
    (tmp_path / "link_to_file").symlink_to(tmp_path / "user_file")
    path = where if where.startswith("/") else f"{tmp_path}/{where}"
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", f"file://{path}"), "--snapshot-uri", expected)
    assert (tmp_path / "user_file").read_text() == "mine" and not (tmp_path / "new").exists()


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_location_is_refused(data_dir, tmp_path, value):
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", value), "--snapshot-uri is empty")
    assert not (tmp_path / "new").exists()


def test_a_local_folder_of_other_files_is_refused(data_dir, tmp_path):
    """A plain folder gets no checkpoints/ among its files (under a bucket prefix, other objects are left alone)."""
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    before = tree(folder)
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", f"file://{folder}"), "already holds other files")
    assert tree(folder) == before and not (tmp_path / "new").exists()


# ---------------------------------------------------------------- fresh sweep: a damaged manifest in the store
@pytest.mark.parametrize("manifest", [b"[1]", b'{"files": [1]}', b'{"files": {"../../run_config.json": '
                                      b'{"bytes": 1, "sha256": "0"}}}', b'{"files": {"model.pt": 3}}'])
def test_a_malformed_manifest_in_the_store_falls_back_to_the_previous_checkpoint(data_dir, tmp_path, manifest):
    """It was an AttributeError or TypeError traceback (a manifest that is JSON but not a file list)."""
    store = tmp_path / "store"
    assert train(data_dir, tmp_path / "a", "--max-steps", "2", "--checkpoint-every", "1", "--no-export",
                 "--snapshot-uri", f"file://{store}")[0] == 0
    (store / "checkpoints" / "step_00000002" / "manifest.json").write_bytes(manifest)
    code, out, err = train(data_dir, tmp_path / "b", "--max-steps", "2", "--no-export", "--snapshot-uri",
                           f"file://{store}")
    assert code == 0 and "Traceback" not in err, err
    assert f"file://{store}/checkpoints/step_00000002 is damaged (malformed manifest" in err, err
    assert "restored the checkpoint of step 1" in out, out
    assert not (tmp_path / "run_config.json").exists(), "nothing is written outside RUN_DIR"
    # trained from step 1 again, its step 2 replaces the damaged one in the store
    local = (tmp_path / "b" / "checkpoints" / "step_00000002" / "manifest.json").read_bytes()
    assert (store / "checkpoints" / "step_00000002" / "manifest.json").read_bytes() == local


@pytest.mark.parametrize("uri", ["gs:///x", "s3:///x/y", "gcs:// /x"])
def test_a_uri_without_a_bucket_is_refused_at_once(data_dir, tmp_path, uri):
    """gs:///x waited the full 30 s reachability bound (credentials lookup) before a one-line error."""
    import time

    began = time.monotonic()
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", uri), f"--snapshot-uri {uri}: no bucket name")
    assert time.monotonic() - began < 20
    assert not (tmp_path / "new").exists()
