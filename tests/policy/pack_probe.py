"""Loads policy/__main__.py in the policy pack's own virtualenv (policy/venv: pulumi-policy pins a
protobuf the main venv cannot have) with PolicyPack replaced by a recorder, so no server starts; then
runs the recorded policies through pulumi-policy's real argument types and unknown-checking proxies.

stdin: {"resource_cases": [{"policy", "type", "name", "props", "provider_props"}],
        "stack_cases": [{"policy", "resources": [{"type", "name", "urn", "props", "dependencies"}]}]}
stdout: {"pack", "policies": [{"name", "level", "description", "kind", "config"}], "resource_results", "stack_results"}
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pulumi_policy
from pulumi_policy.policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

POLICY_DIR = Path(__file__).resolve().parents[2] / "policy"
recorded: dict = {}


class RecordingPack:
    def __init__(self, name, policies, **_):
        recorded.update(name=name, policies=policies)


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def main() -> None:
    request = json.load(sys.stdin)
    pulumi_policy.PolicyPack = RecordingPack
    sys.path.insert(0, str(POLICY_DIR))
    runpy.run_path(str(POLICY_DIR / "__main__.py"), run_name="__main__")
    policies = {p.name: p for p in recorded["policies"]}

    resource_results = []
    for case in request["resource_cases"]:
        provider = PolicyProviderResource("pulumi:providers:x", case["provider_props"], "urn:provider", "x")
        args = ResourceValidationArgs(case["type"], unknown_checking_proxy(case["props"]), f"urn:{case['name']}",
                                      case["name"], options(), provider)
        messages: list[str] = []
        policies[case["policy"]].validate(args, lambda message, urn=None, m=messages: m.append(message))
        resource_results.append(messages)

    stack_results = []
    for case in request["stack_cases"]:
        by_urn: dict[str, PolicyResource] = {}
        for r in case["resources"]:
            deps = [by_urn[d] for d in r["dependencies"]]
            by_urn[r["urn"]] = PolicyResource(r["type"], unknown_checking_proxy(r["props"]), r["urn"], r["name"],
                                              options(), None, None, deps, {})
        found: list[list] = []
        policies[case["policy"]].validate(StackValidationArgs(list(by_urn.values())),
                                          lambda message, urn=None, f=found: f.append([message, urn]))
        stack_results.append(found)

    json.dump({
        "pack": recorded["name"],
        "policies": [{"name": p.name, "level": p.enforcement_level.value if p.enforcement_level else None,
                      "description": p.description,
                      "kind": "stack" if isinstance(p, pulumi_policy.StackValidationPolicy) else "resource",
                      "config": sorted(p.config_schema.properties) if p.config_schema else []}
                     for p in recorded["policies"]],
        "resource_results": resource_results,
        "stack_results": stack_results,
    }, sys.stdout)


if __name__ == "__main__":
    main()
