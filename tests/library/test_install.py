"""`pip install` of trainstack without the training extras deploys: the components import and compose, no torch.

A fresh virtualenv gets the Pulumi lock (requirements.txt, what the package's dependencies resolve to; cached
by content like tests/venvs.py's) and then this checkout with --no-deps; `pip check` confirms the lock
satisfies every declared dependency. The composing script runs from a temporary folder in isolated mode,
so nothing of the checkout is on its path.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.venvs import venv_from

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.venv
def test_installed_without_training_extras_composes_a_component_outside_the_repo(request, tmp_path):
    python = venv_from(REPO / "requirements.txt", request.config.cache, "library")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(REPO)], check=True, cwd=tmp_path)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0

    script = shutil.copy(Path(__file__).with_name("compose_installed.py"), tmp_path / "compose.py")
    composed = subprocess.run([str(python), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300)
    assert composed.returncode == 0, composed.stdout[-3000:] + composed.stderr[-3000:]
    assert composed.stdout.strip().splitlines()[-1] == "composed default train"
