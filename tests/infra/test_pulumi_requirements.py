"""The Pulumi program installs and runs from requirements.txt alone, as `pulumi install` / `pulumi up`
on a fresh clone, Pulumi Deployments or a CI without `make setup` do it (Pulumi.yaml: pip toolchain,
virtualenv .venv, which pip-installs requirements.txt).

The venv test builds a fresh virtualenv from exactly that file (pip resolves it; cached by the file's
content, so it costs about a minute only when the lock changes) and runs the real __main__.py of both
stacks under mocks in it: their graphs must equal the golden files the development venv produces.
"""

from __future__ import annotations

import subprocess

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement

from tests.stack_runs import REPO
from tests.venvs import installed, normalized, pins, venv_from

REQUIREMENTS = REPO / "requirements.txt"


def test_pulumi_project_installs_requirements_into_the_venv_make_setup_fills():
    runtime = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["runtime"]
    assert runtime["name"] == "python"
    assert runtime["options"] == {"toolchain": "pip", "virtualenv": ".venv"}
    makefile = (REPO / "Makefile").read_text()
    assert "-r requirements.txt" in makefile  # make setup installs the same pins into .venv
    assert "requirements.txt" in makefile.split("$(STAMP):", 1)[1].split("\n", 1)[0]  # and reinstalls on change


def test_every_requirement_is_pinned_and_the_direct_ones_lie_in_pyprojects_ranges():
    # pyproject's extras take compatible ranges (a library installs beside a program's own versions); this file
    # is the exact lock of this repository's program, inside them.
    locked = pins(REQUIREMENTS)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    direct = [Requirement(spec) for extra in ("kubernetes", "aws", "gcp") for spec in extras[extra]
              if not spec.startswith("trainstack[")]
    assert direct and all(r.specifier and "==" not in {s.operator for s in r.specifier} for r in direct)
    assert {str(r): locked.get(normalized(r.name)) for r in direct
            if not r.specifier.contains(locked.get(normalized(r.name), "0"))} == {}
    # The program imports yaml (the chart's values.yaml): it must be in the lock, not come by accident.
    assert "pyyaml" in locked


def test_the_lock_is_lean():
    locked = pins(REQUIREMENTS)
    for heavy in ("torch", "checkov", "pytest", "transformers", "datasets", "ruff"):
        assert heavy not in locked


@pytest.mark.venv
def test_a_fresh_venv_from_requirements_runs_both_stacks_like_the_dev_venv(request):
    python = venv_from(REQUIREMENTS, request.config.cache, "pulumi")

    # pip resolved the lock to itself: nothing missing, nothing extra, no other version.
    assert installed(python) == pins(REQUIREMENTS)
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0
    checked = subprocess.run([str(python), "-m", "tests.golden_graphs", "check", "aws", "gcp"], cwd=REPO,
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-4000:]
    assert "aws: matches" in checked.stdout and "gcp: matches" in checked.stdout
