"""Issue 21 items 2 and 4: no file silently left out of the corpus; two prepares into one --out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.training.helpers import REPO, env
from tests.training.test_bad_input import prepare

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
