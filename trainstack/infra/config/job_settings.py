"""`trainstack:job`'s settings as one typed model: the Job a hosted component takes and a stack file's job loads into.

Each field declares its own check (trainstack/infra/config/loader.py setting); trainstack/infra/config/job.py
resolve_job applies the defaults and the rules between fields. Secrets (a W&B key) reach the pods only by
reference: `secretEnv` names Kubernetes Secrets the user created, and the chart mounts them as secretKeyRef;
no secret value passes through Pulumi.
"""

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from trainstack.infra.config.errors import ConfigError, set_hint
from trainstack.infra.config.loader import setting
from trainstack.infra.config.reader import as_bool, as_int, as_str, decoded, reject_unknown
from trainstack.infra.config.train_args import parse_train
from trainstack.infra.kubernetes.training_job import SecretEnv as ChartSecretEnv

_SECRET_ENV_KEYS = ("name", "secretName", "key")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A DNS-1123 subdomain (Kubernetes IsDNS1123Subdomain): dot-separated labels, at most 253 in all.
_SECRET_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes IsConfigMapKey: these characters, at most 253, neither "." nor starting with "..".
_SECRET_KEY = re.compile(r"(?!\.$)(?!\.\.)[-._a-zA-Z0-9]{1,253}")
# How a user gives the job their W&B key: a Secret they create, named here; the key never enters Pulumi.
WANDB_SECRET_EXAMPLE = "[{name: WANDB_API_KEY, secretName: wandb, key: api-key}]"


# torchrun's per-worker environment (torch/distributed/elastic/agent/server/local_elastic_agent.py) and
# what the chart's templates set (workloads/charts/training-job/templates).
_RESERVED_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                 "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HOME", "HF_HOME",
                 "XDG_CACHE_HOME", "CLOUDSDK_CONFIG", "PYTHONUNBUFFERED", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH",
                 "PYTHONPATH", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
                 # the GPUs the device plugin hands the pod, and IRSA's web identity (EKS pod identity webhook)
                 "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 # a path to a key file: a Secret's value would be the key itself (mount the Secret instead)
                 "GOOGLE_APPLICATION_CREDENTIALS")
# PET_*: torchrun's flags as variables (torch/distributed/argparse_util.py env); NCCL_* and FI_*: the chart's
# gpuNetworking modes set them per machine.
_RESERVED_ENV_PREFIXES = ("TORCHELASTIC_", "TORCH_ELASTIC_", "TRAINSTACK_", "NCCL_", "PET_", "FI_")


def read_secret_env(value: Any, key: str) -> tuple[ChartSecretEnv, ...]:
    """[{name, secretName, key}]: each variable is read from a Secret in the job's namespace (secretKeyRef)."""
    items = decoded(value)
    if isinstance(items, list):  # a component's SecretEnv objects, as the stack file writes them
        items = [_as_written_in_a_stack_file(item) for item in items]
    if not isinstance(items, list):
        raise ConfigError(key, f"expected a list of {{name, secretName, key}}, got {items!r}",
                          f"write it in Pulumi.<stack>.yaml as {key}: {WANDB_SECRET_EXAMPLE}")
    result = []
    for i, item in enumerate(items):
        at = f"{key}[{i}]"
        if not isinstance(item, dict) or set(item) != set(_SECRET_ENV_KEYS):
            if isinstance(item, dict):
                reject_unknown(f"{at}.", item.keys(), _SECRET_ENV_KEYS)
            raise ConfigError(at, f"expected {{name, secretName, key}}, got {item!r}",
                              f"write it as {WANDB_SECRET_EXAMPLE[1:-1]} (the Secret's name and the key inside it)")
        name, secret, secret_key = (item[k] for k in _SECRET_ENV_KEYS)
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{at}.name", f"{name!r} is not an environment variable name", set_hint(f"{at}.name", "WANDB_API_KEY"))
        if name in _RESERVED_ENV or name.startswith(_RESERVED_ENV_PREFIXES):
            # torchrun sets these for each worker, and the chart its own: a Secret's value would replace
            # them (Kubernetes keeps the last of two env entries of one name) and split or hang the job.
            raise ConfigError(f"{at}.name", f"{name} is set for each pod by torchrun, the chart or the cloud "
                              "identity (or names a file); a Secret must not replace it",
                              f"name the variable something else (e.g. MY_{name}) and read that")
        if not isinstance(secret, str) or not _SECRET_NAME.fullmatch(secret):
            raise ConfigError(f"{at}.secretName", f"{secret!r} is not a Secret name (lowercase letters, digits, - and .)",
                              set_hint(f"{at}.secretName", "wandb"))
        if not isinstance(secret_key, str) or not _SECRET_KEY.fullmatch(secret_key):
            # Kubernetes' IsConfigMapKey (and the chart's values.schema.json): letters, digits, '-', '_', '.'.
            raise ConfigError(f"{at}.key", f"expected the key inside Secret {secret!r} (letters, digits, '-', '_' and "
                              f"'.', at most 253), got {secret_key!r}", set_hint(f"{at}.key", "api-key"))
        result.append(ChartSecretEnv(name=name, secret_name=secret, key=secret_key))
    names = [s.name for s in result]
    if len(set(names)) != len(names):
        raise ConfigError(key, f"a variable is set twice: {sorted({n for n in names if names.count(n) > 1})}",
                          "keep one entry per name")
    return tuple(result)


