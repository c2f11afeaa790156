"""The AWS stack's configuration resolved: the typed settings (settings.py), loaded from a stack file or given to
a component, with defaults applied and the rules between them checked once, before anything is registered.

Bad config stops the program before any resource is registered, with one line that names the key and
the fix (ConfigError is a pulumi.RunError, which the Pulumi runtime prints as a single error line
without a traceback).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import shlex
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES, EfaInstanceType
from trainstack.infra.aws.limits import (
    AWS_REGIONS,
    EKS_NODE_TAGS,
    MAX_PUBLIC_ACCESS_CIDRS,
    MAX_TAG_KEY,
    MAX_TAG_VALUE,
    MAX_TAGS,
    OTHER_PARTITIONS,
    TAG_SYMBOLS,
    TAG_UNICODE_CATEGORIES,
    VPC_LARGEST_PREFIX,
)
from trainstack.infra.aws.settings import AwsStackArgs, EksGpuNodes, EksSystemNodes
from trainstack.infra.aws.topology import TOPOLOGY_REGIONS, topology_aware_default
from trainstack.infra.config import NAMESPACE, ConfigError, JobConfig, gpu_nodes_for_job, raw_config, set_hint
from trainstack.infra.config.job import job_keys_as_written, resolve_job
from trainstack.infra.config.loader import keys_of, load_stack, or_default
from trainstack.infra.config.reader import (
    PRIVATE_BLOCKS_TEXT,
    RFC1918_BLOCKS,
    check_scaling,
    ipv4_block,
    is_private_block,
    unroutable_reason,
)
from trainstack.infra.core import versions
from trainstack.infra.core.namespaces import CLUSTER_AUTOSCALER, platform_namespaces
from trainstack.infra.cost.budget import Budget

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

# Control-plane log types EKS can send to CloudWatch Logs (EKS API: LogSetup.types).
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
DEFAULT_CONTROL_PLANE_LOGS = ("audit", "authenticator")  # who did what, and who signed in

# The seed's zones; other regions must list theirs (zone letters differ from region to region).
DEFAULT_ZONES: Mapping[str, tuple[str, ...]] = {
    "us-west-2": ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"),
}

# trainstack builds its AWS provider explicitly from these; any other aws:* key would be ignored.
AWS_PROVIDER_KEYS = ("region", "profile")
PROVIDER_FIELDS = {name: f"aws:{name}" for name in AWS_PROVIDER_KEYS}

_IAM_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):(?P<kind>role|user)/(?P<path>[\w+=,.@/-]+)$")
# Addresses the public endpoint never sees (they reach it only through the private one).
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC the stack uses instead of creating one (its CIDR is looked up, never copied by hand)."""

    vpc_id: pulumi.Input[str]  # a component's caller may pass its own resources' IDs (outputs), which EKS checks
    public_subnet_ids: tuple[pulumi.Input[str], ...]
    private_subnet_ids: tuple[pulumi.Input[str], ...]
    # How an error names the private subnets: the stack file's key, or the part's input.
    subnets_key: str = "trainstack:existingNetwork.privateSubnetIds"


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


@dataclass(frozen=True)
class ApiEndpointConfig:
    """Who reaches the Kubernetes API: a public endpoint limited to CIDR blocks, or a private one only."""

    private: bool  # True: reachable from inside the VPC only (VPN, peering, a runner in the VPC)
    public_access_cidrs: tuple[str, ...]  # empty when private


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
    # The shared filesystem holds the runs: `pulumi destroy` refuses while this is on (Pulumi's protect).
    protect_shared_filesystem: bool
    cluster_admin_arns: tuple[str, ...]
    api_endpoint: ApiEndpointConfig
    tags: Mapping[str, str]
    budget: Budget = Budget()  # trainstack:maxHourlyUsd / maxRunUsd
    preview_role_arn: str | None = None  # read-only access entry for PR previews
    cluster_autoscaler: bool = True  # cluster-autoscaler owns the GPU group's size (scale from and to 0)
    control_plane_logs: tuple[str, ...] = DEFAULT_CONTROL_PLANE_LOGS


# --- the sections -----------------------------------------------------------------------------------

# What a stack file may set under trainstack: (the model's fields, aws:region and aws:profile aside).
TOP_LEVEL_KEYS = ("cloud", *(key for key in keys_of(AwsStackArgs) if key not in AWS_PROVIDER_KEYS))


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


