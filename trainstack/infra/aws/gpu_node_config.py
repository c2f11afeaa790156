"""The AWS stack's GPU node group resolved (trainstack:gpuNodes, EksGpuNodes): its instance types and their GPUs,
its size from the job's, EFA, capacity (spot, on-demand, a reservation or a Capacity Block) and topology-aware
placement. resolve_aws (config.py) calls gpu_nodes_and_job; errors name the stack file's keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES, EfaInstanceType
from trainstack.infra.aws.settings import AwsStackArgs, EksGpuNodes
from trainstack.infra.aws.topology import TOPOLOGY_REGIONS, topology_aware_default
from trainstack.infra.config import NAMESPACE, ConfigError, JobConfig, gpu_nodes_for_job, set_hint
from trainstack.infra.config.job import job_keys_as_written, resolve_job
from trainstack.infra.config.loader import keys_of, or_default
from trainstack.infra.config.reader import check_scaling
from trainstack.infra.core.namespaces import CLUSTER_AUTOSCALER, platform_namespaces

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
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"4xlarge": 1, "48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "p6-b200": {"48xlarge": 8},
}

# NVIDIA families whose GPUs the training image cannot count on: V100s (compute capability 7.0). The
# image's PyTorch CUDA 12.8 line drops sm_70 kernels from 2.11 on (pytorch/pytorch#172598, "Exclude
# Volta from CUDA-12.8 and 12.9 builds"), and NVIDIA's R580 is the last driver branch for Volta, so
# a routine image or AMI bump would leave these nodes unable to run a kernel.
REFUSED_GPU_FAMILIES: Mapping[str, str] = {
    "p3": "NVIDIA V100 GPUs (compute capability 7.0)",
    "p3dn": "NVIDIA V100 GPUs (compute capability 7.0)",
}
# One spot group, several pools (capacity diversification): each has 1 GPU, 4 vCPUs and 16 GiB, so
# the cluster autoscaler's node template (built from the first type) fits every one of them.
DEFAULT_GPU_INSTANCE_TYPES = ("g4dn.xlarge", "g5.xlarge", "g6.xlarge")  # T4, A10G, L4

@dataclass(frozen=True)
class NodeGroupConfig:
    instance_types: tuple[str, ...]
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gb: int


@dataclass(frozen=True)
class EfaConfig:
    """An EFA node group (gpuNodes.efa): one instance type, every EFA interface, one zone (its placement group)."""

    instance: EfaInstanceType
    zone: str  # the cluster placement group and the group's one subnet are in this zone
    # An existing placement group to launch into (a reservation made inside one); None: the stack creates
    # a cluster placement group, unless the group launches into a reservation (see cluster.py).
    placement_group: str | None = None


@dataclass(frozen=True)
class GpuNodeGroupConfig(NodeGroupConfig):
    capacity_type: str  # "SPOT", "ON_DEMAND" or "CAPACITY_BLOCK" (EFA groups only)
    gpus_per_node: int  # of one instance of the group's type (a node)
    ssh_public_key: str | None = None
    ignore_scaling_changes: bool = False  # always true while the cluster autoscaler owns the size
    efa: EfaConfig | None = None
    # An On-Demand Capacity Reservation (ON_DEMAND) or a Capacity Block for ML (CAPACITY_BLOCK) to launch into.
    capacity_reservation_id: str | None = None
    # Kueue places a multi-node job's pods by the nodes' EC2 instance topology labels (EFA groups only).
    topology_aware: bool = False


def _instance_gpus(instance_type: str, key: str) -> int:
    if instance_type != instance_type.strip().lower():
        raise ConfigError(key, f"{instance_type!r}: EC2 instance types are lower case, without spaces",
                          f"use {instance_type.strip().lower()}")
    family, _, size = instance_type.partition(".")
    if family in REFUSED_GPU_FAMILIES:
        raise ConfigError(key, f"{instance_type} has {REFUSED_GPU_FAMILIES[family]}, which the training image's "
                          "CUDA 12.8 PyTorch line no longer builds kernels for",
                          "use a Turing or newer family such as g4dn, g5 or g6")
    sizes = GPU_INSTANCE_FAMILIES.get(family)
    if sizes is None:
        raise ConfigError(key, f"{instance_type} has no NVIDIA GPU (or runs on ARM)",
                          f"use an x86 GPU type such as g4dn.xlarge (families: {', '.join(GPU_INSTANCE_FAMILIES)})")
    if size not in sizes:
        raise ConfigError(key, f"{instance_type} is not a size of the {family} family",
                          f"use one of {', '.join(family + '.' + s for s in sizes)}")
    return sizes[size]


# The keys of trainstack:gpuNodes.
GPU_NODE_KEYS = keys_of(EksGpuNodes)
GPU_KEY = f"{NAMESPACE}:gpuNodes"
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$")


def _efa(gpu: EksGpuNodes, types: tuple[str, ...], zones: tuple[str, ...], existing_network: bool
         ) -> EfaConfig | None:
    """gpuNodes.efa: true -> one EFA instance type from efa.py's table, all its EFAs, one zone."""
    if not gpu.efa:
        for key, value in (("efaInterfaces", gpu.efa_interfaces), ("zone", gpu.zone),
                           ("placementGroup", gpu.placement_group),
                           ("capacityReservationId", gpu.capacity_reservation_id)):
            if value is not None:
                raise ConfigError(f"{GPU_KEY}.{key}", "set, but gpuNodes.efa is not true (it applies to EFA groups only)",
                                  f"pulumi config set --path {GPU_KEY}.efa true, or pulumi config rm --path {GPU_KEY}.{key}")
        return None
    if existing_network:
        raise ConfigError(f"{GPU_KEY}.efa", "not supported with trainstack:existingNetwork yet (the EFA group's one "
                          "subnet is chosen by zone from the subnets the stack creates)",
                          f"pulumi config rm {NAMESPACE}:existingNetwork, or pulumi config rm --path {GPU_KEY}.efa")
    types_key = f"{GPU_KEY}.instanceTypes"
    known = ", ".join(EFA_INSTANCE_TYPES)
    if len(types) != 1:
        raise ConfigError(types_key, f"{len(types)} types: an EFA group launches one instance type (its launch template "
                          "names every EFA interface of that type)", f"list one of {known}")
    instance = EFA_INSTANCE_TYPES.get(types[0])
    if instance is None:
        raise ConfigError(types_key, f"{types[0]} is not an EFA GPU type trainstack knows ({known})",
                          f"pulumi config set --path '{types_key}[0]' p5.48xlarge")
    interfaces = or_default(gpu.efa_interfaces, instance.efa_interfaces)
    if interfaces != instance.efa_interfaces:
        raise ConfigError(f"{GPU_KEY}.efaInterfaces", f"{interfaces}, but {types[0]} has {instance.efa_interfaces} "
                          "network cards, one EFA each (fewer leaves bandwidth unused; more cannot launch)",
                          f"pulumi config rm --path {GPU_KEY}.efaInterfaces")
    zone = or_default(gpu.zone, zones[0] if zones else None)
    if zone is None or (zones and zone not in zones):
        raise ConfigError(f"{GPU_KEY}.zone", f"{zone!r} is not one of {NAMESPACE}:availabilityZones ({', '.join(zones)})"
                          if zone else "not set, and there are no availability zones to take it from",
                          f"pulumi config set --path {GPU_KEY}.zone {zones[0] if zones else '<a zone of the VPC>'}")
    placement_group = gpu.placement_group
    # EC2 CreatePlacementGroup: "Up to 255 ASCII characters".
    if placement_group is not None and not (0 < len(placement_group) <= 255 and placement_group.isascii()
                                            and placement_group.isprintable()):
        raise ConfigError(f"{GPU_KEY}.placementGroup", f"{placement_group!r} is not a placement group name (1 to 255 "
                          "ASCII characters)", f"pulumi config set --path {GPU_KEY}.placementGroup <the group's name>")
    return EfaConfig(instance=instance, zone=zone, placement_group=placement_group)


