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
    """Submit the job through a Kueue LocalQueue, all pods admitted together (default false)."""
    queue_name: str | None = None
    """The Kueue LocalQueue and ClusterQueue (default training)."""
    train: dict[str, Any] | None = None
    """Flags of `python -m training train` in camelCase (warmupSteps for --warmup-steps), plus extraArgs."""
    secret_env: list[SecretEnv] | None = None
    """Environment variables read from Kubernetes Secrets (e.g. WANDB_API_KEY)."""