def _network(args: AwsStackArgs, region: str) -> NetworkConfig:
    """The VPC the stack creates, or the one given: IDs that are other resources' outputs go through as they are
    (EKS and EFS check them); plain IDs are checked here."""
    zones_key = f"{NAMESPACE}:availabilityZones"
    zones = tuple(or_default(args.availability_zones, DEFAULT_ZONES.get(region, ())))
    existing = None
    existing_key = f"{NAMESPACE}:existingNetwork"
    if args.existing_network is not None:
        given = args.existing_network
        vpc_id = given.vpc_id
        if vpc_id is None or (isinstance(vpc_id, str) and not vpc_id.startswith("vpc-")):
            raise ConfigError(f"{existing_key}.vpcId", f"expected a VPC ID like vpc-0123abcd, got {vpc_id!r}",
                              set_hint(f"{existing_key}.vpcId", "vpc-0123abcd"))
        private = tuple(given.private_subnet_ids or ())
        public = tuple(given.public_subnet_ids or ())
        if not private:
            raise ConfigError(f"{existing_key}.privateSubnetIds", "no private subnets given (nodes and EFS mount "
                              "targets live there)", set_hint(f"{existing_key}.privateSubnetIds[0]", "subnet-..."))
        for subnet_key, subnets in (("privateSubnetIds", private), ("publicSubnetIds", public)):
            for subnet in subnets:
                if isinstance(subnet, str) and not subnet.startswith("subnet-"):
                    raise ConfigError(f"{existing_key}.{subnet_key}", f"{subnet!r} is not a subnet ID",
                                      "use IDs like subnet-0123abcd")
        existing = ExistingNetwork(vpc_id=vpc_id, public_subnet_ids=public, private_subnet_ids=private)
    elif not zones:
        raise ConfigError(zones_key, f"no availability zones for region {region}",
                          f"pulumi config set --path '{zones_key}[0]' {region}a (list two or more zones)")
    if existing is None and len(zones) < 2:
        raise ConfigError(zones_key, f"{len(zones)} zone: EKS needs subnets in at least two zones for its control "
                          "plane", f"list a second zone, e.g. pulumi config set --path '{zones_key}[1]' {region}b")
    if len(zones) > 8:
        raise ConfigError(zones_key, f"{len(zones)} zones: the VPC layout has room for 8", "list at most 8 zones")
    for zone in zones:
        if zone != zone.strip().lower():
            raise ConfigError(zones_key, f"{zone!r}: zone names are lower case, without spaces",
                              f"use {zone.strip().lower()}")
        if not (zone.startswith(region) and re.fullmatch(r"[a-z]", zone[len(region):])):
            raise ConfigError(zones_key, f"{zone!r} is not a zone of region {region}",
                              f"use zones like {region}a, {region}b")
    cidr_key = f"{NAMESPACE}:vpcCidr"
    cidr = or_default(args.vpc_cidr, "10.0.0.0/16")
    network = ipv4_block(cidr, cidr_key, set_hint(cidr_key, "10.0.0.0/16"))
    # Two subnets per zone, each a /20 or larger when the VPC is a /16: see network.py.
    # RFC 1918 and 100.64.0.0/10, or another private range (198.18.0.0/15, ...) a stack may already use; never
    # a block no VPC can hold (loopback, link-local, 0.0.0.0/8, multicast, 240.0.0.0/4), which Python's
    # is_private lets through (AWS VPC user guide, vpc-cidr-blocks.html).
    unroutable = unroutable_reason(str(network), allow_shared=True)
    if unroutable is not None:
        raise ConfigError(cidr_key, f"{cidr} is in the {unroutable} block, which no VPC can use",
                          set_hint(cidr_key, "10.0.0.0/16") + " (a new stack; an existing VPC cannot be renumbered "
                          "in place)")
    if network.prefixlen > 20 or not (is_private_block(network) or network.is_private):
        raise ConfigError(cidr_key, f"{cidr} must be a private block ({PRIVATE_BLOCKS_TEXT}) of size /20 or larger",
                          set_hint(cidr_key, "10.0.0.0/16"))
    if network.prefixlen < VPC_LARGEST_PREFIX:
        raise ConfigError(cidr_key, f"{cidr} is larger than a VPC may be (AWS allows /{VPC_LARGEST_PREFIX} to /28)",
                          set_hint(cidr_key, f"{network.network_address}/{VPC_LARGEST_PREFIX}"))
    return NetworkConfig(availability_zones=zones, vpc_cidr=str(network),
                         nat_gateway_per_zone=or_default(args.nat_gateway_per_zone, False), existing=existing)