def _capacity(gpu: EksGpuNodes, efa: EfaConfig | None) -> tuple[str, str | None]:
    """(capacityType, capacityReservationId): SPOT, ON_DEMAND (optionally into a reservation) or CAPACITY_BLOCK."""
    type_key, reservation_key = f"{GPU_KEY}.capacityType", f"{GPU_KEY}.capacityReservationId"
    capacity = or_default(gpu.capacity_type, "SPOT").upper()
    allowed = ("SPOT", "ON_DEMAND", "CAPACITY_BLOCK") if efa else ("SPOT", "ON_DEMAND")
    if capacity not in allowed:
        raise ConfigError(type_key, f"expected {' or '.join(allowed)}, got {capacity!r}"
                          + ("" if efa or capacity != "CAPACITY_BLOCK" else " (Capacity Blocks are for gpuNodes.efa groups)"),
                          set_hint(type_key, "SPOT"))
    reservation = gpu.capacity_reservation_id
    if reservation is not None and not _CAPACITY_RESERVATION_ID.fullmatch(reservation):
        raise ConfigError(reservation_key, f"{reservation!r} is not a capacity reservation ID (cr- and 8 or 17 hex digits)",
                          set_hint(reservation_key, "cr-0123456789abcdef0"))
    if capacity == "CAPACITY_BLOCK" and reservation is None:
        raise ConfigError(reservation_key, "not set: a Capacity Block node group launches into the block's reservation "
                          "(EKS needs its ID in the launch template)",
                          set_hint(reservation_key, "cr-0123456789abcdef0") + " (aws ec2 describe-capacity-reservations "
                          "--filters Name=reservation-type,Values=capacity-block)")
    if capacity == "SPOT" and reservation is not None:
        raise ConfigError(reservation_key, "set with capacityType SPOT: spot instances never launch into a reservation",
                          f"pulumi config set --path {type_key} ON_DEMAND (or CAPACITY_BLOCK), or pulumi config rm "
                          f"--path {reservation_key}")
    return capacity, reservation


