"""The AWS stack's configuration: every `trainstack:*` key parsed and checked once, at program start.

Bad config stops the program before any resource is registered, with one line that names the key and
the fix (ConfigError is a pulumi.RunError, which the Pulumi runtime prints as a single error line
without a traceback).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from infra import versions
from infra.training_job import chart_default_values

NAMESPACE = "trainstack"

# NVIDIA GPUs per instance, for the x86_64 families the AL2023_x86_64_NVIDIA AMI runs on
# (ARM families such as g5g are left out: that AMI cannot boot them).
GPU_INSTANCE_FAMILIES: Mapping[str, Mapping[str, int]] = {
    "g4dn": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "metal": 8},
    "g5": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
           "48xlarge": 8},
    "g6": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
           "48xlarge": 8},
    "g6e": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
            "48xlarge": 8},
    "gr6": {"4xlarge": 1, "8xlarge": 1},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"4xlarge": 1, "48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "p6-b200": {"48xlarge": 8},
}

# The seed's zones; other regions must list theirs (zone letters differ from region to region).
DEFAULT_ZONES: Mapping[str, tuple[str, ...]] = {
    "us-west-2": ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"),
}

# trainstack builds its AWS provider explicitly from these; any other aws:* key would be ignored.
AWS_PROVIDER_KEYS = ("region", "profile")

_IAM_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class ConfigError(pulumi.RunError):
    """A config value that cannot work; the message is one line: `<key>: <problem>. Fix: <how>`."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}. Fix: {fix}")
        self.key = key


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC the stack uses instead of creating one (its CIDR is looked up, never copied by hand)."""

    vpc_id: str
    public_subnet_ids: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]


@dataclass(frozen=True)
class NetworkConfig:
    availability_zones: tuple[str, ...]
    vpc_cidr: str
    nat_gateway_per_zone: bool
    existing: ExistingNetwork | None = None


@dataclass(frozen=True)
class NodeGroupConfig:
    instance_types: tuple[str, ...]
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gb: int


@dataclass(frozen=True)
class GpuNodeGroupConfig(NodeGroupConfig):
    capacity_type: str  # "SPOT" or "ON_DEMAND"
    gpus_per_instance: int
    ssh_public_key: str | None = None
    ignore_scaling_changes: bool = False


@dataclass(frozen=True)
class JobConfig:
    enabled: bool
    name: str  # the Helm release, the Job and the run directory /mnt/shared/runs/<name>
    namespace: str
    nodes_min: int
    nodes_max: int
    procs_per_node: int
    gpus_per_node: int
    data_prefix: str  # the prepared data set, under s3://<snapshot bucket>/<data_prefix>/
    tensorboard: bool
    train: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AwsStackConfig:
    region: str
    aws_profile: str | None  # aws:profile, for the explicit AWS provider and the kubeconfig
    cluster_name: str
    kubernetes_version: str
    network: NetworkConfig
    system_nodes: NodeGroupConfig
    gpu_nodes: GpuNodeGroupConfig
    job: JobConfig
    delete_bucket_on_destroy: bool
    cluster_admin_arns: tuple[str, ...]
    api_public_access_cidrs: tuple[str, ...]
    tags: Mapping[str, str]


def raw_config() -> dict[str, str]:
    """Every stack config key as the Pulumi CLI hands it to the program (values are strings; objects JSON).

    The CLI passes config in the PULUMI_CONFIG environment variable; tests set it with set_all_config.
    """
    merged = dict(pulumi.runtime.get_config_env())
    merged.update(pulumi.runtime.config.CONFIG.get())
    return merged


def _set_hint(key: str, example: str) -> str:
    return f"pulumi config set --path '{key}' {example}"


# --- typed readers: each raises ConfigError naming the full key -------------------------------------


def _as_int(value: Any, key: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"expected a whole number, got {value!r}", _set_hint(key, "<number>"))
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"must be at least {minimum}, got {value}", _set_hint(key, str(minimum)))
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"must be at most {maximum}, got {value}", _set_hint(key, str(maximum)))
    return value


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(key, f"expected true or false, got {value!r}", _set_hint(key, "true"))
    return value


def _as_str(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a non-empty string, got {value!r}", _set_hint(key, "<text>"))
    return value.strip()


def _as_str_list(value: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    value = _decoded(value)
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(key, f"expected a list of strings, got {value!r}", _set_hint(key + "[0]", "<text>"))
    if not value and not allow_empty:
        raise ConfigError(key, "must not be empty", _set_hint(key + "[0]", "<text>"))
    if len(set(value)) != len(value):
        raise ConfigError(key, f"lists a value twice: {value!r}", f"remove the repeat from {key}")
    return tuple(v.strip() for v in value)


def _as_str_map(value: Any, key: str) -> dict[str, str]:
    value = _decoded(value)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(key, f"expected a map of strings, got {value!r}", _set_hint(key + ".<name>", "<text>"))
    return dict(value)


def _as_object(value: Any, key: str) -> dict[str, Any]:
    value = _decoded(value)
    if not isinstance(value, dict):
        raise ConfigError(key, f"expected an object, got {value!r}", f"write {key} as a YAML mapping")
    return value


def _decoded(value: Any) -> Any:
    """Top-level lists and objects arrive as JSON text; anything else is taken as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


