"""`trainstack:job`: the training job every cloud runs, its typed settings (job_settings.Job) resolved into JobConfig.

The rules a job must follow wherever it runs (pods min/max, one process per GPU, names the chart can
use, `train` keys the chart knows) live here once; each cloud only says how many GPUs its node type has.
A pod is one pod of the job (torchrun calls it a node); a node is a Kubernetes node, one machine.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from trainstack.contract.config import TrainConfig
from trainstack.infra.config.errors import NAMESPACE, ConfigError, set_hint
from trainstack.infra.config.job_settings import WANDB_SECRET_EXAMPLE, Job
from trainstack.infra.config.loader import as_written, keys_of, load, or_default, renamed_from, renamed_keys
from trainstack.infra.config.train_args import trainer_args
from trainstack.infra.core.namespaces import (
    CLOUD_RESERVED,
    CLOUD_RESERVED_PREFIXES,
    KUBERNETES_RESERVED_PREFIX,
)
from trainstack.infra.kubernetes.training_job import SecretEnv

KEY = f"{NAMESPACE}:job"
_K8S_NAME_MAX = 63
_DATA_PREFIX_MAX = 768
_DATA_PREFIX = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")  # what shlex.quote leaves as it is (ASCII)
# The keys from before "pod" and "node" had one meaning each ("node" meant a pod here): still read, each
# moved to its new name by the loader with a warning, so JOB_KEYS lists the new names only.
RENAMED_KEYS = renamed_keys(Job)
JOB_KEYS = keys_of(Job)
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The chart names the Job, its Service and its pods' hostnames after the release: at most 50 characters.
_JOB_NAME_MAX = 50


@dataclass(frozen=True)
class JobConfig:
    enabled: bool
    name: str  # the Helm release, the Job and the run directory /mnt/shared/runs/<name>
    namespace: str
    pods_min: int
    pods_max: int
    procs_per_pod: int
    gpus_per_pod: int
    data_prefix: str  # the prepared data set, under <bucket>/<data_prefix>/
    tensorboard: bool
    # Submit through Kueue (all pods admitted together, in order when the pool is full); on by default
    # since every stack has a queue per GPU pool. false: no Kueue at all, jobs start as soon as created.
    queue: bool = True
    queue_name: str = "training"  # the LocalQueue and ClusterQueue
    train: Mapping[str, Any] = field(default_factory=dict)
    # Environment variables from Kubernetes Secrets the user created (the chart's secretEnv).
    secret_env: tuple[SecretEnv, ...] = ()


def parse_job(raw: Mapping[str, str], gpus_per_node: int, node_type: str,
              installed_namespaces: Mapping[str, str] | None = None) -> JobConfig:
    """trainstack:job of a stack file's config (`raw`: every key as the CLI hands it), loaded and resolved."""
    return resolve_job(load(Job, raw.get(KEY), KEY), gpus_per_node, node_type, installed_namespaces)


def resolve_job(job: Job | None, gpus_per_node: int, node_type: str,
                installed_namespaces: Mapping[str, str] | None = None) -> JobConfig:
    """The job (loaded: trainstack/infra/config/loader.py) for nodes with `gpus_per_node` GPUs each (`node_type`
    names them in errors), defaults applied and checked. `installed_namespaces`: the namespaces the caller installs
    into -> what it installs there, when it creates the job's namespace; None for a job submitted into a namespace
    that already exists."""
    job = job or Job()
    try:
        return _resolved(job, gpus_per_node, node_type, installed_namespaces)
    except ConfigError as error:
        raise as_written(error, renamed_from(job), KEY) from None


@contextmanager
def job_keys_as_written(job: Job | None) -> Iterator[None]:
    """A cloud's own checks on the job (the GPU nodes its podsMax needs) naming a renamed key as the user wrote it,
    as resolve_job's do: the new name alone would lead the user to set it beside the old one (both set)."""
    try:
        yield
    except ConfigError as error:
        raise (as_written(error, renamed_from(job), KEY) if error.key.startswith(f"{KEY}.") else error) from None


