"""`pip install` of trainstack without the training extras deploys: the components import and compose, no torch.

A fresh virtualenv gets the Pulumi lock (requirements.txt, what the package's dependencies resolve to; cached
by content like tests/venvs.py's) and then this checkout with --no-deps; `pip check` confirms the lock
satisfies every declared dependency. The composing script runs from a temporary folder in isolated mode,
so nothing of the checkout is on its path.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.venvs import venv_from

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.venv
def test_installed_without_training_extras_composes_a_component_outside_the_repo(request, tmp_path):
    python = venv_from(REPO / "requirements.txt", request.config.cache, "library")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    # From a copy without build output: pip builds in the source tree, and a stale build/ there would leak
    # removed modules into the wheel (and litter the checkout).
    source = shutil.copytree(REPO, tmp_path / "source", symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "venv", ".pytest_cache", ".ruff_cache", "build", "*.egg-info", "__pycache__"))
    subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(source)], check=True, cwd=tmp_path)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0

    script = shutil.copy(Path(__file__).with_name("compose_installed.py"), tmp_path / "compose.py")
    composed = subprocess.run([str(python), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300)
    assert composed.returncode == 0, composed.stdout[-3000:] + composed.stderr[-3000:]
    assert composed.stdout.strip().splitlines()[-1] == "composed default train"


def test_the_images_build_context_still_installs_the_trainer_alone(tmp_path):
    """images/Dockerfile copies only pyproject.toml and training/, then installs `.` with --no-deps and no build
    isolation: the package's new data-files and packages must not break that build."""
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(REPO / "pyproject.toml", context)
    shutil.copytree(REPO / "training", context / "training", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "installed"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--no-build-isolation", "--target", str(target), "."], cwd=context, capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) == ["bin", "training"]
