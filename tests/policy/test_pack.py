"""policy/__main__.py wires every rule with its level and reason, and its adapter hands the rules what
pulumi-policy hands it (run in policy/venv with the real SDK; PolicyPack itself is replaced, so no
gRPC server starts)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace

import pytest

from policy.rules import RULES

from .graphs import REPO_ROOT
from .test_rules import RESOURCE_CASES, STACK

POLICY_PYTHON = REPO_ROOT / "policy" / "venv" / "bin" / "python"


def probe(request: dict, env: dict[str, str]) -> dict:
    if not POLICY_PYTHON.exists():
        pytest.fail(f"{POLICY_PYTHON} is missing: `make setup` creates it from policy/requirements.txt")
    done = subprocess.run([str(POLICY_PYTHON), str(REPO_ROOT / "tests" / "policy" / "pack_probe.py")],
                          input=json.dumps(request), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, cwd=REPO_ROOT / "policy")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def pack() -> dict:
    request = {
        "resource_cases": [{"policy": name, "type": failing.type, "name": failing.name, "props": failing.props,
                            "provider_props": {"defaultLabels": dict(failing.provider_labels)}}
                           for name, _, failing, _ in RESOURCE_CASES],
        "stack_cases": [
            {"policy": "bucket-public-access-block", "resources": [
                {"type": "aws:s3/bucket:Bucket", "name": "kept", "urn": "urn:kept", "props": {}, "dependencies": []},
                {"type": "aws:s3/bucket:Bucket", "name": "open", "urn": "urn:open", "props": {}, "dependencies": []},
                {"type": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "name": "block", "urn": "urn:block",
                 "props": {}, "dependencies": ["urn:kept"]}]},
            {"policy": "budget-present", "resources": []},
        ],
    }
    env = {"PULUMI_STACK": STACK.name, "PULUMI_CONFIG": json.dumps({"trainstack:maxRunUsd": "0"})}
    return probe(request, env)


def test_every_rule_is_wired_with_its_level_and_reason(pack):
    assert pack["pack"] == "trainstack"
    wired = {p["name"]: p for p in pack["policies"]}
    assert len(wired) == len(pack["policies"]) == len(RULES) >= 15
    for rule in RULES:
        policy = wired[rule.name]
        assert policy["level"] == rule.level in ("mandatory", "advisory")
        assert policy["description"] == rule.reason and "\n" not in rule.reason and rule.reason.endswith(".")
        assert policy["kind"] == rule.scope
        assert policy["config"] == sorted(key for key, _ in rule.config)


def test_pack_holds_security_and_cost_rules():
    names = {rule.name for rule in RULES}
    assert {"gpu-pool-scales-to-zero", "gpu-pool-spot-or-reservation", "budget-present", "job-ttl"} <= names
    assert {"bucket-not-public", "encryption-at-rest", "imdsv2-required", "no-open-ssh-or-nfs"} <= names


def test_resource_policies_report_what_the_rules_find(pack):
    """Through the real SDK's read-only proxies, each failing case reports the rule's own messages
    (resource options other than protect, e.g. retainOnDelete, never reach a policy pack)."""
    for (name, _, failing, _), reported in zip(RESOURCE_CASES, pack["resource_results"], strict=True):
        seen_by_the_engine = replace(failing, options={})
        assert reported == next(r for r in RULES if r.name == name).check(seen_by_the_engine, STACK), name
    assert sum(1 for messages in pack["resource_results"] if messages) >= len(RESOURCE_CASES) - 1


def test_stack_policies_see_dependencies_and_the_stack_config(pack):
    public_access, budget = pack["stack_results"]
    assert [urn for _, urn in public_access] == ["urn:open"]
    # PULUMI_CONFIG (what the CLI passes a policy pack) has no maxHourlyUsd and a maxRunUsd of 0.
    assert sorted(message.split(" ")[0] for message, _ in budget) == ["trainstack:maxHourlyUsd", "trainstack:maxRunUsd"]
    assert all(urn is None for _, urn in budget)