# Graviton (Arm) families: the system nodes boot the x86_64 AL2023 AMI, which cannot run on them.
_ARM_FAMILY = re.compile(r"^(a1|[a-z]+\d+g[a-z]*)$")
_INSTANCE_TYPE = re.compile(r"^([a-z][a-z0-9-]*)\.(nano|micro|small|medium|large|metal|\d*xlarge|metal-\d+xl)$")


def _system_instance_type(nodes: EksSystemNodes) -> str:
    key = f"{NAMESPACE}:systemNodes.instanceType"
    value = or_default(nodes.instance_type, "t3.medium")
    match = _INSTANCE_TYPE.fullmatch(value)
    if match is None:
        raise ConfigError(key, f"{value!r} is not an EC2 instance type (family.size, e.g. t3.medium)",
                          set_hint(key, "t3.medium"))
    if _ARM_FAMILY.fullmatch(match.group(1)):
        raise ConfigError(key, f"{value} is an Arm (Graviton) type; the system nodes run the x86_64 AMI",
                          set_hint(key, "t3.medium"))
    return value


# Tags trainstack puts on resources itself, with the user's: they count toward AWS's 50.
TRAINSTACK_TAGS = ("app", "pulumi-stack", "Name")


def _check_tag_characters(key: str, name: str, value: str) -> None:
    """Each character of the tag's key and value in AWS's tag set; the error shows the bad ones as repr (a NUL
    as '\\x00'), so the line stays one line, and suggests the text with each replaced by -."""
    for part, text in (("key", name), ("value", value)):
        bad = [c for c in text if c not in TAG_SYMBOLS and unicodedata.category(c)[0] not in TAG_UNICODE_CATEGORIES]
        if not bad:
            continue
        shown = ", ".join(repr(c) for c in dict.fromkeys(bad))
        cleaned = "".join("-" if c in bad else c for c in text)
        problem = (f"the tag {part} {text!r} has {shown}: AWS tags (IAM, EFS) take only letters, digits, spaces "
                   "and _ . : / = + - @")
        if part == "key":  # the key itself cannot go into the error's key or a command line
            raise ConfigError(key, problem, f"rename the tag in {key} without {shown}, e.g. {cleaned!r}")
        raise ConfigError(f"{key}.{name}", problem, set_hint(f"{key}.{name}", shlex.quote(cleaned)))


def check_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    """trainstack:tags (loaded): AWS's tag rules, and room for the tags trainstack adds."""
    key = f"{NAMESPACE}:tags"
    tags = dict(tags or {})
    for name in tags:
        if not name:  # IAM's and EFS's tag keys hold at least one character
            raise ConfigError(key, f"a tag with an empty key (value {tags[name]!r})", f"give that tag a key in {key}")
        _check_tag_characters(key, name, tags[name])
        if name.lower().startswith("aws:") or name.startswith("kubernetes.io/") or name.startswith("k8s.io/"):
            raise ConfigError(f"{key}.{name}", "is in a reserved namespace (aws:, kubernetes.io/, k8s.io/ belong to "
                              "AWS, EKS and the cluster autoscaler)", f"pulumi config rm --path '{key}.{name}'")
        if name in TRAINSTACK_TAGS:
            raise ConfigError(f"{key}.{name}", "is set by trainstack on every resource (cost reports and the orphan "
                              "audit rely on it)", f"pulumi config rm --path '{key}.{name}'")
        if len(name) > MAX_TAG_KEY or len(tags[name]) > MAX_TAG_VALUE:
            raise ConfigError(f"{key}.{name}", f"AWS tag keys hold at most {MAX_TAG_KEY} characters and values "
                              f"{MAX_TAG_VALUE} (this key has {len(name)}, its value {len(tags[name])})",
                              f"shorten {key}.{name}")
    added = (*TRAINSTACK_TAGS, *EKS_NODE_TAGS)
    room = MAX_TAGS - len(added)
    if len(tags) > room:
        raise ConfigError(key, f"{len(tags)} tags: AWS allows {MAX_TAGS} per resource, and a GPU node carries "
                          f"{len(added)} more ({', '.join(added)})", f"keep at most {room} in {key}")
    return tags


