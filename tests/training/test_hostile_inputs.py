"""Issue 21 items 6, 7 and 10: odd run directories and lock files, torchrun's environment set by hand,
and the wording of refusals (devices and FIFOs as --data, a run past --max-steps, a teacher in --out)."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.training_runs import cli, one_line_error, train
from tests.training.test_bad_input import prepare, tree


# ---------------------------------------------------------------- 6: odd run directories and locks
def listing(root) -> list[str]:
    """Every name under `root`, links not followed (tree() would follow a link loop)."""
    return sorted(os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files)


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_out_as_a_dangling_link_or_a_link_loop(data_dir, tmp_path, command):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "self").symlink_to(tmp_path / "self")
    cases = {"dangling": "which does not exist", "dangling/run": "which does not exist",
             "loop-a": "symbolic link loop", "loop-b/run": "symbolic link loop", "self": "symbolic link loop"}
    for out, fragment in cases.items():
        before = listing(tmp_path)
        if command == "train":
            result = train(data_dir, tmp_path / out, "--max-steps", "2")
        else:
            result = prepare("--data", str(data_dir / "meta.json"), "--out", str(tmp_path / out), "--tokenizer",
                             "train:300")
        one_line_error(result, f"--out {tmp_path / out}", fragment)
        assert listing(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_data_as_a_link_loop(data_dir, tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    one_line_error(train(tmp_path / "loop", tmp_path / "run"), "--data", "symbolic link loop")
    one_line_error(prepare("--data", str(tmp_path / "loop"), "--out", str(tmp_path / "d")), "--data",
                   "symbolic link loop")



@pytest.mark.parametrize("kind", ["directory", "link", "fifo"])
def test_a_lock_that_is_not_a_file_is_refused_at_once(data_dir, finished_run, kind):
    lock = finished_run / ".lock"
    if kind == "directory":
        lock.mkdir()
        (lock / "x").write_text("")
    elif kind == "link":
        lock.symlink_to(finished_run / "nowhere")
    else:
        os.mkfifo(lock)
    try:
        before = tree(finished_run / "checkpoints")
        began = time.monotonic()
        one_line_error(train(data_dir, finished_run, "--max-steps", "4"), str(lock), "remove it")
        assert time.monotonic() - began < 20
        assert tree(finished_run / "checkpoints") == before
    finally:
        if lock.is_dir() and not lock.is_symlink():
            (lock / "x").unlink()
            lock.rmdir()
        else:
            lock.unlink()


@pytest.mark.parametrize("content", [b"", b"garbage", b"\x00\xff\xfe", b"[1, 2]", b'{"pid": "x"}', b"null"])
def test_a_lock_holding_garbage_is_taken_over_at_once_with_a_warning(data_dir, tmp_path, finished_run, content):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / ".lock").write_bytes(content)
    began = time.monotonic()
    code, _, err = train(data_dir, run, "--max-steps", "3", "--no-export")
    assert code == 0, err
    assert time.monotonic() - began < 30, "no 35 s watch of a lock nobody refreshes"
    assert "names no owner" in err and "pid None" not in err
    assert not (run / ".lock").exists()


# ---------------------------------------------------------------- 7: torchrun's environment by hand
@pytest.mark.parametrize("env, fragment", [
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0'"),
    ({"WORLD_SIZE": "-3"}, "WORLD_SIZE='-3'"),
    ({"WORLD_SIZE": "1.5"}, "WORLD_SIZE='1.5'"),
    ({"RANK": "x"}, "RANK='x'"),
    ({"RANK": "1"}, "RANK='1'"),
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "RANK='2'"),
    ({"RANK": "-1"}, "RANK='-1'"),
    ({"LOCAL_RANK": "gpu0"}, "LOCAL_RANK='gpu0'"),
    ({"LOCAL_RANK": "3"}, "LOCAL_RANK='3'"),
    ({"WORLD_SIZE": "4", "RANK": "1", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "LOCAL_WORLD_SIZE='8'"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR and MASTER_PORT are not set"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "29500"}, "MASTER_ADDR is not set"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "http"}, "MASTER_PORT='http'"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "70000"}, "MASTER_PORT='70000'"),
])
def test_torchrun_variables_set_by_hand(data_dir, tmp_path, monkeypatch, env, fragment):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    began = time.monotonic()
    one_line_error(train(data_dir, tmp_path / "run", "--max-steps", "2", "--dist-timeout", "5"), fragment, "torchrun")
    assert time.monotonic() - began < 30
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- 10: wording
@pytest.mark.parametrize("source", ["/dev/zero", "/dev/null", "fifo"])
def test_devices_and_fifos_as_data_are_named_as_such(tmp_path, source):
    if source == "fifo":
        source = str(tmp_path / "fifo")
        os.mkfifo(source)
    line = one_line_error(prepare("--data", source, "--out", str(tmp_path / "d"), "--tokenizer", "train:300"),
                          f"--data {source} is a", "not a file")
    assert "does not exist" not in line


def test_a_fifo_inside_a_data_directory_is_named(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Some words to read and learn from. " * 40)
    os.mkfifo(src / "pipe")
    code, _, err = prepare("--data", str(src), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert code == 0, err
    assert f"{src / 'pipe'}" in err and "not regular files" in err


def files_with_times(root):
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("export", [[], ["--no-export"]])
def test_resuming_at_or_past_max_steps_says_so_once_and_touches_nothing(data_dir, tmp_path, finished_run, export):
    """Re-check 16: no lr line, no "steps 2 -> 1", no new record, plot, TensorBoard file or export."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = files_with_times(run)
    for max_steps in ("2", "1"):
        code, out, err = train(data_dir, run, "--max-steps", max_steps, *export)
        assert code == 0, err
        assert all(line.startswith("[trainstack] warning: --warmup-steps") for line in err.splitlines()), err
        assert out.splitlines() == [f"[trainstack] the run is already at step 2, at or past --max-steps {max_steps}: "
                                    "there is nothing left to train; RUN_DIR is left as it is; raise --max-steps to "
                                    "train on"], out
    assert files_with_times(run) == before


