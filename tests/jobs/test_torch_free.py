"""The job CLI runs on a laptop without torch: importing it pulls in no torch or transformers."""

from __future__ import annotations

import subprocess
import sys

from tests.stack_runs import REPO


def test_the_cli_imports_no_torch():
    code = ("import sys, trainstack.jobs.cli, trainstack.__main__; "
            "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert 'trainstack = "trainstack.jobs.cli:main"' in text and '"trainstack*"' in text