def _system_nodes(nodes: EksSystemNodes | None) -> NodeGroupConfig:
    key = f"{NAMESPACE}:systemNodes"
    nodes = nodes or EksSystemNodes()
    min_size = or_default(nodes.min, 1)
    desired = or_default(nodes.desired, 1)
    max_size = or_default(nodes.max, 2)
    check_scaling(key, min_size, max_size, desired)
    return NodeGroupConfig(
        instance_types=(_system_instance_type(nodes),),
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gb=or_default(nodes.disk_size_gb, 20),
    )


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


def _gpu_nodes_and_job(args: AwsStackArgs, autoscaler: bool, zones: tuple[str, ...] = (),
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


def access_entry_key(arn: str) -> str:
    """A stable name for an access entry of `arn`: reordering the list never replaces an entry."""
    match = _IAM_ARN.fullmatch(arn)
    assert match is not None, arn  # checked by _access
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{match['account']}-{match['kind']}-{match['path']}")


def _access(args: AwsStackArgs) -> tuple[tuple[str, ...], str | None]:
    """(cluster admin ARNs, the preview role's ARN): IAM roles or users, each given one access entry."""
    admins_key = f"{NAMESPACE}:clusterAdmins"
    admins = tuple(or_default(args.cluster_admins, ()))
    preview_key = f"{NAMESPACE}:previewRoleArn"
    preview_role = args.preview_role_arn
    for key, arns in ((admins_key, admins), (preview_key, (preview_role,) if preview_role else ())):
        for arn in arns:
            if not _IAM_ARN.fullmatch(arn):
                raise ConfigError(key, f"{arn!r} is not an IAM role or user ARN",
                                  "use ARNs like arn:aws:iam::123456789012:role/Admin")
    principals = [(admins_key, arn) for arn in admins] + ([(preview_key, preview_role)] if preview_role else [])
    seen: dict[str, str] = {}
    for key, arn in principals:
        name = access_entry_key(arn)
        if name in seen:
            problem = (f"{arn} is listed twice" if seen[name] == arn
                       else f"{arn} and {seen[name]} map to the same access entry name")
            raise ConfigError(key, problem, "give each IAM principal one access entry: remove one of them")
        seen[name] = arn
    return admins, preview_role


def _api_endpoint(args: AwsStackArgs) -> ApiEndpointConfig:
    """Private, or public for an explicit allow-list: there is no default that opens the API to everyone."""
    endpoint_key = f"{NAMESPACE}:apiEndpoint"
    endpoint = or_default(args.api_endpoint, "public")
    cidrs_key = f"{NAMESPACE}:apiPublicAccessCidrs"
    if endpoint == "private":
        if args.api_public_access_cidrs is not None:
            raise ConfigError(cidrs_key, "set, but trainstack:apiEndpoint is private (no public endpoint to limit)",
                              f"pulumi config rm {cidrs_key}, or pulumi config set {endpoint_key} public")
        return ApiEndpointConfig(private=True, public_access_cidrs=())
    if args.api_public_access_cidrs is None:
        raise ConfigError(cidrs_key, "not set: the public Kubernetes API endpoint would accept any address",
                          f"pulumi config set --path '{cidrs_key}[0]' \"$(curl -s https://checkip.amazonaws.com)/32\" "
                          f"(list 0.0.0.0/0 to accept any address, or set {endpoint_key} private)")
    cidrs = tuple(args.api_public_access_cidrs)
    if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        raise ConfigError(cidrs_key, f"{len(cidrs)} blocks: EKS accepts at most {MAX_PUBLIC_ACCESS_CIDRS} public "
                          "access CIDR ranges per cluster", f"merge blocks until at most {MAX_PUBLIC_ACCESS_CIDRS} remain")
    for cidr in cidrs:
        network = ipaddress.IPv4Network(cidr)
        unroutable = unroutable_reason(cidr)
        if unroutable is not None:
            raise ConfigError(cidrs_key, f"{cidr} is in the {unroutable} block: no client reaches the public "
                              "endpoint from there", "list public addresses, e.g. 203.0.113.7/32")
        if any(network.subnet_of(block) for block in RFC1918_BLOCKS):
            raise ConfigError(cidrs_key, f"{cidr} is a private block: the public endpoint never sees those addresses "
                              "(from inside the VPC the private endpoint answers)",
                              "list public addresses, e.g. 203.0.113.7/32")
    return ApiEndpointConfig(private=False, public_access_cidrs=cidrs)


def _control_plane_logs(args: AwsStackArgs) -> tuple[str, ...]:
    key = f"{NAMESPACE}:controlPlaneLogs"
    logs = tuple(or_default(args.control_plane_logs, DEFAULT_CONTROL_PLANE_LOGS))
    for log in logs:
        if log not in CONTROL_PLANE_LOG_TYPES:
            raise ConfigError(key, f"{log!r} is not an EKS control-plane log type",
                              f"use some of {', '.join(CONTROL_PLANE_LOG_TYPES)}")
    return logs


def _kubernetes_version(args: AwsStackArgs) -> str:
    key = f"{NAMESPACE}:kubernetesVersion"
    version = or_default(args.kubernetes_version, versions.EKS_KUBERNETES_VERSION)
    if version not in versions.EKS_SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(versions.EKS_SUPPORTED_KUBERNETES_VERSIONS)
        raise ConfigError(key, f"Kubernetes {version} is not one trainstack supports ({supported})",
                          set_hint(key, versions.EKS_KUBERNETES_VERSION))
    return version


def check_region(region: str | None) -> str:
    """aws:region: set, a Region of the aws partition that trainstack knows."""
    if not region:
        raise ConfigError("aws:region", "not set", "pulumi config set aws:region us-west-2")
    partition = next((p for prefix, p in OTHER_PARTITIONS.items() if region.startswith(prefix)), None)
    if partition is not None:
        raise ConfigError("aws:region", f"{region} is in the {partition} partition, and trainstack builds ARNs of the "
                          "aws partition only (arn:aws:...)", "pulumi config set aws:region <a Region of the aws "
                          "partition, e.g. us-west-2>")
    if region not in AWS_REGIONS:
        close = difflib.get_close_matches(region, sorted(AWS_REGIONS), n=1)
        raise ConfigError("aws:region", f"{region!r} is not an AWS Region" + (f" (did you mean {close[0]}?)"
                          if close else ""), f"pulumi config set aws:region {close[0] if close else 'us-west-2'} "
                          "(aws ec2 describe-regions lists them; a Region newer than trainstack/infra/aws/limits.py goes there)")
    return region


def parse_aws_config(raw: Mapping[str, str] | None = None, stack: str | None = None) -> AwsStackConfig:
    """All of a stack file's AWS config (`raw`: every key as the CLI hands it), loaded and resolved; raises
    ConfigError on the first bad key."""
    raw = raw_config() if raw is None else raw
    return resolve_aws(load_stack(AwsStackArgs, raw, "aws", PROVIDER_FIELDS,
                                  " and set the matching AWS_* environment variable instead"), stack)


def resolve_aws(args: AwsStackArgs, stack: str | None = None) -> AwsStackConfig:
    """The AWS stack's settings (loaded: trainstack/infra/config/loader.py) with every default applied and the rules
    between them checked, in a stack file's terms. IDs that are other resources' outputs (an existing network's)
    pass through; EKS and EFS check them."""
    stack = pulumi.get_stack() if stack is None else stack
    region = check_region(args.region)

    name_key = f"{NAMESPACE}:clusterName"
    cluster_name = or_default(args.cluster_name, f"{NAMESPACE}-{stack}")
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ConfigError(name_key, f"{cluster_name!r} is not a valid EKS cluster name (letters, digits, - and _, "
                          "at most 100)", set_hint(name_key, f"{NAMESPACE}-{stack}"))

    autoscaler = or_default(args.cluster_autoscaler, True)
    network = _network(args, region)
    gpu_nodes, job = _gpu_nodes_and_job(args, autoscaler, network.availability_zones, network.existing is not None,
                                        region=region)
    admins, preview_role = _access(args)
    return AwsStackConfig(
        region=region,
        aws_profile=args.profile or None,
        cluster_name=cluster_name,
        kubernetes_version=_kubernetes_version(args),
        network=network,
        system_nodes=_system_nodes(args.system_nodes),
        gpu_nodes=gpu_nodes,
        job=job,
        delete_bucket_on_destroy=or_default(args.delete_bucket_on_destroy, False),
        protect_shared_filesystem=or_default(args.protect_shared_filesystem, True),
        cluster_admin_arns=admins,
        api_endpoint=_api_endpoint(args),
        tags=check_tags(args.tags),
        budget=Budget(max_hourly_usd=args.max_hourly_usd, max_run_usd=args.max_run_usd),
        preview_role_arn=preview_role,
        cluster_autoscaler=autoscaler,
        control_plane_logs=_control_plane_logs(args),
    )