def _topology_aware(gpu: EksGpuNodes, efa: EfaConfig | None, region: str, capacity: tuple[str, str | None]) -> bool:
    """gpuNodes.topologyAware: on by default on an EFA group with reserved capacity (topology.py)."""
    key = f"{GPU_KEY}.topologyAware"
    topology_aware = or_default(gpu.topology_aware, topology_aware_default(
        efa=efa is not None, region=region, capacity_type=capacity[0], reservation_id=capacity[1]))
    if topology_aware and efa is None:
        raise ConfigError(key, "true needs an EFA group (gpuNodes.efa): trainstack reads the EC2 instance topology "
                          "labels only on EFA types, and Kueue admits no job onto nodes without them",
                          set_hint(key, "false"))
    if topology_aware and region not in TOPOLOGY_REGIONS:
        raise ConfigError(key, f"true, but EC2 describes no instance topology in {region}, so EKS gives the nodes no "
                          "topology.k8s.aws/network-node-layer labels and Kueue would admit nothing",
                          set_hint(key, "false"))
    return topology_aware


def gpu_nodes_and_job(args: AwsStackArgs, autoscaler: bool, zones: tuple[str, ...] = (),
                       existing_network: bool = False, *, region: str) -> tuple[GpuNodeGroupConfig, JobConfig]:
    """The GPU node group and the job together: unless set, the node count follows the job (or, with the
    cluster autoscaler, the job's pending pods)."""
    gpu_key = GPU_KEY
    gpu = args.gpu_nodes or EksGpuNodes()
    types = tuple(or_default(gpu.instance_types, DEFAULT_GPU_INSTANCE_TYPES))
    gpus_by_type = {t: _instance_gpus(t, f"{gpu_key}.instanceTypes") for t in types}
    if len(set(gpus_by_type.values())) > 1:
        raise ConfigError(f"{gpu_key}.instanceTypes", f"types with different GPU counts cannot share one job: "
                          f"{gpus_by_type}", "list instance types with the same number of GPUs")
    gpus_per_node = next(iter(gpus_by_type.values()))
    job = resolve_job(args.job, gpus_per_node, "GPU instance type", {
        **platform_namespaces(device_plugin=True), CLUSTER_AUTOSCALER: "the cluster autoscaler"})

    pods_per_node = gpus_per_node // job.gpus_per_pod
    instances_to_start, instances_for_job = gpu_nodes_for_job(job, gpus_per_node)
    min_size = or_default(gpu.min, 0)
    max_size = or_default(gpu.max, max(instances_for_job, min_size))
    # No job, no GPU nodes: spot GPUs are the bill, so they scale to zero unless asked otherwise. With the
    # autoscaler the job's pending pods grow the group; without it, `pulumi up` sets the size.
    follows_job = instances_for_job if job.enabled and not autoscaler else 0
    desired = or_default(gpu.desired, max(min_size, follows_job))
    check_scaling(gpu_key, min_size, max_size, desired)
    if instances_for_job > max_size:
        with job_keys_as_written(args.job):
            raise ConfigError(f"{NAMESPACE}:job.podsMax", f"{job.pods_max} pods need {instances_for_job} GPU nodes "
                              f"({pods_per_node} per {types[0]}), but {gpu_key}.max is {max_size}",
                              f"raise {gpu_key}.max to {instances_for_job} or lower {NAMESPACE}:job.podsMax")
    ignore_scaling = or_default(gpu.ignore_scaling_changes, autoscaler)
    if autoscaler and not ignore_scaling:
        raise ConfigError(f"{gpu_key}.ignoreScalingChanges", "false while the cluster autoscaler owns the GPU "
                          "group: every `pulumi up` would reset the size the autoscaler set",
                          f"pulumi config rm --path {gpu_key}.ignoreScalingChanges, or set "
                          f"{NAMESPACE}:clusterAutoscaler false")
    if job.enabled and not ignore_scaling and desired < instances_to_start:
        raise ConfigError(f"{gpu_key}.desired", f"the job needs {instances_to_start} GPU nodes to start, "
                          f"desired is {desired}", set_hint(f"{gpu_key}.desired", str(instances_to_start)))
    efa = _efa(gpu, types, zones, existing_network)
    capacity, reservation = _capacity(gpu, efa)
    topology_aware = _topology_aware(gpu, efa, region, (capacity, reservation))
    ssh_key = gpu.ssh_public_key
    if ssh_key is not None and not re.match(r"^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+", ssh_key):
        raise ConfigError(f"{gpu_key}.sshPublicKey", "expected an OpenSSH public key (ssh-ed25519 AAAA...)",
                          f"pulumi config set --path '{gpu_key}.sshPublicKey' \"$(cat ~/.ssh/id_ed25519.pub)\"")
    gpu_nodes = GpuNodeGroupConfig(
        instance_types=types,
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gb=or_default(gpu.disk_size_gb, 100),
        capacity_type=capacity,
        gpus_per_node=gpus_per_node,
        ssh_public_key=ssh_key,
        ignore_scaling_changes=ignore_scaling,
        efa=efa,
        capacity_reservation_id=reservation,
        topology_aware=topology_aware,
    )
    return gpu_nodes, job
