"""The pull-request preview workflows, checked offline: GitHub's workflow schema (check-jsonschema's
vendored copy; actionlint installs here only from GitHub, which is out of reach), and the rules they
must keep (a matrix over every stack, forks get the offline graph diff and never credentials, the
commenting workflow never runs the pull request's code, one preview command line)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests import golden_graphs
from tests.stack_runs import REPO

WORKFLOWS = REPO / ".github" / "workflows"
PREVIEW = WORKFLOWS / "pulumi-preview.yml"
COMMENT = WORKFLOWS / "pulumi-preview-comment.yml"


def load(path):
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on".
    document = yaml.safe_load(path.read_text())
    document["on"] = document.pop(True, document.get("on"))
    return document


def steps(workflow, job):
    return workflow["jobs"][job]["steps"]


def test_workflows_match_githubs_workflow_schema():
    checked = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                              *map(str, sorted(WORKFLOWS.glob("*.yml")))], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: pull_request\njobs:\n  preview:\n    runs-on: ubuntu-latest\n    step: []\n")
    checked = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                              str(broken)], capture_output=True, text=True)
    assert checked.returncode != 0


def test_preview_runs_for_every_stack_the_program_builds():
    workflow = load(PREVIEW)
    stacks = workflow["jobs"]["preview"]["strategy"]["matrix"]["stack"]
    assert set(stacks) == set(golden_graphs.STACKS) == {p.name.split(".")[1] for p in REPO.glob("Pulumi.*.yaml")}
    assert workflow["jobs"]["preview"]["strategy"]["fail-fast"] is False  # one stack's failure hides no other


def test_preview_job_can_read_and_get_an_oidc_token_but_not_write():
    workflow = load(PREVIEW)
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["jobs"]["preview"]["permissions"] == {"contents": "read", "id-token": "write"}
    assert set(workflow["on"]) == {"pull_request"}  # never pull_request_target: a fork's code with secrets


def test_forks_get_the_offline_diff_and_no_credentials_step_runs_for_them():
    workflow = load(PREVIEW)
    mode = next(s for s in steps(workflow, "preview") if s.get("id") == "mode")
    assert "github.event.pull_request.head.repo.full_name == github.repository" in mode["env"]["SAME_REPO"]
    for step in steps(workflow, "preview"):
        uses = step.get("uses", "")
        if uses.startswith(("aws-actions/configure-aws-credentials", "google-github-actions/auth", "pulumi/actions")):
            assert "steps.mode.outputs.mode == 'real'" in step["if"], step
        if "PULUMI_ACCESS_TOKEN" in step.get("env", {}):
            assert "steps.mode.outputs.mode == 'real'" in step["if"], step
    offline = next(s for s in steps(workflow, "preview") if s.get("name") == "Offline graph diff")
    assert offline["if"] == "steps.mode.outputs.mode == 'offline'"
    assert "python -m tests.golden_graphs comment \"$STACK\" --base \"origin/$BASE_REF\"" in offline["run"]


def test_gcp_uses_workload_identity_federation_and_no_key():
    workflow = load(PREVIEW)
    (auth,) = [s for s in steps(workflow, "preview") if s.get("uses", "").startswith("google-github-actions/auth")]
    assert auth["with"] == {"workload_identity_provider": "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}",
                            "service_account": "${{ vars.GCP_PREVIEW_SERVICE_ACCOUNT }}"}
    assert "credentials_json" not in PREVIEW.read_text()


def test_the_preview_command_is_written_once():
    # One line to change (e.g. to add --policy-pack): merges and reviews touch one place.
    lines = [line for line in PREVIEW.read_text().splitlines() if line.lstrip().startswith("pulumi preview ")]
    assert len(lines) == 1 and "--stack \"$STACK\"" in lines[0] and "--diff" in lines[0]


def test_the_program_is_installed_from_its_own_lock_not_make_setup():
    workflow = load(PREVIEW)
    runs = "\n".join(s.get("run", "") for s in steps(workflow, "preview"))
    assert "pip install --quiet -r requirements.txt" in runs and "make setup" not in runs


def test_commenting_workflow_never_runs_the_pull_requests_code():
    workflow = load(COMMENT)
    assert workflow["on"] == {"workflow_run": {"workflows": [load(PREVIEW)["name"]], "types": ["completed"]}}
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    uses = [s.get("uses", "") for s in job["steps"]]
    assert not [u for u in uses if u.startswith("actions/checkout")]
    script = job["steps"][-1]["with"]["script"]
    assert "pr.head.sha !== process.env.HEAD_SHA" in script  # a stale preview is not posted
    assert "Number.isInteger(number)" in script


@pytest.fixture
def changed_base(monkeypatch):
    def base_version(golden, base):
        return golden.read_text().replace('"httpPutResponseHopLimit": 1', '"httpPutResponseHopLimit": 2')
    monkeypatch.setattr(golden_graphs, "base_version", base_version)


def test_offline_comment_shows_the_graph_diff_against_the_base(changed_base):
    body = golden_graphs.comment("aws", "origin/main")
    assert body.startswith("### `aws`: resource graph under mocks")
    assert '-        "httpPutResponseHopLimit": 2,\n+        "httpPutResponseHopLimit": 1,' in body
    assert "out of date" not in body


def test_offline_comment_says_when_nothing_changed():
    body = golden_graphs.comment("aws", "HEAD")
    assert "No change to the resource graph." in body
