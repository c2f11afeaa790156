"""Paths inside this repository, as the Pulumi engine and its provider plugins should see them."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]  # trainstack/infra/core/paths.py
# The checkout's chart; an installed trainstack carries a copy as package data (pyproject's package-data),
# found through importlib.resources wherever pip installed it (a venv, --user, --prefix, --target).
_CHECKOUT_CHART_DIR = REPO_ROOT / "workloads" / "charts" / "training-job"
_INSTALLED_CHART_DIR = Path(str(importlib.resources.files("trainstack").joinpath("charts", "training-job")))
TRAINING_JOB_CHART_DIR = _CHECKOUT_CHART_DIR if _CHECKOUT_CHART_DIR.is_dir() else _INSTALLED_CHART_DIR
DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
# TensorBoard's own small CPU image; its directory is its whole build context.
TENSORBOARD_IMAGE_DIR = REPO_ROOT / "images" / "tensorboard"
TENSORBOARD_DOCKERFILE = TENSORBOARD_IMAGE_DIR / "Dockerfile"


def project_relative(path: Path | str) -> str:
    """`path` relative to the working directory (the Pulumi project root when `pulumi up` runs).

    Provider plugins run in the same directory as the program, so a relative path resolves the
    same for them, and the state then holds "workloads/charts/training-job" instead of one
    machine's absolute path, which would show as a change on every other machine.
    """
    return os.path.relpath(Path(path), Path.cwd())