def _as_written_in_a_stack_file(item: Any) -> Any:
    """A SecretEnv object (the component's, or the chart's) as the stack file's {name, secretName, key}."""
    if dataclasses.is_dataclass(item):
        return {"name": item.name, "secretName": item.secret_name, "key": item.key}
    return item


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

    enabled: bool | None = setting(as_bool)
    """Run the job (default false: build the platform first, upload the data set, then enable it)."""
    name: str | None = setting(as_str)
    """The Helm release, the Job and the run directory /mnt/shared/runs/<name> (default train)."""
    namespace: str | None = setting(as_str)
    """The job's Kubernetes namespace, created unless it is default (default: default)."""
    pods_min: int | None = setting(as_int, minimum=1)
    """Pods the job needs to run (torchrun --nnodes min; default 1)."""
    pods_max: int | None = setting(as_int, minimum=1)
    """Pods the job runs at most (default 2, or podsMin if larger)."""
    gpus_per_pod: int | None = setting(as_int, minimum=1)
    """GPUs each pod takes (default: all of a node's)."""
    procs_per_pod: int | None = setting(as_int, minimum=1)
    """Training processes per pod; must equal gpusPerPod (one per GPU)."""
    data_prefix: str | None = setting(as_str)
    """The prepared data set, under <bucket>/<dataPrefix>/ (default data)."""
    tensorboard: bool | None = setting(as_bool)
    """Run TensorBoard beside the job (default true)."""
    queue: bool | None = setting(as_bool)
    """Submit the job through a Kueue LocalQueue, all pods admitted together (default false on TrainingPlatform, a cluster you bring; true in AwsStack and GcpStack, whose clusters get a queue per GPU pool)."""
    queue_name: str | None = setting(as_str)
    """The Kueue LocalQueue and ClusterQueue (default training)."""
    train: dict[str, Any] | None = setting(parse_train)
    """Flags of `python -m training train` in camelCase (warmupSteps for --warmup-steps), plus extraArgs."""
    secret_env: list[SecretEnv] | None = setting(read_secret_env)
    """Environment variables read from Kubernetes Secrets (e.g. WANDB_API_KEY)."""
    # The keys from before the pod/node rename: the loader moves them to the new names with one warning each.
    nodes_min: int | None = setting(renamed_to="pods_min")
    """Deprecated: the old name of podsMin (a pod of the job was once called a node); use podsMin."""
    nodes_max: int | None = setting(renamed_to="pods_max")
    """Deprecated: the old name of podsMax; use podsMax."""
    gpus_per_node: int | None = setting(renamed_to="gpus_per_pod")
    """Deprecated: the old name of gpusPerPod (GPUs per pod, not per node); use gpusPerPod."""
    procs_per_node: int | None = setting(renamed_to="procs_per_pod")
    """Deprecated: the old name of procsPerPod; use procsPerPod."""
