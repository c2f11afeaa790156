"""The training job's settings as a hosted component takes them: the keys of `trainstack:job`, typed."""

from dataclasses import dataclass
from typing import Any


@dataclass(kw_only=True)
class SecretEnv:
    """An environment variable the job's pods read from a Kubernetes Secret you created (the value never passes through Pulumi)."""

    name: str
    """The variable's name, e.g. WANDB_API_KEY."""
    secret_name: str
    """The Secret in the job's namespace."""
    key: str
    """The key inside that Secret."""


@dataclass(kw_only=True)
class Job:
    """The training job (the training-job Helm chart), as `trainstack:job` in a stack file."""

    enabled: bool | None = None
    """Run the job (default false: build the platform first, upload the data set, then enable it)."""
    name: str | None = None
    """The Helm release, the Job and the run directory /mnt/shared/runs/<name> (default train)."""
    namespace: str | None = None
    """The job's Kubernetes namespace, created unless it is default (default: default)."""
    pods_min: int | None = None
    """Pods the job needs to run (torchrun --nnodes min; default 1)."""
    pods_max: int | None = None
    """Pods the job runs at most (default 2, or podsMin if larger)."""
    gpus_per_pod: int | None = None
    """GPUs each pod takes (default: all of a node's)."""
    procs_per_pod: int | None = None
    """Training processes per pod; must equal gpusPerPod (one per GPU)."""
    data_prefix: str | None = None
    """The prepared data set, under <bucket>/<dataPrefix>/ (default data)."""
    tensorboard: bool | None = None
    """Run TensorBoard beside the job (default true)."""
    queue: bool | None = None
    """Submit the job through a Kueue LocalQueue, all pods admitted together (default false on TrainingPlatform, a cluster you bring; true in AwsStack and GcpStack, whose clusters get a queue per GPU pool)."""
    queue_name: str | None = None
    """The Kueue LocalQueue and ClusterQueue (default training)."""
    train: dict[str, Any] | None = None
    """Flags of `python -m training train` in camelCase (warmupSteps for --warmup-steps), plus extraArgs."""
    secret_env: list[SecretEnv] | None = None
    """Environment variables read from Kubernetes Secrets (e.g. WANDB_API_KEY)."""
    # The keys from before the pod/node rename: the stack's parser moves them to the new names with one
    # warning each, as in a stack file (trainstack/infra/config/job.py RENAMED_KEYS).
    nodes_min: int | None = None
    """Deprecated: the old name of podsMin (a pod of the job was once called a node); use podsMin."""
    nodes_max: int | None = None
    """Deprecated: the old name of podsMax; use podsMax."""
    gpus_per_node: int | None = None
    """Deprecated: the old name of gpusPerPod (GPUs per pod, not per node); use gpusPerPod."""
    procs_per_node: int | None = None
    """Deprecated: the old name of procsPerPod; use procsPerPod."""