def _resolved(job: Job, gpus_per_node: int, node_type: str,
              installed_namespaces: Mapping[str, str] | None) -> JobConfig:
    pods_min = or_default(job.pods_min, 1)
    pods_max = or_default(job.pods_max, max(pods_min, 2))
    if pods_min > pods_max:
        raise ConfigError(f"{KEY}.podsMin", f"podsMin ({pods_min}) is greater than podsMax ({pods_max})",
                          set_hint(f"{KEY}.podsMin", str(pods_max)))
    gpus = or_default(job.gpus_per_pod, gpus_per_node)
    if gpus > gpus_per_node:
        raise ConfigError(f"{KEY}.gpusPerPod", f"{gpus} GPUs per pod, but the {node_type} has "
                          f"{gpus_per_node}", set_hint(f"{KEY}.gpusPerPod", str(gpus_per_node)))
    procs = or_default(job.procs_per_pod, gpus)
    if procs != gpus:
        raise ConfigError(f"{KEY}.procsPerPod", f"{procs} processes for {gpus} GPUs (torchrun starts one process "
                          "per GPU)", set_hint(f"{KEY}.procsPerPod", str(gpus)))
    names = {}
    for name_key, field_name, default in (("name", "name", "train"), ("namespace", "namespace", "default"),
                                          ("queueName", "queue_name", "training")):
        names[name_key] = value = or_default(getattr(job, field_name), default)
        if name_key == "name" and len(value) > _JOB_NAME_MAX:
            raise ConfigError(f"{KEY}.name", f"{len(value)} characters; the chart names the Job, its Service and "
                              f"its pods' hostnames after it, so it holds at most {_JOB_NAME_MAX}",
                              set_hint(f"{KEY}.name", default))
        if len(value) > _K8S_NAME_MAX:  # namespaces and LocalQueues are DNS labels (RFC 1123)
            raise ConfigError(f"{KEY}.{name_key}", f"{len(value)} characters; a Kubernetes "
                              f"{'namespace' if name_key == 'namespace' else 'LocalQueue'} name holds at most "
                              f"{_K8S_NAME_MAX}", set_hint(f"{KEY}.{name_key}", default))
        if not _K8S_NAME.fullmatch(value) or (name_key == "name" and value[0].isdigit()):
            raise ConfigError(f"{KEY}.{name_key}", f"{value!r} is not a valid name (lowercase letters, digits and "
                              "-, starting with a letter)", set_hint(f"{KEY}.{name_key}", default))
    if installed_namespaces is not None:
        _check_namespace(names["namespace"], installed_namespaces)
    data_prefix = or_default(job.data_prefix, "data").strip("/")
    if "://" in data_prefix or not data_prefix:
        raise ConfigError(f"{KEY}.dataPrefix", f"expected a prefix inside the snapshot bucket, got {data_prefix!r}",
                          set_hint(f"{KEY}.dataPrefix", "data"))
    segments = data_prefix.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        # Object stores have no directories: s3://b/../x/ names objects whose keys start with "../x/".
        kept = "/".join(segment for segment in segments if segment not in ("", ".", "..")) or "data"
        raise ConfigError(f"{KEY}.dataPrefix", f"{data_prefix!r} has an empty, . or .. part, which S3 and GCS keep "
                          "as part of the object names (a bucket has no parent or current directory)",
                          set_hint(f"{KEY}.dataPrefix", shlex.quote(kept)))
    if len(data_prefix.encode()) > _DATA_PREFIX_MAX:
        # S3 and GCS object names are at most 1024 bytes (S3 user guide object-keys.html; GCS objects#naming),
        # and the prefix is followed by the data set's own paths.
        raise ConfigError(f"{KEY}.dataPrefix", f"{len(data_prefix.encode())} bytes; object names are at most 1024, "
                          f"and the data set's file names follow the prefix, so it holds at most {_DATA_PREFIX_MAX}",
                          set_hint(f"{KEY}.dataPrefix", "data"))
    if not _DATA_PREFIX.fullmatch(data_prefix):
        # S3 and GCS take almost any key, but a space or a shell character would need quoting in every
        # printed command (uploadDataCommand) and in the trainer's --data; the safe set needs none.
        kept = re.sub(r"[^A-Za-z0-9_@%+=:,./-]+", "-", data_prefix).strip("-/") or "data"
        raise ConfigError(f"{KEY}.dataPrefix", f"{data_prefix!r} has characters outside ASCII letters, digits and "
                          "'_@%+=:,./-' (object keys allow them, but every command that names the prefix would need "
                          "quoting)", set_hint(f"{KEY}.dataPrefix", shlex.quote(kept)))
    train: dict[str, Any] = or_default(job.train, {})
    secret_env = tuple(or_default(job.secret_env, ()))
    _check_wandb_key(train, secret_env)
    return JobConfig(
        enabled=or_default(job.enabled, False),  # the shipped stack files start without a job (data first)
        name=names["name"],
        namespace=names["namespace"],
        pods_min=pods_min,
        pods_max=pods_max,
        procs_per_pod=procs,
        gpus_per_pod=gpus,
        data_prefix=data_prefix,
        tensorboard=or_default(job.tensorboard, True),
        queue=or_default(job.queue, True),
        queue_name=names["queueName"],
        train=train,
        secret_env=secret_env,
    )


