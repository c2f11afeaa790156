"""The training image, checked statically (no Docker engine here; checkov runs in test_checkov)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml

from .chart import CHART_DIR, REPO_ROOT, render, trainer
from .dockerfile import instructions, is_ignored

DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
STEPS = instructions(DOCKERFILE)


def arguments(instruction: str) -> list[str]:
    return [args for name, args in STEPS if name == instruction]


def copy_sources() -> list[str]:
    sources = []
    for args in arguments("COPY"):
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        sources.extend(words[:-1])  # the last word is the destination
    return sources


def base_images() -> list[str]:
    """FROM references with ARG defaults filled in: the production base (make test-image overrides it)."""
    defaults = dict(arg.split("=", 1) for arg in arguments("ARG") if "=" in arg)
    return [re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], image.split()[0]) for image in arguments("FROM")]


def test_base_image_is_pinned_by_digest():
    for reference in base_images():
        assert re.search(r":[\w.-]+@sha256:[0-9a-f]{64}$", reference), f"{reference}: pin a tag and its digest"
        assert ":latest@" not in reference


def test_runs_as_the_charts_non_root_user():
    user, group = arguments("USER")[-1].split(":")
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["securityContext"]
    # Numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
    assert (int(user), int(group)) == (defaults["runAsUser"], defaults["runAsGroup"])
    assert int(user) > 0


def test_entrypoint_is_the_command_the_chart_runs():
    chart_command = trainer(render({"image": {"repository": "r.example/t", "tag": "1"}}))["command"]
    assert json.loads(arguments("ENTRYPOINT")[-1]) == chart_command


@pytest.mark.parametrize("source", copy_sources())
def test_copy_sources_exist_and_are_in_the_build_context(source):
    assert (REPO_ROOT / source).exists(), f"COPY {source}: no such path in the repository"
    assert not is_ignored(source, DOCKERIGNORE), f"COPY {source}: excluded by .dockerignore"


def test_dependencies_install_before_the_source_is_copied():
    # Editing training/ must not invalidate the (large) dependency layer.
    order = [(name, args) for name, args in STEPS if name in {"COPY", "RUN"}]
    copy_project = order.index(("COPY", "pyproject.toml ./"))
    install_deps = next(i for i, (name, args) in enumerate(order) if name == "RUN" and "requirements" in args)
    copy_source = next(i for i, (name, args) in enumerate(order) if name == "COPY" and "training" in args)
    assert copy_project < install_deps < copy_source


@pytest.mark.parametrize("path", ["pyproject.toml", "training/__init__.py", "trainstack/contract/cli.py"])
def test_build_context_keeps_what_the_image_needs(path):
    assert not is_ignored(path, DOCKERIGNORE)


@pytest.mark.parametrize("path", [
    ".venv/bin/python", ".venv-checkov/bin/checkov", ".git/HEAD", "tests/workloads/chart.py",
    "trainstack/infra/__init__.py", "runs/demo/checkpoint.pt", "data/shard-0.bin", ".demo/run/x",
    "workloads/charts/training-job/Chart.yaml", "trainstack/contract/__pycache__/cli.cpython-311.pyc",
    "Pulumi.dev.yaml", "node_modules/x/index.js",
])
def test_build_context_leaves_out_everything_else(path):
    assert is_ignored(path, DOCKERIGNORE)
