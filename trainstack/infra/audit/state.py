"""What a stack's state holds: every physical identifier in `pulumi stack export` (ids, ARNs, names)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Output properties that name a resource in the cloud's own terms.
IDENTIFYING_OUTPUTS = ("id", "arn", "name", "bucket", "fileSystemId", "accessPointId", "allocationId",
                       "networkInterfaceId", "nodegroupName", "clusterName", "selfLink", "repositoryUrl")


class StateError(Exception):
    """The state could not be read: one line naming the problem and the fix."""


def load(stack: str, state_file: Path | None) -> Mapping[str, Any]:
    if state_file is not None:
        try:
            return json.loads(state_file.read_text())
        except OSError as error:
            raise StateError(f"--state {state_file}: cannot read it ({error.strerror}); pass the output of "
                             f"`pulumi stack export --stack {stack} --file state.json`") from None
        except ValueError:
            raise StateError(f"--state {state_file}: not JSON; pass the output of `pulumi stack export`") from None
    try:
        done = subprocess.run(["pulumi", "stack", "export", "--stack", stack], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise StateError("the pulumi CLI is not on PATH; install it, or pass --state with the output of "
                         "`pulumi stack export` from elsewhere") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StateError(f"`pulumi stack export --stack {stack}` failed: {reason}")
    return json.loads(done.stdout)


def identifiers(state: Mapping[str, Any]) -> set[str]:
    """Every id, ARN and name the state records for its resources."""
    deployment = state.get("deployment") if isinstance(state, Mapping) else None
    resources = deployment.get("resources") if isinstance(deployment, Mapping) else None
    if not isinstance(resources, list) or not all(isinstance(r, Mapping) for r in resources):
        raise StateError("the state has no deployment.resources: is it the output of `pulumi stack export`?")
    found: set[str] = set()
    for resource in resources:
        if resource.get("id"):
            found.add(str(resource["id"]))
        outputs = resource.get("outputs") if isinstance(resource.get("outputs"), Mapping) else {}
        for key in IDENTIFYING_OUTPUTS:
            value = outputs.get(key)
            if isinstance(value, str) and value:
                found.add(value)
    return found