@pytest.mark.parametrize("export", ["missing", "older than the checkpoint", "truncated", "config not JSON"])
def test_resuming_at_max_steps_writes_only_an_export_that_is_due(data_dir, tmp_path, finished_run, export):
    """Trained with --no-export, or the export's write failed (full disk) and an earlier session's stayed."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    if export == "missing":
        shutil.rmtree(run / "export")
    elif export == "older than the checkpoint":
        os.utime(run / "export" / "config.json", ns=(0, 0))
    elif export == "truncated":
        weights = run / "export" / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-100])
    else:
        (run / "export" / "config.json").write_text("{")
    before = files_with_times(run)
    code, out, err = train(data_dir, run, "--max-steps", "2")
    assert code == 0, err
    assert "nothing left to train; writing its export (missing, damaged, or older than that checkpoint)" in out, out
    after = files_with_times(run)
    assert after["export/config.json"][1] > before.get("export/config.json", (b"", 0))[1]
    assert cli(["sample", str(run / "export"), "--max-new-tokens", "2"])[0] == 0
    assert {k: v for k, v in after.items() if not k.startswith("export/")} == \
        {k: v for k, v in before.items() if not k.startswith("export/")}


@pytest.mark.parametrize("inside", ["", "/export"])
def test_a_teacher_or_pretrained_model_inside_out_is_named(data_dir, finished_run, inside):
    before = tree(finished_run)
    source = f"{finished_run}{inside}"
    line = one_line_error(train(data_dir, finished_run, "--distill-from", source, "--max-steps", "4"),
                          f"--distill-from {source} is this run's own --out")
    assert "--init-from" not in line
    one_line_error(train(data_dir, finished_run, "--init-from", source, "--max-steps", "4"),
                   f"--init-from {source} is this run's own --out")
    assert tree(finished_run) == before


def test_a_distilled_run_resumed_without_its_teacher_names_distill_from(data_dir, tmp_path, finished_run):
    run = tmp_path / "student"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({
        **json.loads((finished_run / "run_config.json").read_text()), "init_from": f"distill:{finished_run}"}))
    ckpt = run / "checkpoints"
    import shutil

    shutil.copytree(finished_run / "checkpoints", ckpt)
    line = one_line_error(train(data_dir, run, "--max-steps", "4"), f"--distill-from {finished_run}")
    assert "--init-from ''" not in line
