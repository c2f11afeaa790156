"""The stack output `jobSubmission`: what any job on this cluster shares, for `trainstack submit`.

The stack's own job (trainstack:job) and the jobs the CLI submits are the same chart with the same
cluster-side values: image, GPU placement, pod resources, shared volume, data cache, GPU networking,
TensorBoard image, queue and the cloud identity's annotations. They come from `chart_values` here,
the function that renders the stack's own TrainingJob, so the two cannot drift; only what belongs to
one job (its name, node range, trainer flags, snapshot prefix) is left for the CLI to add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from trainstack.infra.config import JobConfig
from trainstack.infra.core.contracts import GpuPlacement, ObjectStore, WorkloadIdentity
from trainstack.infra.kubernetes.training_job import (
    SecretEnv,
    TrainingJobArgs,
    chart_default_values,
    chart_values,
)

# The Helm release label every job the CLI installs carries (`helm install --labels`, helm v3.21.4
# cmd/helm/install.go:201), so `trainstack cancel --all` selects them by label and never the stack's
# own (Pulumi's) release. The stack's ncclCheckCommand installs with it too: cancel --all removes it.
SUBMITTED_BY_CLI = ("trainstack.dev/submitted-by", "cli")

# Chart values that belong to one job: the CLI sets them per submission, never from the stack.
PER_JOB_KEYS = ("job", "train", "serviceAccount")


def shared_job_values(*, image_ref: pulumi.Input[str], gpu: GpuPlacement, claim_name: pulumi.Input[str] | None,
                      queue_name: pulumi.Input[str] | None, secret_env: Sequence[SecretEnv],
                      tensorboard: bool, extra_values: Mapping[str, Any]) -> dict[str, Any]:
    """The chart values every job on this stack gets, rendered by the stack job's own `chart_values`."""
    args = TrainingJobArgs(
        provider=None,  # type: ignore[arg-type]  # chart_values never reads it; only a Release does
        image_ref=image_ref,
        gpus_per_pod=gpu.gpus_per_node,
        procs_per_pod=gpu.gpus_per_node,
        pvc_name=claim_name,
        queue_name=queue_name,
        node_selector=gpu.node_selector,
        tolerations=gpu.tolerations,
        secret_env=secret_env,
        tensorboard=tensorboard,
        extra_values=extra_values,
    )
    values = chart_values(args, release_name="")
    return {key: value for key, value in values.items() if key not in PER_JOB_KEYS}


def submission_output(*, job: JobConfig, namespace: pulumi.Input[str], bucket: ObjectStore, gpu: GpuPlacement,
                      identity: WorkloadIdentity, service_account: pulumi.Input[str],
                      values: Mapping[str, Any], queues: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `jobSubmission` stack output (read by trainstack/jobs/stack_outputs.py)."""
    return {
        "namespace": namespace,
        "bucketUri": bucket.uri,
        "gpusPerNode": gpu.gpus_per_node,
        "nodeType": gpu.accelerator,
        "queueName": values.get("kueue", {}).get("queueName"),
        # Every GPU pool's queue: {name: {nodeType, gpusPerNode, maxNodes, quota}}; `submit` refuses a job
        # whose pods exceed its queue's quota (Kueue would leave it pending for ever).
        "queues": dict(queues or {}),
        # The stack's own job (a Helm release like any other), so `list` can show it and `submit` avoid it.
        "stackJob": job.name if job.enabled else None,
        "serviceAccountAnnotations": dict(identity.service_account_annotations),
        # The Pulumi-owned ServiceAccount every job runs as (serviceAccount.create false), the one the cloud
        # identity trusts (IRSA's sub, GKE's Workload Identity member): trainstack/infra/kubernetes/job_service_account.py.
        "serviceAccount": service_account,
        "identityServiceAccount": service_account,
        "values": dict(values),
        # The trainer's --data, as the stack's job gets it: the node-local cache the fetch-data init
        # container fills when the cache is on (trainstack/infra/kubernetes/platform.py data_cache_values), else job.train.data.
        # `train` is per job, so without this a CLI job would read the chart's default instead.
        "trainData": _train_data(job, values),
    }


def _train_data(job: JobConfig, values: Mapping[str, Any]) -> str:
    chart = chart_default_values()
    cache = deep_get(values, "storage", "cache") or {}
    if cache.get("enabled"):
        return str(cache.get("mountPath") or chart["storage"]["cache"]["mountPath"])
    return str(job.train.get("data") or chart["train"]["data"])


def deep_get(values: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        values = values.get(key) if isinstance(values, Mapping) else None
    return values