class _Section:
    """The keys of one config object, consumed one by one; whatever is left over is unknown."""

    def __init__(self, key: str, value: Any, allowed: tuple[str, ...]) -> None:
        value = {} if value is None else _decoded(value)
        if not isinstance(value, dict):
            raise ConfigError(key, f"expected an object with keys {', '.join(allowed)}, got {value!r}",
                              f"write {key} as a YAML mapping in Pulumi.<stack>.yaml")
        self.key = key
        self._values = value
        _reject_unknown(key + ".", value.keys(), allowed)

    def get(self, name: str, read: Callable[..., Any], default: Any, **kwargs: Any) -> Any:
        if name not in self._values or self._values[name] is None:
            return default
        return read(self._values[name], f"{self.key}.{name}", **kwargs)


def _top(raw: Mapping[str, str], name: str, read: Callable[..., Any], default: Any, **kwargs: Any) -> Any:
    """A top-level `trainstack:<name>` value, read and checked, or the default when unset."""
    key = f"{NAMESPACE}:{name}"
    return read(raw[key], key, **kwargs) if key in raw else default


def _reject_unknown(prefix: str, keys: Any, allowed: tuple[str, ...]) -> None:
    for name in sorted(keys):
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else f"known keys: {', '.join(allowed)}"
            raise ConfigError(f"{prefix}{name}", "unknown key", f"remove it or rename it ({hint})")


# --- the sections -----------------------------------------------------------------------------------

TOP_LEVEL_KEYS = (
    "cloud",
    "clusterName",
    "kubernetesVersion",
    "availabilityZones",
    "vpcCidr",
    "natGatewayPerZone",
    "existingNetwork",
    "systemNodes",
    "gpuNodes",
    "job",
    "deleteBucketOnDestroy",
    "clusterAdmins",
    "apiPublicAccessCidrs",
    "tags",
)


def _instance_gpus(instance_type: str, key: str) -> int:
    family, _, size = instance_type.partition(".")
    sizes = GPU_INSTANCE_FAMILIES.get(family)
    if sizes is None:
        raise ConfigError(key, f"{instance_type} has no NVIDIA GPU (or runs on ARM)",
                          f"use an x86 GPU type such as g4dn.xlarge (families: {', '.join(GPU_INSTANCE_FAMILIES)})")
    if size not in sizes:
        raise ConfigError(key, f"{instance_type} is not a size of the {family} family",
                          f"use one of {', '.join(family + '.' + s for s in sizes)}")
    return sizes[size]


def _check_scaling(key: str, min_size: int, desired: int, max_size: int) -> None:
    if min_size > max_size:
        raise ConfigError(f"{key}.min", f"min ({min_size}) is greater than max ({max_size})",
                          _set_hint(f"{key}.min", str(max_size)))
    if not min_size <= desired <= max_size:
        raise ConfigError(f"{key}.desired", f"desired ({desired}) must lie between min ({min_size}) and max ({max_size})",
                          _set_hint(f"{key}.desired", str(max(min_size, min(desired, max_size)))))
    if max_size < 1:
        raise ConfigError(f"{key}.max", "must be at least 1", _set_hint(f"{key}.max", "1"))


