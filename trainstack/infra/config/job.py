"""`trainstack:job.*`: the training job every cloud runs, parsed into JobConfig.

The rules a job must follow wherever it runs (pods min/max, one process per GPU, names the chart can
use, `train` keys the chart knows) live here once; each cloud only says how many GPUs its node type has.
A pod is one pod of the job (torchrun calls it a node); a node is a Kubernetes node, one machine.
Secrets (a W&B key) reach the pods only by reference: `secretEnv` names Kubernetes Secrets the user
created, and the chart mounts them as secretKeyRef; no secret value passes through Pulumi.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from trainstack.contract.config import TrainConfig
from trainstack.infra.config.errors import NAMESPACE, ConfigError, set_hint
from trainstack.infra.config.reader import Section, as_bool, as_int, as_str, decoded, reject_unknown
from trainstack.infra.config.train_args import parse_train, trainer_args
from trainstack.infra.core.namespaces import (
    CLOUD_RESERVED,
    CLOUD_RESERVED_PREFIXES,
    KUBERNETES_RESERVED_PREFIX,
)
from trainstack.infra.kubernetes.training_job import SecretEnv

KEY = f"{NAMESPACE}:job"
_K8S_NAME_MAX = 63
_DATA_PREFIX_MAX = 768
# Kubernetes IsConfigMapKey: these characters, at most 253, neither "." nor starting with "..".
_SECRET_KEY = re.compile(r"(?!\.$)(?!\.\.)[-._a-zA-Z0-9]{1,253}")
_DATA_PREFIX = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")  # what shlex.quote leaves as it is (ASCII)
# The keys from before "pod" and "node" had one meaning each ("node" meant a pod here): still read, each
# renamed by _renamed with a warning, so JOB_KEYS (what Section accepts) lists the new names only.
RENAMED_KEYS = {"nodesMin": "podsMin", "nodesMax": "podsMax", "gpusPerNode": "gpusPerPod",
                "procsPerNode": "procsPerPod"}
JOB_KEYS = ("enabled", "name", "namespace", "podsMin", "podsMax", "gpusPerPod", "procsPerPod", "dataPrefix",
            "tensorboard", "queue", "queueName", "train", "secretEnv")
_SECRET_ENV_KEYS = ("name", "secretName", "key")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A DNS-1123 subdomain (Kubernetes IsDNS1123Subdomain): dot-separated labels, at most 253 in all.
_SECRET_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# How a user gives the job their W&B key: a Secret they create, named here; the key never enters Pulumi.
WANDB_SECRET_EXAMPLE = "[{name: WANDB_API_KEY, secretName: wandb, key: api-key}]"
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
    """trainstack:job, for nodes with `gpus_per_node` GPUs each (`node_type` names them in errors).
    `installed_namespaces`: the namespaces the caller installs into -> what it installs there, when it
    creates the job's namespace; None for a job submitted into a namespace that already exists."""
    value, renamed = _renamed(raw.get(KEY))
    try:
        return _parse_job(Section(KEY, value, JOB_KEYS), gpus_per_node, node_type, installed_namespaces)
    except ConfigError as error:
        raise _as_written(error, renamed) from None


def _parse_job(section: Section, gpus_per_node: int, node_type: str,
               installed_namespaces: Mapping[str, str] | None) -> JobConfig:
    pods_min = section.get("podsMin", as_int, 1, minimum=1)
    pods_max = section.get("podsMax", as_int, max(pods_min, 2), minimum=1)
    if pods_min > pods_max:
        raise ConfigError(f"{KEY}.podsMin", f"podsMin ({pods_min}) is greater than podsMax ({pods_max})",
                          set_hint(f"{KEY}.podsMin", str(pods_max)))
    gpus = section.get("gpusPerPod", as_int, gpus_per_node, minimum=1)
    if gpus > gpus_per_node:
        raise ConfigError(f"{KEY}.gpusPerPod", f"{gpus} GPUs per pod, but the {node_type} has "
                          f"{gpus_per_node}", set_hint(f"{KEY}.gpusPerPod", str(gpus_per_node)))
    procs = section.get("procsPerPod", as_int, gpus, minimum=1)
    if procs != gpus:
        raise ConfigError(f"{KEY}.procsPerPod", f"{procs} processes for {gpus} GPUs (torchrun starts one process "
                          "per GPU)", set_hint(f"{KEY}.procsPerPod", str(gpus)))
    names = {}
    for name_key, default in (("name", "train"), ("namespace", "default"), ("queueName", "training")):
        names[name_key] = value = section.get(name_key, as_str, default)
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
    data_prefix = section.get("dataPrefix", as_str, "data").strip("/")
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
    train: dict[str, Any] = section.get("train", parse_train, {})
    secret_env = section.get("secretEnv", _secret_env, ())
    _check_wandb_key(train, secret_env)
    return JobConfig(
        enabled=section.get("enabled", as_bool, False),  # the shipped stack files start without a job (data first)
        name=names["name"],
        namespace=names["namespace"],
        pods_min=pods_min,
        pods_max=pods_max,
        procs_per_pod=procs,
        gpus_per_pod=gpus,
        data_prefix=data_prefix,
        tensorboard=section.get("tensorboard", as_bool, True),
        queue=section.get("queue", as_bool, True),
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


def _renamed(value: Any) -> tuple[Any, dict[str, str]]:
    """The section with each old key under its new name, one warning per old key; both set is an error.
    Also the renames made, new -> old, so that an error names the key the user wrote."""
    if value is None:
        return None, {}
    section = decoded(value)
    if not isinstance(section, dict):
        return section, {}  # Section names the problem
    section = dict(section)
    renamed = {}
    for old, new in RENAMED_KEYS.items():
        if old not in section:
            continue
        if new in section:
            raise ConfigError(f"{KEY}.{old}", f"both {old} and {new} are set ({new} replaces {old})",
                              f"pulumi config rm --path '{KEY}.{old}'")
        pulumi.log.warn(f"{KEY}.{old} is deprecated: rename it to {KEY}.{new} (same meaning: per pod of the job)")
        section[new] = section.pop(old)
        renamed[new] = old
    return section, renamed


def _as_written(error: ConfigError, renamed: Mapping[str, str]) -> ConfigError:
    """An error on a key the user wrote under its old name, in that name, with the hint to rename it:
    the hint alone would set the new key beside the old one, which is refused as both set."""
    if not renamed:
        return error
    field = error.key.removeprefix(f"{KEY}.")
    problem, _, fix = str(error)[len(error.key) + 2:].rpartition(". Fix: ")
    for new, old in renamed.items():
        problem = re.sub(rf"\b{new}\b", old, problem)
    if field not in renamed:
        return ConfigError(error.key, problem, fix)
    old = renamed[field]
    return ConfigError(f"{KEY}.{old}", problem, f"rename {old} to {field}: pulumi config rm --path '{KEY}.{old}' "
                       f"&& {fix}")


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


def _secret_env(value: Any, key: str) -> tuple[SecretEnv, ...]:
    """[{name, secretName, key}]: each variable is read from a Secret in the job's namespace (secretKeyRef)."""
    items = decoded(value)
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
        result.append(SecretEnv(name=name, secret_name=secret, key=secret_key))
    names = [s.name for s in result]
    if len(set(names)) != len(names):
        raise ConfigError(key, f"a variable is set twice: {sorted({n for n in names if names.count(n) > 1})}",
                          "keep one entry per name")
    return tuple(result)


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
