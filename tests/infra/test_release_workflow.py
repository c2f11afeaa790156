"""The release workflow (.github/workflows/release.yml, docs/releasing.md), checked offline: it builds the wheel and
sdist, tests the built wheel in a clean virtualenv before anything is tagged, and only the tagging job may write.
GitHub's workflow schema is checked for every workflow by tests/infra/test_workflows.py."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.stack_runs import REPO

RELEASE = REPO / ".github" / "workflows" / "release.yml"
TEST_WHEEL = REPO / ".github" / "release" / "test-wheel.sh"


def load():
    document = yaml.safe_load(RELEASE.read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on` as True
    return document


def runs(job) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def test_release_matches_githubs_workflow_schema():
    checked = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                              str(RELEASE)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_release_runs_by_hand_and_only_the_tag_job_writes():
    workflow = load()
    assert set(workflow["on"]) == {"workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}
    assert "permissions" not in workflow["jobs"]["build"]
    assert workflow["jobs"]["tag"]["permissions"] == {"contents": "write"}


def test_the_wheel_is_built_and_tested_before_the_tag_is_pushed():
    workflow = load()
    build = runs(workflow["jobs"]["build"])
    built = next(i for i, run in enumerate(build) if "python -m build --outdir dist ." in run)
    tested = next(i for i, run in enumerate(build) if "bash .github/release/test-wheel.sh dist" in run)
    refused = next(i for i, run in enumerate(build) if "already tagged" in run and "CHANGELOG.md" in run)
    assert refused < built < tested
    assert workflow["jobs"]["tag"]["needs"] == "build"
    tag = "\n".join(runs(workflow["jobs"]["tag"]))
    assert 'git tag "v$VERSION"' in tag and 'git push origin "v$VERSION"' in tag


def test_the_wheel_check_uses_a_clean_venv_and_a_tree_without_the_package_sources():
    script = TEST_WHEEL.read_text()
    assert "python3 -m venv" in script and "--exclude=./trainstack --exclude=./training" in script
    assert "TRAINSTACK_UNDER_TEST=wheel" in script and '-m "not source_tree"' in script
    assert script.rstrip().endswith("tests/library")
    checked = subprocess.run(["bash", "-n", str(TEST_WHEEL)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
