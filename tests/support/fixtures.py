"""Fixtures of the tests that train: a small real corpus, prepared once per session (corpus_dir, data_dir)."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest

from tests.support.training_runs import cli, train

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# A few hundred KB of real text: varied enough for a tokenizer, small enough to prepare in seconds.
CORPUS_FILES = ["textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py", "heapq.py", "queue.py",
                "sched.py", "string.py", "colorsys.py", "json/__init__.py", "json/decoder.py",
                "json/encoder.py", "json/scanner.py", "json/tool.py"]


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name in CORPUS_FILES:
        target = root / name.replace("/", "_").replace(".py", ".txt")
        shutil.copy(STDLIB / name, target)
    return root


@pytest.fixture(scope="session")
def data_dir(corpus_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prepared") / "data"
    code, _, err = cli(["prepare", "--data", str(corpus_dir), "--out", str(out), "--tokenizer", "train:512",
                        "--val-fraction", "0.05", "--num-proc", "1"])
    assert code == 0, err
    return out


@pytest.fixture(scope="session")
def finished_run(data_dir, tmp_path_factory) -> Path:
    """A run trained to step 2 with its checkpoint and export, shared by the hostile-input tests: a test
    that changes it in place puts it back (the others copy it or are refused before writing)."""

    run = tmp_path_factory.mktemp("finished") / "run"
    code, _, err = train(data_dir, run, "--max-steps", "2", "--checkpoint-every", "2")
    assert code == 0, err
    return run