def _check_namespace(namespace: str, installed_namespaces: Mapping[str, str]) -> None:
    """The stack creates the job's namespace (all but `default`) and deletes it on destroy: a namespace the
    cluster or the stack already has would fail `up` with AlreadyExists, and destroy would take it along."""
    if namespace.startswith(KUBERNETES_RESERVED_PREFIX):
        whose = "a Kubernetes system namespace (the kube- prefix is reserved)"
    elif namespace in CLOUD_RESERVED or namespace.startswith(CLOUD_RESERVED_PREFIXES):
        whose = "a namespace GKE keeps for its own components (gmp-*, gke-*)"
    elif namespace in installed_namespaces:
        whose = f"the namespace the stack installs {installed_namespaces[namespace]} into"
    else:
        return
    raise ConfigError(f"{KEY}.namespace", f"{namespace!r} is {whose}; the stack creates the job's namespace and "
                      "deletes it on destroy", f"{set_hint(f'{KEY}.namespace', 'training')} (a namespace of the "
                      "job's own, or default)")


def _check_wandb_key(train: Mapping[str, Any], secret_env: tuple[SecretEnv, ...]) -> None:
    """W&B online needs WANDB_API_KEY in the pods; without it every pod would stop at start-up."""
    args = trainer_args(dict(train))
    wandb = TrainConfig.from_args(args).wandb
    if not wandb.enabled or wandb.mode != "online":
        return
    if "WANDB_API_KEY" not in {s.name for s in secret_env}:
        raise ConfigError(f"{KEY}.secretEnv", f"job.train.wandbProject {args.wandb_project!r} logs to W&B online, but no "
                          "secretEnv gives the pods WANDB_API_KEY",
                          "kubectl create secret generic wandb -n <job namespace> --from-literal=api-key=<your key>, then "
                          f"in Pulumi.<stack>.yaml {KEY}: {{secretEnv: {WANDB_SECRET_EXAMPLE}}} (or set "
                          f"{KEY}.train.wandbMode offline)")


def gpu_nodes_for_job(job: JobConfig, gpus_per_node: int) -> tuple[int, int]:
    """(GPU nodes to start the job, GPU nodes for the job at its largest): pods are packed by GPUs."""
    pods_per_node = gpus_per_node // job.gpus_per_pod
    return -(-job.pods_min // pods_per_node), -(-job.pods_max // pods_per_node)
