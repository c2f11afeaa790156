"""Issue 21 items 2 and 4: no file silently left out of the corpus; two prepares into one --out."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from testbed.processes import wait_for
from tests.support.training_runs import REPO, env, one_line_error
from tests.training.test_bad_input import prepare, tree

LICENSES = ["Apache-2.0", "MPL-2.0", "GPL-3.0-or-later", "CC-BY-4.0", "LGPL-2.1", "LICENSE", "BSD-3-Clause",
            "COPYING.v2"]


def _text(name: str) -> str:
    return f"The terms of {name}, written out in plain words for everyone. " * 40


def test_license_files_with_dots_in_their_names_are_read(tmp_path):
    src = tmp_path / "licenses"
    src.mkdir()
    for name in LICENSES:
        (src / name).write_text(_text(name))
    code, _, err = prepare("--data", str(src), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert code == 0, err
    sources = json.loads((tmp_path / "d" / "meta.json").read_text())["sources"]
    assert sorted(p.rsplit("/", 1)[-1] for p in sources) == sorted(LICENSES)


def test_every_skipped_file_is_named_with_its_reason_even_when_others_are_read(tmp_path):
    src = tmp_path / "mixed"
    (src / ".git").mkdir(parents=True)
    (src / "good.txt").write_text(_text("good"))
    skipped = {
        "photo.png": "without a suffix from --extensions",
        "notes.json5": "without a suffix from --extensions",
        "tool": "binary file",
        "libfoo.so.6": "binary file",
        "EMPTY": "no text",
        "blank.md": "no text",
        ".git": "hidden",
    }
    (src / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (src / "notes.json5").write_text("{a: 1}")
    (src / "tool").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (src / "libfoo.so.6").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (src / "EMPTY").write_text("")
    (src / "blank.md").write_text(" \n\t\n")
    (src / ".git" / "config").write_text("[core]\n")
    code, _, err = prepare("--data", str(src), "--out", str(tmp_path / "d"), "--tokenizer", "train:300")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "skipping" in line]
    for name, reason in skipped.items():
        assert any(str(src / name) in line and reason in line for line in warnings), (name, err)


def _prepare_process(src: Path, out: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "training", "prepare", "--data", str(src), "--out", str(out),
                             "--tokenizer", "train:300", "--num-proc", "1"], stdout=open(log, "w"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, env=env(), cwd=REPO)


def _consistent(out: Path) -> dict:
    """meta.json names one generation whose shards have exactly the sizes it records, and nothing else."""
    meta = json.loads((out / "meta.json").read_text())
    itemsize = np.dtype(meta["dtype"]).itemsize
    generations = {p.name for p in out.glob("gen-*")}
    assert generations == {meta["tokenizer"]["dir"].split("/")[0]}, generations
    for split in meta["splits"].values():
        for shard in split["shards"]:
            assert (out / shard["file"]).stat().st_size == shard["tokens"] * itemsize, shard
    return meta


def test_a_prepare_waits_while_another_holds_the_data_directory(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text(_text("a"))
    out = tmp_path / "d"
    out.mkdir()
    fd = os.open(out / ".prepare.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"4242")
    proc = _prepare_process(src, out, tmp_path / "log")
    try:
        wait_for(lambda: "waiting for it to finish" in (tmp_path / "log").read_text(), 120, "the waiting message")
        assert "pid 4242" in (tmp_path / "log").read_text()
        time.sleep(1.0)
        assert not (out / "meta.json").exists() and not list(out.glob("gen-*"))
    finally:
        os.close(fd)
    assert proc.wait(timeout=300) == 0, (tmp_path / "log").read_text()
    _consistent(out)


def test_two_prepares_into_one_directory_leave_one_consistent_result(tmp_path):
    sources = []
    for name, repeat in (("small", 40), ("large", 400)):
        src = tmp_path / name
        src.mkdir()
        (src / f"{name}.txt").write_text(_text(name) * (repeat // 40))
        sources.append(src)
    out = tmp_path / "d"
    procs = [_prepare_process(src, out, tmp_path / f"log{i}") for i, src in enumerate(sources)]
    codes = [p.wait(timeout=300) for p in procs]
    logs = [(tmp_path / f"log{i}").read_text() for i in range(2)]
    assert codes == [0, 0], logs
    meta = _consistent(out)
    assert len(meta["sources"]) == 1


# ---------------------------------------------------------------- re-check cases 4, 11, 12, 19
def _corpus(tmp_path: Path) -> Path:
    src = tmp_path / "corpus"
    src.mkdir()
    for name in ("a.txt", "b.txt"):
        (src / name).write_text(_text(name))
    return src


@pytest.mark.parametrize("what, make", [
    ("a directory", lambda p: p.mkdir()),
    ("a symbolic link", lambda p: p.symlink_to(p.parent.parent / "corpus" / "a.txt")),
    ("a symbolic link", lambda p: p.symlink_to(p.parent / "nowhere")),
    ("not a regular file", os.mkfifo),  # it opened, then ftruncate failed: a traceback, and the FIFO removed
])
def test_a_prepare_lock_that_is_not_a_lock_file_is_one_line(tmp_path, what, make):
    src = _corpus(tmp_path)
    out = tmp_path / "d"
    assert prepare("--data", str(src), "--out", str(out), "--tokenizer", "train:300")[0] == 0
    make(out / ".prepare.lock")
    before = (out / "meta.json").read_text(), sorted(p.name for p in out.iterdir()), tree(src)
    one_line_error(prepare("--data", str(src), "--out", str(out), "--tokenizer", "train:300"),
                   ".prepare.lock is " + what, "remove it")
    assert ((out / "meta.json").read_text(), sorted(p.name for p in out.iterdir()), tree(src)) == before


def _no_warning(result) -> None:
    assert not [line for line in result[2].splitlines() if "warning" in line], result[2]


@pytest.mark.parametrize("out", ["corpus", "corpus/", "./corpus/../corpus"])
def test_out_equal_to_the_data_directory_is_refused_before_anything_is_made(tmp_path, out, monkeypatch):
    src = _corpus(tmp_path)
    before = tree(src)
    monkeypatch.chdir(tmp_path)
    result = prepare("--data", "corpus", "--out", out, "--tokenizer", "train:300")
    one_line_error(result, "is the --data directory", "new --out")
    _no_warning(result)
    assert tree(src) == before, "no lock (or anything else) made in the user's corpus"


@pytest.mark.parametrize("target", ["a.txt", "other/notes.txt"])
def test_out_that_is_a_user_file_is_refused_without_a_warning_first(tmp_path, target):
    src = _corpus(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    result = prepare("--data", str(src), "--out", str(tmp_path / ("corpus/" + target if target == "a.txt" else target)),
                     "--tokenizer", "train:300")
    one_line_error(result, "is a file")
    _no_warning(result)
    assert tree(tmp_path) == before


def test_out_as_a_folder_of_other_files_is_refused_before_a_lock_is_made(tmp_path):
    src = _corpus(tmp_path)
    other = tmp_path / "papers"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    one_line_error(prepare("--data", str(src), "--out", str(other), "--tokenizer", "train:300"), "already holds other files")
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_out_inside_the_corpus_does_not_list_prepares_own_lock(tmp_path):
    src = _corpus(tmp_path)
    code, _, err = prepare("--data", str(src), "--out", str(src / "sub"), "--tokenizer", "train:300")
    assert code == 0, err
    assert ".prepare.lock" not in err