def _parse_network(raw: Mapping[str, str], region: str) -> NetworkConfig:
    zones_key = f"{NAMESPACE}:availabilityZones"
    zones = _top(raw, "availabilityZones", _as_str_list, DEFAULT_ZONES.get(region, ()), allow_empty=True)
    existing = None
    existing_key = f"{NAMESPACE}:existingNetwork"
    if existing_key in raw:
        section = _Section(existing_key, raw[existing_key], ("vpcId", "publicSubnetIds", "privateSubnetIds"))
        vpc_id = section.get("vpcId", _as_str, None)
        if vpc_id is None or not vpc_id.startswith("vpc-"):
            raise ConfigError(f"{existing_key}.vpcId", f"expected a VPC ID like vpc-0123abcd, got {vpc_id!r}",
                              _set_hint(f"{existing_key}.vpcId", "vpc-0123abcd"))
        private = section.get("privateSubnetIds", _as_str_list, ())
        public = section.get("publicSubnetIds", _as_str_list, (), allow_empty=True)
        if not private:
            raise ConfigError(f"{existing_key}.privateSubnetIds", "no private subnets given (nodes and EFS mount "
                              "targets live there)", _set_hint(f"{existing_key}.privateSubnetIds[0]", "subnet-..."))
        for subnet_key, subnets in (("privateSubnetIds", private), ("publicSubnetIds", public)):
            for subnet in subnets:
                if not subnet.startswith("subnet-"):
                    raise ConfigError(f"{existing_key}.{subnet_key}", f"{subnet!r} is not a subnet ID",
                                      "use IDs like subnet-0123abcd")
        existing = ExistingNetwork(vpc_id=vpc_id, public_subnet_ids=public, private_subnet_ids=private)
    elif not zones:
        raise ConfigError(zones_key, f"no availability zones for region {region}",
                          f"pulumi config set --path '{zones_key}[0]' {region}a (list two or more zones)")
    if len(zones) > 8:
        raise ConfigError(zones_key, f"{len(zones)} zones: the VPC layout has room for 8", "list at most 8 zones")
    for zone in zones:
        if not (zone.startswith(region) and re.fullmatch(r"[a-z]", zone[len(region):])):
            raise ConfigError(zones_key, f"{zone!r} is not a zone of region {region}",
                              f"use zones like {region}a, {region}b")
    cidr_key = f"{NAMESPACE}:vpcCidr"
    cidr = _top(raw, "vpcCidr", _as_str, "10.0.0.0/16")
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        raise ConfigError(cidr_key, f"{cidr!r} is not an IPv4 CIDR block", _set_hint(cidr_key, "10.0.0.0/16")) from None
    # Two subnets per zone, each a /20 or larger when the VPC is a /16: see network.py.
    if network.prefixlen > 20 or not network.is_private:
        raise ConfigError(cidr_key, f"{cidr} must be a private block of size /20 or larger",
                          _set_hint(cidr_key, "10.0.0.0/16"))
    return NetworkConfig(availability_zones=zones, vpc_cidr=str(network),
                         nat_gateway_per_zone=_top(raw, "natGatewayPerZone", _as_bool, False), existing=existing)


def _parse_system_nodes(raw: Mapping[str, str]) -> NodeGroupConfig:
    key = f"{NAMESPACE}:systemNodes"
    section = _Section(key, raw.get(key), ("instanceType", "min", "desired", "max", "diskSizeGb"))
    min_size = section.get("min", _as_int, 1, minimum=1)
    desired = section.get("desired", _as_int, 1, minimum=1)
    max_size = section.get("max", _as_int, 2, minimum=1)
    _check_scaling(key, min_size, desired, max_size)
    return NodeGroupConfig(
        instance_types=(section.get("instanceType", _as_str, "t3.medium"),),
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gb=section.get("diskSizeGb", _as_int, 20, minimum=20, maximum=16384),
    )


def chart_train_keys() -> tuple[str, ...]:
    """The chart's own `train` keys: one the chart adds is accepted without touching this file."""
    return tuple(chart_default_values()["train"])


