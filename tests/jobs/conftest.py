"""The job CLI against each stack's real outputs (its __main__.py under mocks) and a fake helm/kubectl."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3
from trainstack.infra.kubernetes.job_owner import JOB_OWNER
from trainstack.jobs.cli import main

FAKE_TOOL = Path(__file__).with_name("fake_tool.py")
# The uid the mocked API server gives the stacks' job owner (tests/pulumi_harness.py): the same on every stack.
STACK_OWNER_UID = str(uuid.uuid5(uuid.NAMESPACE_URL, "kubernetes:core/v1:ConfigMap::trainstack-job-owner"))


def _aws() -> dict[str, Any]:
    # The queue on: Kueue's label and Workloads are part of what the CLI must get right.
    return aws_runs.run_main(aws_runs.config_with({"trainstack:job": {"queue": True}})).exports


def _gcp() -> dict[str, Any]:
    return gcp_runs.run_main().exports


def _gcp_a3() -> dict[str, Any]:
    return test_a3.run(test_a3.a3_config({"trainstack:job": {"enabled": False}})).exports


STACKS: dict[str, Callable[[], dict[str, Any]]] = {"aws": _aws, "gcp": _gcp, "gcp-a3": _gcp_a3}


@pytest.fixture(scope="session")
def stack_exports() -> Callable[[str], dict[str, Any]]:
    """Stack name -> its exports, as `pulumi stack output --json --show-secrets` prints them."""
    cache: dict[str, dict[str, Any]] = {}

    def exports(stack: str) -> dict[str, Any]:
        if stack not in cache:
            cache[stack] = json.loads(json.dumps(STACKS[stack]()))
        return cache[stack]

    return exports


class FakeCluster:
    """helm and kubectl on PATH that record every call and answer from `state`."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        for tool in ("helm", "kubectl"):
            script = self.bin / tool
            script.write_text(f"#!{sys.executable}\n" + FAKE_TOOL.read_text())
            script.chmod(0o755)
        self.state_file = root / "state.json"
        self.calls_file = root / "calls.jsonl"
        self.calls_file.touch()
        self.set_state({})

    def set_state(self, state: dict[str, Any]) -> None:
        # The stack's job owner exists, with the uid every mocked stack exports, unless a test says otherwise.
        self.state_file.write_text(json.dumps({"configmaps": {JOB_OWNER: STACK_OWNER_UID}, **state}))

    @property
    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text())

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def verbs(self) -> list[str]:
        return [f"{c['tool']} {c['argv'][0]}" for c in self.calls]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_CLUSTER_STATE", str(fake.state_file))
    monkeypatch.setenv("FAKE_CLUSTER_CALLS", str(fake.calls_file))
    return fake


@pytest.fixture
def outputs_file(tmp_path: Path, stack_exports: Callable[[str], dict[str, Any]]) -> Callable[..., str]:
    """Write a stack's outputs (changed by `edit`) to a file for --outputs."""

    def write(stack: str, edit: Callable[[dict[str, Any]], None] | None = None) -> str:
        exports = json.loads(json.dumps(stack_exports(stack)))
        if edit is not None:
            edit(exports)
        path = tmp_path / f"{stack}-outputs.json"
        path.write_text(json.dumps(exports))
        return str(path)

    return write


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def without_queue(exports):
    """The outputs of a stack with trainstack:job.queue false (every stack has a queue by default)."""
    submission = exports["jobSubmission"]
    submission["queueName"], submission["queues"] = None, {}
    submission["values"].pop("kueue", None)
