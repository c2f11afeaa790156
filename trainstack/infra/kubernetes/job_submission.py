"""The stack output `jobSubmission`: what any job on this cluster shares, for `trainstack submit`.

The stack's own job (trainstack:job) and the jobs the CLI submits are the same chart with the same
cluster-side values: image, GPU placement, pod resources, shared volume, data cache, GPU networking,
TensorBoard image, queue and the cloud identity's annotations. They come from `chart_values` here,
the function that renders the stack's own TrainingJob, so the two cannot drift; only what belongs to
one job (its name, pod range, GPUs per pod, trainer flags, snapshot prefix) is left for the CLI to add.
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
# The same under `resources`: the job's GPUs per pod. Shared, a stack's value would meet the CLI's under
# another name whenever the chart renames it (a stack deployed before the rename exports gpusPerNode).
PER_JOB_RESOURCE_KEYS = ("gpusPerPod",)


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
    return without_per_job_values(chart_values(args, release_name=""))


def without_per_job_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A job's chart values less what the CLI sets for each job (PER_JOB_KEYS, PER_JOB_RESOURCE_KEYS)."""
    shared = {key: value for key, value in values.items() if key not in PER_JOB_KEYS}
    if isinstance(shared.get("resources"), Mapping):
        shared["resources"] = {key: value for key, value in shared["resources"].items()
                               if key not in PER_JOB_RESOURCE_KEYS}
    return shared


# Chart values that belong to a GPU pool: a job on another pool gets that pool's (and no GPU networking
# unless that pool has its own), never the job's pool's.
POOL_VALUE_KEYS = ("gpuNetworking",)


# GPU networking modes whose pods attach GKE Network objects (networking.gke.io/v1) by name.
NETWORK_OBJECT_MODES = ("tcpx", "tcpxo", "rdma")


def pool_entry(gpu: GpuPlacement, queue_name: pulumi.Input[str] | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """One GPU pool as `trainstack submit --pool` reads it (trainstack/jobs/stack_outputs.py): its node type,
    size, queue, and the whole of the chart values a job on it shares (its placement and pod resources)."""
    entry = {"nodeType": gpu.accelerator, "gpusPerNode": gpu.gpus_per_node, "maxNodes": gpu.max_nodes,
             "queueName": queue_name, "values": dict(values)}
    networking = values.get("gpuNetworking") or {}
    mode = networking.get("mode", "none")
    if mode in NETWORK_OBJECT_MODES and "networks" not in (networking.get(mode) or {}):
        # The chart's default network names would be rendered, and no such Network exists on the cluster.
        # EFA (EKS) names no network objects: its pods ask for the node's vpc.amazonaws.com/efa devices.
        entry["unavailable"] = (f"its GPU networking ({mode}) is set up only for the stack job's pool "
                                "(trainstack:jobPool)")
    return entry


def submission_output(*, job: JobConfig, namespace: pulumi.Input[str], bucket: ObjectStore, gpu: GpuPlacement,
                      identity: WorkloadIdentity, service_account: pulumi.Input[str],
                      values: Mapping[str, Any], queues: Mapping[str, Any] | None = None,
                      pools: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
        # Every GPU pool, the job's included, by name: {nodeType, gpusPerNode, maxNodes, queueName, values}.
        # `submit --pool NAME` uses that pool's instead of the fields above; without it they are the job's pool's.
        "pools": dict(pools or {}),
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