def _parse_gpu_nodes_and_job(raw: Mapping[str, str]) -> tuple[GpuNodeGroupConfig, JobConfig]:
    """The GPU node group and the job together: unless set, the node count follows the job."""
    gpu_key = f"{NAMESPACE}:gpuNodes"
    gpu = _Section(gpu_key, raw.get(gpu_key), ("instanceTypes", "min", "desired", "max", "diskSizeGb",
                                               "capacityType", "sshPublicKey", "ignoreScalingChanges"))
    types = gpu.get("instanceTypes", _as_str_list, ("g4dn.xlarge",))
    gpus_by_type = {t: _instance_gpus(t, f"{gpu_key}.instanceTypes") for t in types}
    if len(set(gpus_by_type.values())) > 1:
        raise ConfigError(f"{gpu_key}.instanceTypes", f"types with different GPU counts cannot share one job: "
                          f"{gpus_by_type}", "list instance types with the same number of GPUs")
    gpus_per_instance = next(iter(gpus_by_type.values()))
    job = _parse_job(raw, gpus_per_instance)

    pods_per_instance = gpus_per_instance // job.gpus_per_node
    instances_for_job = -(-job.nodes_max // pods_per_instance)
    min_size = gpu.get("min", _as_int, 0, minimum=0)
    max_size = gpu.get("max", _as_int, max(instances_for_job, min_size), minimum=1)
    # No job, no GPU nodes: spot GPUs are the bill, so they scale to zero unless asked otherwise.
    desired = gpu.get("desired", _as_int, max(min_size, instances_for_job if job.enabled else 0), minimum=0)
    _check_scaling(gpu_key, min_size, desired, max_size)
    if instances_for_job > max_size:
        raise ConfigError(f"{NAMESPACE}:job.nodesMax", f"{job.nodes_max} pods need {instances_for_job} GPU nodes "
                          f"({pods_per_instance} per {types[0]}), but {gpu_key}.max is {max_size}",
                          f"raise {gpu_key}.max to {instances_for_job} or lower {NAMESPACE}:job.nodesMax")
    ignore_scaling = gpu.get("ignoreScalingChanges", _as_bool, False)
    instances_to_start = -(-job.nodes_min // pods_per_instance)
    if job.enabled and not ignore_scaling and desired < instances_to_start:
        raise ConfigError(f"{gpu_key}.desired", f"the job needs {instances_to_start} GPU nodes to start, "
                          f"desired is {desired}", _set_hint(f"{gpu_key}.desired", str(instances_to_start)))
    capacity = gpu.get("capacityType", _as_str, "SPOT").upper()
    if capacity not in ("SPOT", "ON_DEMAND"):
        raise ConfigError(f"{gpu_key}.capacityType", f"expected SPOT or ON_DEMAND, got {capacity!r}",
                          _set_hint(f"{gpu_key}.capacityType", "SPOT"))
    ssh_key = gpu.get("sshPublicKey", _as_str, None)
    if ssh_key is not None and not re.match(r"^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+", ssh_key):
        raise ConfigError(f"{gpu_key}.sshPublicKey", "expected an OpenSSH public key (ssh-ed25519 AAAA...)",
                          f"pulumi config set --path '{gpu_key}.sshPublicKey' \"$(cat ~/.ssh/id_ed25519.pub)\"")
    gpu_nodes = GpuNodeGroupConfig(
        instance_types=types,
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gb=gpu.get("diskSizeGb", _as_int, 100, minimum=20, maximum=16384),
        capacity_type=capacity,
        gpus_per_instance=gpus_per_instance,
        ssh_public_key=ssh_key,
        ignore_scaling_changes=ignore_scaling,
    )
    return gpu_nodes, job


def _parse_job(raw: Mapping[str, str], gpus_per_instance: int) -> JobConfig:
    key = f"{NAMESPACE}:job"
    section = _Section(key, raw.get(key), ("enabled", "name", "namespace", "nodesMin", "nodesMax", "gpusPerNode",
                                           "procsPerNode", "dataPrefix", "tensorboard", "train"))
    nodes_min = section.get("nodesMin", _as_int, 1, minimum=1)
    nodes_max = section.get("nodesMax", _as_int, max(nodes_min, 2), minimum=1)
    if nodes_min > nodes_max:
        raise ConfigError(f"{key}.nodesMin", f"nodesMin ({nodes_min}) is greater than nodesMax ({nodes_max})",
                          _set_hint(f"{key}.nodesMin", str(nodes_max)))
    gpus = section.get("gpusPerNode", _as_int, gpus_per_instance, minimum=1)
    if gpus > gpus_per_instance:
        raise ConfigError(f"{key}.gpusPerNode", f"{gpus} GPUs per pod, but the GPU instance type has "
                          f"{gpus_per_instance}", _set_hint(f"{key}.gpusPerNode", str(gpus_per_instance)))
    procs = section.get("procsPerNode", _as_int, gpus, minimum=1)
    if procs != gpus:
        raise ConfigError(f"{key}.procsPerNode", f"{procs} processes for {gpus} GPUs (torchrun starts one process "
                          "per GPU)", _set_hint(f"{key}.procsPerNode", str(gpus)))
    names = {}
    for name_key, default in (("name", "train"), ("namespace", "default")):
        names[name_key] = value = section.get(name_key, _as_str, default)
        # The name becomes the Job's and its pods' hostnames: the chart allows 50 characters.
        if not _K8S_NAME.fullmatch(value) or (name_key == "name" and (len(value) > 50 or value[0].isdigit())):
            raise ConfigError(f"{key}.{name_key}", f"{value!r} is not a valid name (lowercase letters, digits and "
                              "-, starting with a letter)", _set_hint(f"{key}.{name_key}", default))
    data_prefix = section.get("dataPrefix", _as_str, "data").strip("/")
    if "://" in data_prefix or not data_prefix:
        raise ConfigError(f"{key}.dataPrefix", f"expected a prefix inside the snapshot bucket, got {data_prefix!r}",
                          _set_hint(f"{key}.dataPrefix", "data"))
    train: dict[str, Any] = section.get("train", _as_object, {})
    _reject_unknown(f"{key}.train.", train.keys(), chart_train_keys())
    return JobConfig(
        enabled=section.get("enabled", _as_bool, True),
        name=names["name"],
        namespace=names["namespace"],
        nodes_min=nodes_min,
        nodes_max=nodes_max,
        procs_per_node=procs,
        gpus_per_node=gpus,
        data_prefix=data_prefix,
        tensorboard=section.get("tensorboard", _as_bool, True),
        train=train,
    )


def _parse_kubernetes_version(raw: Mapping[str, str]) -> str:
    key = f"{NAMESPACE}:kubernetesVersion"
    version = _top(raw, "kubernetesVersion", _as_str, versions.EKS_KUBERNETES_VERSION)
    if version not in versions.EKS_SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(versions.EKS_SUPPORTED_KUBERNETES_VERSIONS)
        raise ConfigError(key, f"Kubernetes {version} is not one trainstack supports ({supported})",
                          _set_hint(key, versions.EKS_KUBERNETES_VERSION))
    return version


def parse_aws_config(raw: Mapping[str, str] | None = None, stack: str | None = None) -> AwsStackConfig:
    """All of the AWS stack's config, typed and checked; raises ConfigError on the first bad key."""
    raw = raw_config() if raw is None else raw
    stack = pulumi.get_stack() if stack is None else stack
    ours = {k.split(":", 1)[1] for k in raw if k.startswith(NAMESPACE + ":")}
    _reject_unknown(NAMESPACE + ":", ours, TOP_LEVEL_KEYS)

    for key in sorted(raw):
        if key.startswith("aws:") and key.split(":", 1)[1] not in AWS_PROVIDER_KEYS:
            raise ConfigError(key, "trainstack's AWS provider takes only aws:region and aws:profile",
                              f"pulumi config rm {key} and set the matching AWS_* environment variable instead")
    region = raw.get("aws:region")
    if not region:
        raise ConfigError("aws:region", "not set", "pulumi config set aws:region us-west-2")

    name_key = f"{NAMESPACE}:clusterName"
    cluster_name = _top(raw, "clusterName", _as_str, f"{NAMESPACE}-{stack}")
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ConfigError(name_key, f"{cluster_name!r} is not a valid EKS cluster name (letters, digits, - and _, "
                          "at most 100)", _set_hint(name_key, f"{NAMESPACE}-{stack}"))

    gpu_nodes, job = _parse_gpu_nodes_and_job(raw)
    admins_key = f"{NAMESPACE}:clusterAdmins"
    admins = _top(raw, "clusterAdmins", _as_str_list, (), allow_empty=True)
    for arn in admins:
        if not _IAM_ARN.fullmatch(arn):
            raise ConfigError(admins_key, f"{arn!r} is not an IAM role or user ARN",
                              "use ARNs like arn:aws:iam::123456789012:role/Admin")
    cidrs_key = f"{NAMESPACE}:apiPublicAccessCidrs"
    cidrs = _top(raw, "apiPublicAccessCidrs", _as_str_list, ("0.0.0.0/0",))
    for cidr in cidrs:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            raise ConfigError(cidrs_key, f"{cidr!r} is not an IPv4 CIDR block",
                              "use blocks like 203.0.113.7/32 (your address: curl -s https://checkip.amazonaws.com)") from None
    return AwsStackConfig(
        region=region,
        aws_profile=raw.get("aws:profile") or None,
        cluster_name=cluster_name,
        kubernetes_version=_parse_kubernetes_version(raw),
        network=_parse_network(raw, region),
        system_nodes=_parse_system_nodes(raw),
        gpu_nodes=gpu_nodes,
        job=job,
        delete_bucket_on_destroy=_top(raw, "deleteBucketOnDestroy", _as_bool, False),
        cluster_admin_arns=admins,
        api_public_access_cidrs=cidrs,
        tags=_top(raw, "tags", _as_str_map, {}),
    )
