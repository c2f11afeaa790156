"""Kueue's Workload CRD schema (vendored, tests/jobs/kueue/README.md), applied strictly like the API server.

Strict: where the schema lists properties and does not preserve unknown fields, an unknown field is
an error (the API server's fieldValidation=Strict), not silently pruned.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from trainstack.infra.core.versions import KUEUE_API_VERSION

SCHEMA = Path(__file__).parent / "kueue" / "workload-v1beta2.schema.json"


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        node = {key: _strict(value) for key, value in node.items()}
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        return node
    if isinstance(node, list):
        return [_strict(item) for item in node]
    return node


@functools.cache
def _validator() -> jsonschema.Draft7Validator:
    schema = _strict(json.loads(SCHEMA.read_text()))
    # metadata is the API server's (ObjectMeta), not the CRD's to describe.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def validate_workload(workload: dict[str, Any]) -> None:
    errors = sorted(_validator().iter_errors(workload), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise AssertionError(f"Workload: {first.message} at {'/'.join(map(str, first.absolute_path))}")


def workload_for(job: dict[str, Any], *, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The Workload Kueue's Job integration creates for a Job: one pod set, `parallelism` pods of its template
    (kubernetes-sigs/kueue pkg/controller/jobs/job/job_controller.go PodSets, v0.19.2)."""
    spec = job["spec"]
    template = copy.deepcopy(spec["template"])
    workload: dict[str, Any] = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": {"name": f"job-{job['metadata']['name']}-00000", "namespace": job["metadata"].get("namespace"),
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
                                          "uid": job["metadata"].get("uid", "00000000-0000-0000-0000-000000000000"),
                                          "controller": True}]},
        "spec": {
            "queueName": job["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name", ""),
            "podSets": [{"name": "main", "count": spec.get("parallelism", 1), "template": template}],
        },
    }
    if conditions is not None:
        workload["status"] = {"conditions": conditions}
    return workload
