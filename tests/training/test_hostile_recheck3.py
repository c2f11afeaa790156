"""Issue 21, third re-check: links in RUN_DIR, file:// URIs naming a host, an --out that cannot be
created, and torchrun environments whose peers never come: one line, exit 2, nothing written."""

from __future__ import annotations

import os
import shutil
import socket
import time

import pytest

from tests.support.training_runs import one_line_error, train
from tests.training.test_bad_input import prepare, tree
from tests.training.test_hostile_inputs import listing
from training.data.dataset import load_meta


@pytest.mark.parametrize("name", ["metrics.jsonl", "run_config.json", "model_config.json", "loss.png"])
def test_a_file_train_writes_in_run_dir_as_a_link_is_refused(data_dir, finished_run, tmp_path, name):
    """t08: a link in the place of metrics.jsonl had train append its metrics to the user's own file."""
    mine = tmp_path / "mine.txt"
    mine.write_text("the user's own notes\n")
    target = finished_run / name
    kept = target.read_bytes()
    target.unlink()
    target.symlink_to(mine)
    try:
        before = tree(finished_run)
        one_line_error(train(data_dir, finished_run, "--max-steps", "4"), str(target), "symbolic link", "remove it")
        assert mine.read_text() == "the user's own notes\n"
        assert tree(finished_run) == before
    finally:
        target.unlink()
        target.write_bytes(kept)


def test_out_under_a_file(data_dir, tmp_path):
    """t01: a file among the folders above --out."""
    (tmp_path / "f0.txt").write_text("text\n")
    for out in ("f0.txt/run", "f0.txt/a/run"):
        before = listing(tmp_path)
        one_line_error(train(data_dir, tmp_path / out), f"--out {tmp_path / out}", f"{tmp_path / 'f0.txt'} is a file")
        assert listing(tmp_path) == before


def test_out_with_a_name_too_long(data_dir, tmp_path):
    """t02: ENAMETOOLONG from pathlib was a traceback."""
    before = listing(tmp_path)
    line = one_line_error(train(data_dir, tmp_path / ("a" * 300)), "--out", "too long", "pick a shorter --out")
    assert len(line) < 300
    assert listing(tmp_path) == before


def test_out_where_nothing_can_be_created(data_dir):
    """t03: /proc takes no new folders, not even from root."""
    one_line_error(train(data_dir, "/proc/self/newrun"), "--out /proc/self/newrun cannot be created")


def test_file_uri_naming_another_host_is_refused(data_dir, tmp_path, monkeypatch):
    """s01: file://otherhost/abs/path became the relative folder ./otherhost/abs/path."""
    monkeypatch.chdir(tmp_path)
    uri = f"file://otherhost{tmp_path}/snaps"
    one_line_error(train(data_dir, tmp_path / "new", "--snapshot-uri", uri), f"--snapshot-uri {uri}",
                   "names the host 'otherhost'", "file:///PATH")
    assert listing(tmp_path) == []


def test_file_uri_naming_localhost_is_this_machine(data_dir, tmp_path, monkeypatch):
    """file://localhost/PATH is file:///PATH (RFC 8089), not ./localhost/PATH."""
    monkeypatch.chdir(tmp_path)
    code, _, err = train(data_dir, tmp_path / "new", "--snapshot-uri", f"file://localhost{tmp_path}/snaps")
    assert code == 0, err
    assert not (tmp_path / "localhost").exists()
    assert (tmp_path / "snaps" / "snapshot_run.json").is_file() or any((tmp_path / "snaps").iterdir())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["unresolvable", "no-peer"])
