"""A mocked resource graph as readable, deterministic JSON, compared with a committed golden file.

Any infrastructure change shows up as a readable diff of that file in the pull request: each resource's
type, name, parent, provider, dependencies, resource options and inputs (secrets masked). After an
intended change, regenerate with UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from tests.pulumi_harness import UNKNOWN, ProgramResult, Registration
from tests.stack_runs import short

SECRET = "[secret]"

def _masked(value: Any, registration: Registration, path: str = "") -> Any:
    if path and registration.is_secret(path):
        return SECRET
    if isinstance(value, dict):
        return {key: _masked(item, registration, f"{path}.{key}" if path else key) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item, registration, f"{path}[{index}]") for index, item in enumerate(value)]
    return "[unknown]" if value is UNKNOWN else value


def snapshot(result: ProgramResult) -> list[dict[str, Any]]:
    """The graph as plain, sorted data: one entry per registration, in URN order."""
    entries = []
    for registration in result.registrations:
        options = {
            "retainOnDelete": registration.retain_on_delete,
            "deleteBeforeReplace": registration.delete_before_replace,
            "protect": registration.protect,
            "ignoreChanges": sorted(registration.ignore_changes),
            "replaceOnChanges": sorted(registration.replace_on_changes),
            "deleteTimeout": registration.delete_timeout,
        }
        entries.append({
            "resource": short(registration.urn),
            "parent": short(registration.parent),
            "provider": short(registration.provider),
            "providers": {package: short(urn) for package, urn in sorted(registration.providers.items())},
            "remote": registration.remote,
            "dependsOn": sorted(short(urn) for urn in registration.dependencies),
            "options": {key: value for key, value in options.items() if value},
            "inputs": _masked(registration.inputs, registration),
            # Only where there are any: a resource that moved keeps its old URN through these.
            **({"aliases": registration.aliases} if registration.aliases else {}),
        })
    return entries


def render(result: ProgramResult) -> str:
    return json.dumps(snapshot(result), indent=2, sort_keys=True) + "\n"


def assert_matches_golden(result: ProgramResult, golden: Path) -> None:
    rendered = render(result)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    expected = golden.read_text()
    if rendered != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), rendered.splitlines(True),
                                            f"golden/{golden.name}", "this run", n=2))
        raise AssertionError(f"the resource graph changed; review, then rerun with UPDATE_GOLDEN=1:\n"
                             f"{diff[:20000]}")
