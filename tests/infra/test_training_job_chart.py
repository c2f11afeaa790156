"""TrainingJob's values rendered by the real chart (Helm's engine, offline): the wiring reaches the Job.

The mock tests check the values the Release receives; these check that the chart turns those values
into the Job we meant, and that every change which rewrites the Job's (immutable) pod template is one
that replaces the Release.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.programs import (
    DIGEST,
    GPU_NODE_LABELS,
    IRSA_ROLE_ARN,
    RELEASE,
    REPOSITORY,
    job_args,
    make_provider,
)
from tests.pulumi_harness import run_program
from tests.workloads.chart import one, render
from trainstack.infra import SecretEnv, TrainingJob
from trainstack.infra.kubernetes.training_job import REPLACE_ON_CHANGES

# Job spec fields Kubernetes lets an update change; everything else in the spec is immutable.
_MUTABLE_JOB_SPEC = frozenset(
    {"parallelism", "completions", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "suspend"}
)


def _release_inputs(**overrides: Any) -> dict:
    def program() -> None:
        TrainingJob("gpt2", job_args(make_provider(), **overrides))

    return run_program(program).one(RELEASE).inputs


def _render(inputs: dict) -> list[dict]:
    return render(inputs["values"], release=inputs["name"], namespace=inputs["namespace"])


def test_rendered_job_carries_the_typed_arguments() -> None:
    objects = _render(_release_inputs())
    job = one(objects, "Job", "gpt2")
    assert job["metadata"]["namespace"] == "training"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 4
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpt2"
    assert pod["nodeSelector"] == GPU_NODE_LABELS
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "shared-efs"}} in pod["volumes"]
    (trainer,) = [c for c in pod["containers"] if c["name"] == "trainer"]
    assert trainer["image"] == f"{REPOSITORY}@{DIGEST}"
    assert "--nnodes=2:4" in trainer["args"] and "--nproc-per-node=8" in trainer["args"]
    assert trainer["args"][trainer["args"].index("--preset") + 1] == "gpt2-medium"
    assert trainer["args"][trainer["args"].index("--max-steps") + 1] == "5000"
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == 8
    wandb = next(e for e in trainer["env"] if e["name"] == "WANDB_API_KEY")
    assert wandb == {
        "name": "WANDB_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}},
    }

    account = one(objects, "ServiceAccount", "gpt2")
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": IRSA_ROLE_ARN}
    assert one(objects, "Deployment")["metadata"]["name"].startswith("gpt2")  # TensorBoard


def _changed_paths(old: Any, new: Any, path: str) -> list[str]:
    """Leaf paths that differ, spelled as the provider's detailed diff spells them."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            p
            for k in sorted(set(old) | set(new))
            for p in _changed_paths(old.get(k), new.get(k), f"{path}.{k}")
        ]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            p
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for p in _changed_paths(a, b, f"{path}[{i}]")
        ]
    return [] if old == new else [path]


def _replaces(paths: list[str]) -> bool:
    """What the engine does with replaceOnChanges: a changed path inside a listed one replaces."""
    return any(p == r or p.startswith((r + ".", r + "[")) for p in paths for r in REPLACE_ON_CHANGES)


def _immutable(job: dict) -> dict:
    return {k: v for k, v in job["spec"].items() if k not in _MUTABLE_JOB_SPEC}


# (change, arguments, expected): True = applied in place by helm upgrade, False = replaces the
# release, None = no claim beyond "a pod-template change replaces".
CHANGES = [
    ("pods_min", {"pods_min": 1}, False),
    ("pods_max", {"pods_max": 6}, False),
    ("pods_replicas", {"pods_replicas": 3}, True),
    ("image", {"image_ref": f"{REPOSITORY}@sha256:{'f' * 64}"}, False),
    ("gpus", {"gpus_per_pod": 4}, False),
    ("train", {"train": {"preset": "gpt2", "maxSteps": 10}}, False),
    ("pvc", {"pvc_name": "other-efs"}, False),
    ("secret_env", {"secret_env": (SecretEnv("HF_TOKEN", "hf", "token"),)}, False),
    ("env", {"env": {"LOG_LEVEL": "debug"}}, False),
    ("node_selector", {"node_selector": {"pool": "a100"}}, False),
    ("tolerations", {"tolerations": ({"key": "spot", "operator": "Exists"},)}, False),
    ("memory_limit", {"memory_limit": "64Gi"}, False),
    ("max_restarts", {"extra_values": {"job": {"maxRestarts": 7}}}, False),
    ("launcher", {"extra_values": {"job": {"launcher": ["torchrun"]}}}, False),
    ("join_timeout", {"extra_values": {"job": {"joinTimeoutSeconds": 600}}}, False),
    ("last_call_timeout", {"extra_values": {"job": {"lastCallTimeoutSeconds": 20}}}, False),
    ("lost_peer_restarts", {"extra_values": {"job": {"lostPeerRestarts": 5}}}, False),
    ("submission_id", {"extra_values": {"job": {"submissionId": "0f3c9a7e"}}}, False),
    ("queue", {"queue_name": "research"}, None),
    (
        "irsa_role",
        {"service_account_annotations": {"eks.amazonaws.com/role-arn": IRSA_ROLE_ARN + "-2"}},
        True,
    ),
    ("tensorboard", {"tensorboard": False}, True),
    ("ttl", {"extra_values": {"job": {"ttlSecondsAfterFinished": 60}}}, True),
]


@pytest.fixture(scope="module")
def baseline() -> tuple[dict, dict]:
    inputs = _release_inputs()
    return inputs, one(_render(inputs), "Job")


@pytest.mark.parametrize(("change", "overrides", "in_place"), CHANGES, ids=[c[0] for c in CHANGES])
def test_pod_template_changes_replace_the_release(
    baseline: tuple[dict, dict], change: str, overrides: dict, in_place: bool | None
) -> None:
    base_inputs, base_job = baseline
    inputs = _release_inputs(**overrides)
    job = one(_render(inputs), "Job")
    paths = _changed_paths(base_inputs["values"], inputs["values"], "values")
    assert paths, f"{change}: the values did not change"
    immutable_changed = _immutable(job) != _immutable(base_job)
    if immutable_changed:
        assert _replaces(paths), (
            f"{change} rewrites the Job's immutable spec but {paths} are not in REPLACE_ON_CHANGES"
        )
    if in_place is True:
        assert not immutable_changed and not _replaces(paths), f"{change} should be applied in place"
    if in_place is False:
        assert immutable_changed and _replaces(paths), f"{change} should replace the release"