def test_a_torchrun_environment_whose_peers_never_meet(data_dir, tmp_path, monkeypatch, case):
    """e03, e06: a DistNetworkError or DistStoreError traceback (and a resolver warning each second)
    after --dist-timeout; now one line naming the address and the fix."""
    rank, addr = ("1", "no-such-host.invalid") if case == "unresolvable" else ("0", "127.0.0.1")
    for name, value in (("WORLD_SIZE", "2"), ("RANK", rank), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1"),
                        ("MASTER_ADDR", addr), ("MASTER_PORT", str(_free_port()))):
        monkeypatch.setenv(name, value)
    before = listing(tmp_path)
    began = time.monotonic()
    line = one_line_error(train(data_dir, tmp_path / "new", "--dist-timeout", "5"), f"MASTER_ADDR={addr}",
                          "--dist-timeout 5s", "unset WORLD_SIZE")
    assert time.monotonic() - began < 60
    assert ("could not reach rank 0" if case == "unresolvable" else "only 1 of WORLD_SIZE=2") in line
    assert listing(tmp_path) == before


def test_a_teacher_hub_name_offline_names_distill_from(data_dir, tmp_path, monkeypatch):
    """v18: distill --distill-from NAME offline blamed --init-from, a flag the user never gave."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    line = one_line_error(train(data_dir, tmp_path / "new", "--distill-from", "no-such-org/no-such-teacher"),
                          "--distill-from no-such-org/no-such-teacher", "hub name")
    assert "--init-from" not in line
    assert not (tmp_path / "new").exists()


def test_data_given_as_a_file(data_dir, tmp_path):
    """t30: --data DATA_DIR/meta.json was 'not a prepared data directory (no meta.json)', with a fix that
    pointed prepare's --out at that existing file."""
    line = one_line_error(train(data_dir / "meta.json", tmp_path / "new"), f"--data {data_dir / 'meta.json'}",
                          f"pass --data {data_dir}")
    assert "no meta.json" not in line and "--out" not in line
    text = tmp_path / "notes.txt"
    text.write_text("some text\n")
    one_line_error(train(text, tmp_path / "new"), f"--data {text} is a file", f"prepare --data {text} --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("max_steps", ["2", "4"])
def test_another_runs_snapshots_restored_into_a_new_out_are_named(data_dir, tmp_path, max_steps):
    """s08: an empty --out restored from another run's --snapshot-uri was told to 'use a new --out', which
    it was: the line names the --snapshot-uri as what holds the other run, before any export is promised."""
    snaps = f"file://{tmp_path}/snaps"
    assert train(data_dir, tmp_path / "runA", "--max-steps", "2", "--checkpoint-every", "2",
                 "--snapshot-uri", snaps)[0] == 0
    before = listing(tmp_path)
    result = train(data_dir, tmp_path / "new", "--max-steps", max_steps, "--n-layer", "3", "--snapshot-uri", snaps)
    line = one_line_error(result, f"--snapshot-uri {snaps}", "n_layer 2 there vs 3 now",
                          "a --snapshot-uri of this run's own")
    assert "use a new --out" not in line and "writing its export" not in result[1]
    assert listing(tmp_path) == before


@pytest.mark.parametrize("damage", ["file", "garbage"])
def test_data_dirs_tokenizer_damaged_says_prepare_again(data_dir, tmp_path, damage):
    """t28: a DATA_DIR whose tokenizer is a file ended 'or --tokenizer train:VOCAB' (a flag of prepare,
    not train) around a transformers message cut mid-word."""
    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    tok = load_meta(data).tokenizer_dir
    if damage == "file":
        shutil.rmtree(tok)
        tok.write_text("x\n")
    else:
        for name in os.listdir(tok):
            (tok / name).write_text("{ not json")
    line = one_line_error(train(data, tmp_path / "new"), str(tok), "re-run `python -m training prepare`")
    assert "train:VOCAB" not in line and not (tmp_path / "new").exists()
    if damage == "file":
        assert "is a file" in line


def test_prepare_data_that_is_prepared_data_or_a_run(data_dir, finished_run, tmp_path):
    """p08, p09: prepare --data DATA_DIR blamed tokenizer.json's missing 'text' column, --data RUN_DIR
    metrics.jsonl's; each is now named for what it is."""
    for source, fragment in ((data_dir, "is prepared data"), (finished_run, "is a training run's directory")):
        result = prepare("--data", str(source), "--out", str(tmp_path / "d2"), "--tokenizer", "train:300")
        one_line_error(result, f"--data {source}", fragment, "not text")
        assert not (tmp_path / "d2").exists()
