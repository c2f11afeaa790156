"""The GCP stack's configuration: its settings (trainstack/infra/gcp/settings.py, loaded from a stack file or
given to a component) resolved, every default applied and every rule between them checked at program start.

Bad config stops the program before any resource is registered, with one line that names the key and
the fix. What only the account can answer (is the zone in the region, is the GKE version offered)
is asked of the GCP API during `pulumi preview` (see cluster.py).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from trainstack.infra.config import NAMESPACE, ConfigError, JobConfig, gpu_nodes_for_job, raw_config, set_hint
from trainstack.infra.config.job import resolve_job
from trainstack.infra.config.loader import camel_case, keys_of, load_stack
from trainstack.infra.config.reader import (
    PRIVATE_BLOCKS_TEXT,
    check_scaling,
    ipv4_block,
    is_private_block,
    unroutable_reason,
)
from trainstack.infra.core import versions
from trainstack.infra.core.namespaces import platform_namespaces
from trainstack.infra.cost.budget import Budget
from trainstack.infra.gcp.gpu_network_ranges import check_gpu_network_ranges
from trainstack.infra.gcp.limits import (
    GCP_REGIONS,
    GOOGLE_NODE_LABELS,
    MAX_AUTHORIZED_NETWORKS,
    MAX_LABELS,
    RESERVATION,
    STEPPED_TIERS,
    capacity_fits,
    nearest_capacity,
)
from trainstack.infra.gcp.machine_types import (
    BUNDLED_LOCAL_SSDS,
    FIXED_GPU_MACHINES,
    GPU_DIRECT,
    N1_ACCELERATORS,
    UNSUPPORTED_BY_IMAGE,
    GpuDirectProfile,
    n1_vcpus,
)
from trainstack.infra.gcp.pool_capacity import (
    check_queued_pools_have_kueue,
    check_queued_provisioning_pool,
    pool_topology_aware,
)
from trainstack.infra.gcp.settings import (
    FILESTORE_TIERS,
    PROVIDER_FIELDS,
    Filestore,
    GcpStackArgs,
    GkeGpuPool,
    GkeNetwork,
    GkeSystemNodes,
)

# trainstack builds its Google provider explicitly from these; any other gcp:* key would be ignored.
GCP_PROVIDER_KEYS = tuple(full_key.split(":", 1)[1] for full_key in PROVIDER_FIELDS.values())
DEFAULT_REGION = "us-central1"
# The seed's T4 pools need a zone that has T4s; other regions must name theirs.
DEFAULT_ZONES: Mapping[str, str] = {"us-central1": "us-central1-a"}

# What a stack file may set under trainstack: (the model's fields, gcp:project and gcp:region aside).
TOP_LEVEL_KEYS = ("cloud", *(key for key in keys_of(GcpStackArgs) if key not in GCP_PROVIDER_KEYS))
GPU_POOL_KEYS = keys_of(GkeGpuPool)
# Machine series that boot only from Hyperdisk: cluster-toolkit v1.95.0 sets disk_type hyperdisk-balanced
# in every A4 and A3 Ultra VM blueprint (examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml,
# a3-ultragpu-8g/a3ultra-vm.yaml).
HYPERDISK_ONLY_SERIES = ("a4-", "a3-ultragpu-")
# The CUDA training image (about 10 GB unpacked) and the node's own images fit with room to spare.
MIN_GPU_DISK_GB = 50
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_VERSION_PREFIX = re.compile(r"^1\.\d{2}$")
# Arm machine series: the x86 COS node image does not boot on them.
ARM_SERIES = ("t2a", "c4a", "n4a")


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC and subnet the stack uses instead of creating them; the subnet must have both ranges."""

    network: pulumi.Input[str]  # a component's caller may pass its own resources' names (outputs)
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str


@dataclass(frozen=True)
class NetworkConfig:
    subnet_cidr: str
    pods_cidr: str
    services_cidr: str
    master_cidr: str  # the control plane's private endpoint range (private nodes)
    existing: ExistingNetwork | None = None


@dataclass(frozen=True)
class SystemPoolConfig:
    machine_type: str
    min_nodes: int
    max_nodes: int
    disk_size_gb: int


@dataclass(frozen=True)
class GpuPoolConfig:
    name: str
    machine_type: str
    accelerator_type: str
    # The config key is acceleratorCount (Google's word: node_config.guest_accelerator.count); the neutral
    # layer (GpuPlacement, cost, the job's pods per node) reads it as the node's GPU count.
    gpus_per_node: int
    attach_accelerator: bool  # N1: the accelerator is attached; A2/A3/G2: it comes with the machine
    disk_size_gb: int
    disk_type: str
    min_nodes: int
    max_nodes: int
    capacity: str  # one of CAPACITY_TYPES
    reservation: str | None  # the reservation's name, with capacity RESERVATION
    compact_placement: bool  # nodes close together in the zone's network (multi-node NCCL)
    local_ssd_count: int  # local NVMe SSDs as the node's ephemeral storage (the data cache)
    gpu_direct: GpuDirectProfile | None  # TCPX / TCPXO networking on A3, RDMA on A3 Ultra and A4
    driver_version: str  # GKE-managed driver: DEFAULT or LATEST
    # Kueue places a multi-node job's pods by GKE's gce-topology node labels (pool_capacity.py: default on RDMA
    # pools on a reservation).
    topology_aware: bool = False

    @property
    def spot(self) -> bool:
        return self.capacity == "SPOT"


@dataclass(frozen=True)
class FilestoreConfig:
    tier: str
    capacity_gb: int


@dataclass(frozen=True)
class GcpStackConfig:
    project: str
    region: str
    zone: str
    regional: bool  # control plane replicated across the region's zones; the nodes stay in `zone`
    cluster_name: str
    release_channel: str
    kubernetes_version: str  # the minimum minor version, e.g. "1.34"; the newest patch GKE offers is used
    network: NetworkConfig
    api_authorized_networks: tuple[str, ...]  # empty: the endpoint is open (still authenticated by IAM)
    system_pool: SystemPoolConfig
    gpu_pools: tuple[GpuPoolConfig, ...]
    job_pool: GpuPoolConfig
    job: JobConfig
    filestore: FilestoreConfig | None  # None: no shared filesystem
    delete_bucket_on_destroy: bool
    # The shared filesystem holds the runs: `pulumi destroy` refuses while this is on (Pulumi's protect).
    protect_shared_filesystem: bool
    labels: Mapping[str, str]
    budget: Budget = Budget()  # trainstack:maxHourlyUsd / maxRunUsd

    @property
    def location(self) -> str:
        return self.region if self.regional else self.zone


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _gpu_pool(name: str, pool: GkeGpuPool) -> GpuPoolConfig:
    """trainstack:gpuPools.<name> (its name and each field checked by the loader: settings.read_gpu_pools)."""
    key = f"{NAMESPACE}:gpuPools.{name}"
    machine_type = _given(pool.machine_type, "n1-standard-4")
    fixed = FIXED_GPU_MACHINES.get(machine_type)
    vcpus = n1_vcpus(machine_type)
    if fixed is not None:
        accelerator = _given(pool.accelerator_type, fixed.accelerator)
        count = _given(pool.accelerator_count, fixed.count)
        if accelerator != fixed.accelerator or count != fixed.count:
            raise ConfigError(f"{key}.acceleratorCount" if accelerator == fixed.accelerator else
                              f"{key}.acceleratorType",
                              f"{machine_type} comes with {fixed.count} x {fixed.accelerator}, not {count} x "
                              f"{accelerator}", f"remove {key}.acceleratorType and .acceleratorCount, or pick the "
                              "machine type of the size you want")
    elif vcpus is not None:
        accelerator = _given(pool.accelerator_type, "nvidia-tesla-t4")
        counts = N1_ACCELERATORS.get(accelerator)
        if counts is None:
            raise ConfigError(f"{key}.acceleratorType", f"{accelerator} cannot be attached to {machine_type} "
                              f"(N1 machines take {', '.join(N1_ACCELERATORS)}; A100, H100, L4 come with A2, A3, G2 "
                              "machine types)", set_hint(f"{key}.acceleratorType", "nvidia-tesla-t4"))
        count = _given(pool.accelerator_count, 1)
        if count not in counts:
            raise ConfigError(f"{key}.acceleratorCount", f"{count} x {accelerator} is not a count GCP offers (it "
                              f"offers {', '.join(map(str, counts))})", set_hint(f"{key}.acceleratorCount", "1"))
        if vcpus > counts[count]:
            raise ConfigError(f"{key}.machineType", f"{machine_type} has {vcpus} vCPUs; with {count} x {accelerator} "
                              f"an N1 machine may have at most {counts[count]}",
                              f"use a smaller N1 machine type or more GPUs ({key}.acceleratorCount)")
    else:
        raise ConfigError(f"{key}.machineType", f"{machine_type} takes no GPUs (GPUs attach to N1 machines; A2, A3, "
                          "A4 and G2 machines come with them)", set_hint(f"{key}.machineType", "n1-standard-4"))
    if accelerator in UNSUPPORTED_BY_IMAGE:
        raise ConfigError(f"{key}.acceleratorType", f"{accelerator} is a {UNSUPPORTED_BY_IMAGE[accelerator]} GPU; the "
                          "training image's PyTorch (CUDA 12.8) has no kernels for it",
                          set_hint(f"{key}.acceleratorType", "nvidia-tesla-t4"))
    disk = _given(pool.disk_size_gb, 100)
    if disk < MIN_GPU_DISK_GB:
        raise ConfigError(f"{key}.diskSizeGb", f"{disk} GB cannot hold the CUDA training image (about 10 GB) and the "
                          f"node's images; GPU nodes need at least {MIN_GPU_DISK_GB} GB",
                          set_hint(f"{key}.diskSizeGb", "100"))
    min_nodes = _given(pool.min, 0)
    max_nodes = _given(pool.max, max(min_nodes, 2))
    check_scaling(key, min_nodes, max_nodes)
    gpu_direct = _gpu_direct(pool, key, machine_type)
    capacity = _given(pool.capacity, "SPOT")
    reservation = pool.reservation
    if (capacity == "RESERVATION") != (reservation is not None):
        raise ConfigError(f"{key}.reservation", "a reservation name goes with capacity RESERVATION, and only with it",
                          f"set both {key}.capacity RESERVATION and {key}.reservation <name>, or neither")
    if reservation is not None and not RESERVATION.fullmatch(reservation):
        raise ConfigError(f"{key}.reservation", f"{reservation!r} is not a reservation name (lowercase letters, digits "
                          "and -, starting with a letter, at most 63; projects/<project>/reservations/<name> for a "
                          "shared one; <name>/reservationBlocks/<block> for one block)",
                          f"{set_hint(f'{key}.reservation', '<name>')} (gcloud compute reservations list)")
    check_queued_provisioning_pool(key, capacity, min_nodes)
    placement = _given(pool.placement, "COMPACT" if gpu_direct else "ANY")
    if placement == "COMPACT" and capacity == "RESERVATION":
        # GKE refuses a compact placement policy on a pool that consumes a specific reservation: the
        # reservation already fixes where the VMs are.
        raise ConfigError(f"{key}.placement", "COMPACT cannot be combined with a specific reservation (the "
                          "reservation decides placement)", set_hint(f"{key}.placement", "ANY"))
    if placement == "COMPACT" and capacity == "FLEX_START":
        raise ConfigError(f"{key}.placement", f"COMPACT is not offered with FLEX_START on {machine_type}",
                          set_hint(f"{key}.placement", "ANY"))
    hyperdisk_only = machine_type.startswith(HYPERDISK_ONLY_SERIES)
    disk_type = _given(pool.disk_type, "hyperdisk-balanced" if hyperdisk_only else "pd-ssd")
    if hyperdisk_only and disk_type.startswith("pd-"):
        raise ConfigError(f"{key}.diskType", f"{machine_type} boots only from Hyperdisk, not {disk_type}",
                          set_hint(f"{key}.diskType", "hyperdisk-balanced"))
    topology_requested = pool.topology_aware
    if topology_requested and gpu_direct is None:
        raise ConfigError(f"{key}.topologyAware", f"true needs a GPUDirect pool: GKE gives {machine_type} nodes "
                          "without GPUDirect no gce-topology labels, so Kueue would admit nothing",
                          set_hint(f"{key}.topologyAware", "false"))
    # On by default only on RDMA machines on a reservation (pool_capacity.py); opt-in elsewhere.
    topology_aware = pool_topology_aware(key, topology_requested, capacity, gpu_direct)
    return GpuPoolConfig(
        name=name,
        machine_type=machine_type,
        accelerator_type=accelerator,
        gpus_per_node=count,
        attach_accelerator=fixed is None,
        disk_size_gb=disk,
        disk_type=disk_type,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        capacity=capacity,
        reservation=reservation,
        compact_placement=placement == "COMPACT",
        local_ssd_count=_local_ssd_count(pool, key, machine_type, gpu_direct),
        gpu_direct=gpu_direct,
        driver_version=_given(pool.driver_version, "DEFAULT"),
        topology_aware=topology_aware,
    )


def _gpu_direct(pool: GkeGpuPool, pool_key: str, machine_type: str) -> GpuDirectProfile | None:
    """`auto` picks the machine type's GPUDirect networking; naming one it does not have is an error."""
    key = f"{pool_key}.gpuDirect"
    mode = _given(pool.gpu_direct, "auto")
    profile = GPU_DIRECT.get(machine_type)
    if mode == "auto":
        return profile
    if mode == "none":
        return None
    if profile is None or profile.mode != mode:
        offered = f"{machine_type} has {profile.mode}" if profile else f"{machine_type} has no GPUDirect NICs"
        machines = ", ".join(f"{m} ({p.mode})" for m, p in GPU_DIRECT.items())
        raise ConfigError(key, f"{mode} is not available: {offered} (GPUDirect machines: {machines})",
                          set_hint(key, "auto"))
    return profile


def _gpu_pools_and_job(args: GcpStackArgs) -> tuple[tuple[GpuPoolConfig, ...], GpuPoolConfig, JobConfig]:
    pools_key = f"{NAMESPACE}:gpuPools"
    given = _given(args.gpu_pools, {"t4": GkeGpuPool()})
    if not given:
        raise ConfigError(pools_key, "no GPU pool", f"pulumi config set --path '{pools_key}.t4.machineType' "
                          "n1-standard-4")
    pools = tuple(_gpu_pool(name, pool) for name, pool in given.items())
    names = [pool.name for pool in pools]
    job_pool_name = _given(args.job_pool, names[0] if len(names) == 1 else None)
    if job_pool_name is None:
        raise ConfigError(f"{NAMESPACE}:jobPool", f"not set, and there are {len(names)} GPU pools ({', '.join(names)})",
                          f"pulumi config set {NAMESPACE}:jobPool {names[0]}")
    if job_pool_name not in names:
        raise ConfigError(f"{NAMESPACE}:jobPool", f"{job_pool_name!r} is not one of the GPU pools ({', '.join(names)})",
                          f"pulumi config set {NAMESPACE}:jobPool {names[0]}")
    job_pool = pools[names.index(job_pool_name)]
    job = resolve_job(args.job, job_pool.gpus_per_node, f"{job_pool.machine_type} node pool's machine type",
                    platform_namespaces(device_plugin=False))  # GKE runs its own device plugin
    _, nodes_for_max = gpu_nodes_for_job(job, job_pool.gpus_per_node)
    offered = GPU_DIRECT.get(job_pool.machine_type)
    if offered is not None and offered.rdma and job_pool.gpu_direct is None and nodes_for_max > 1:
        key = f"{pools_key}.{job_pool.name}.gpuDirect"
        raise ConfigError(key, f"none on {job_pool.machine_type} while the job spans {nodes_for_max} nodes: its GPUs "
                          "reach other nodes only through the RDMA network, and without it NCCL falls back to "
                          "sockets on the primary NIC, silently", f"{set_hint(key, 'auto')} (or a one-node job)")
    if nodes_for_max > job_pool.max_nodes:
        pool_key = f"{pools_key}.{job_pool.name}.max"
        raise ConfigError(f"{NAMESPACE}:job.podsMax", f"{job.pods_max} pods need {nodes_for_max} GPU nodes, but "
                          f"{pool_key} is {job_pool.max_nodes}",
                          f"raise {pool_key} to {nodes_for_max} or lower {NAMESPACE}:job.podsMax")
    return pools, job_pool, job


# Local SSD counts an N1 machine may have (Compute Engine "Choose a valid number of Local SSD disks",
# cloud.google.com/compute/docs/disks/local-ssd#choose_number_local_ssds).
N1_LOCAL_SSD_COUNTS = (0, *range(1, 9), 16, 24)


def _local_ssd_count(pool: GkeGpuPool, key: str, machine_type: str, gpu_direct: GpuDirectProfile | None) -> int:
    """A machine with bundled local SSDs (A3, A4) takes all of them or none as ephemeral storage: GKE
    refuses another count for a series that "dictates a specific number" (EphemeralStorageLocalSsdConfig);
    N1 takes the counts Compute Engine lists."""
    default = gpu_direct.local_ssd_count if gpu_direct else 0
    count = _given(pool.local_ssd_count, default)
    bundled = BUNDLED_LOCAL_SSDS.get(machine_type)
    if bundled is not None and count not in (0, bundled):
        raise ConfigError(f"{key}.localSsdCount", f"{machine_type} comes with {bundled} local SSDs, "
                          f"and GKE uses all of them or none, not {count}",
                          set_hint(f"{key}.localSsdCount", str(bundled)))
    if n1_vcpus(machine_type) is not None and count not in N1_LOCAL_SSD_COUNTS:
        raise ConfigError(f"{key}.localSsdCount", f"an N1 machine takes 1 to 8, 16 or 24 local SSDs, not {count}",
                          set_hint(f"{key}.localSsdCount", "8"))
    return count


# Google Cloud VPC, subnets, "Valid IPv4 ranges" and "Prohibited IPv4 subnet ranges"
# (cloud.google.com/vpc/docs/subnets): RFC 1918, RFC 6598 and the other special-purpose ranges Python
# counts as private (192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4, ...) are valid; these never are.
GCP_PROHIBITED_BLOCKS = tuple(ipaddress.IPv4Network(b) for b in (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32"))


def _gcp_internal(network: ipaddress.IPv4Network) -> bool:
    return ((is_private_block(network) or network.is_private)
            and not any(network.overlaps(block) for block in GCP_PROHIBITED_BLOCKS))


def _cidr(value: str, key: str, *, largest_prefix: int) -> str:
    network = ipv4_block(value, key, f"use a block like 10.0.0.0/{largest_prefix}")
    if not _gcp_internal(network) or network.prefixlen > largest_prefix:
        raise ConfigError(key, f"{value} must be an internal block ({PRIVATE_BLOCKS_TEXT}, or another reserved range "
                          "such as 240.0.0.0/4 or 198.18.0.0/15; never 0.0.0.0/8, loopback, link-local or multicast) "
                          f"of size /{largest_prefix} or larger",
                          set_hint(key, f"10.0.0.0/{largest_prefix}"))
    return str(network)


def _network(args: GcpStackArgs) -> NetworkConfig:
    """The VPC the stack creates, or the one given: names that are other resources' outputs go through as they
    are (GCP checks them)."""
    given = args.network or GkeNetwork()
    key = f"{NAMESPACE}:network"
    blocks = {
        "subnetCidr": _cidr(_given(given.subnet_cidr, "10.10.0.0/20"), f"{key}.subnetCidr", largest_prefix=24),
        "podsCidr": _cidr(_given(given.pods_cidr, "10.16.0.0/14"), f"{key}.podsCidr", largest_prefix=21),
        "servicesCidr": _cidr(_given(given.services_cidr, "10.20.0.0/20"), f"{key}.servicesCidr", largest_prefix=24),
    }
    master = _given(given.master_cidr, "172.16.0.32/28")
    master_block = ipv4_block(master, f"{key}.masterCidr", set_hint(f"{key}.masterCidr", "172.16.0.32/28"))
    if master_block.prefixlen != 28 or not _gcp_internal(master_block):
        raise ConfigError(f"{key}.masterCidr", f"{master} must be an internal /28 (GKE's control-plane range)",
                          set_hint(f"{key}.masterCidr", "172.16.0.32/28"))
    named = {**blocks, "masterCidr": str(master_block)}
    for (name_a, a), (name_b, b) in ((x, y) for i, x in enumerate(named.items()) for y in list(named.items())[i + 1:]):
        if ipaddress.IPv4Network(a).overlaps(ipaddress.IPv4Network(b)):
            raise ConfigError(f"{key}.{name_b}", f"{b} overlaps {key}.{name_a} ({a})", "give each range its own block")

    existing = None
    existing_key = f"{NAMESPACE}:existingNetwork"
    if args.existing_network is not None:
        values = {camel_case(f.name): getattr(args.existing_network, f.name)
                  for f in dataclasses.fields(args.existing_network)}
        names = tuple(values)
        for name, value in values.items():
            if value is None:
                raise ConfigError(f"{existing_key}.{name}", "not set (an existing network needs all of "
                                  f"{', '.join(names)})", set_hint(f"{existing_key}.{name}", "<name>"))
        existing = ExistingNetwork(network=values["network"], subnetwork=values["subnetwork"],
                                   pods_range_name=values["podsRangeName"],
                                   services_range_name=values["servicesRangeName"])
    return NetworkConfig(subnet_cidr=blocks["subnetCidr"], pods_cidr=blocks["podsCidr"],
                         services_cidr=blocks["servicesCidr"], master_cidr=str(master_block), existing=existing)


def _system_pool(nodes: GkeSystemNodes | None) -> SystemPoolConfig:
    nodes = nodes or GkeSystemNodes()
    key = f"{NAMESPACE}:systemNodes"
    min_nodes = _given(nodes.min, 1)
    max_nodes = _given(nodes.max, max(min_nodes, 3))
    check_scaling(key, min_nodes, max_nodes)
    machine_type = _given(nodes.machine_type, "e2-standard-4")
    if machine_type in FIXED_GPU_MACHINES or n1_vcpus(machine_type) is None and not re.fullmatch(
            r"[a-z][a-z0-9]*-[a-z]+-\d+", machine_type) or machine_type.split("-")[0] in ARM_SERIES:
        raise ConfigError(f"{key}.machineType", f"{machine_type!r} is not a general-purpose x86 machine type",
                          set_hint(f"{key}.machineType", "e2-standard-4"))
    return SystemPoolConfig(machine_type=machine_type, min_nodes=min_nodes, max_nodes=max_nodes,
                            disk_size_gb=_given(nodes.disk_size_gb, 50))


def _filestore(share: Filestore | None) -> FilestoreConfig | None:
    share = share or Filestore()
    key = f"{NAMESPACE}:sharedFilesystem"
    if not _given(share.enabled, True):
        return None
    tier = _given(share.tier, "BASIC_HDD")
    smallest, largest = FILESTORE_TIERS[tier]
    capacity = _given(share.capacity_gb, smallest)
    if not smallest <= capacity <= largest:
        raise ConfigError(f"{key}.capacityGb", f"a {tier} Filestore share holds {smallest} to {largest} GiB, not "
                          f"{capacity}", set_hint(f"{key}.capacityGb", str(smallest)))
    if tier in STEPPED_TIERS and not capacity_fits(capacity):
        nearest = min(nearest_capacity(capacity), largest)
        raise ConfigError(f"{key}.capacityGb", f"a {tier} Filestore share grows in steps of 256 GiB up to 9984 and of "
                          f"2560 GiB from 10240; {capacity} lies between them", set_hint(f"{key}.capacityGb",
                                                                                         str(nearest)))
    return FilestoreConfig(tier=tier, capacity_gb=capacity)


# Labels trainstack sets itself (trainstack-capacity on on-demand GPU pools): they count toward GCP's 64.
TRAINSTACK_LABELS = ("app", "pulumi-stack", "trainstack-capacity")


def check_labels(labels: Mapping[str, str] | None, stack: str) -> dict[str, str]:
    """trainstack:labels (loaded): GCP's label rules and room for the labels trainstack adds, plus those."""
    key = f"{NAMESPACE}:labels"
    labels = dict(labels or {})
    for name, value in labels.items():
        if not _LABEL_KEY.fullmatch(name) or not _LABEL_VALUE.fullmatch(value):
            raise ConfigError(key, f"{name}: {value!r} is not a GCP label (lowercase letters, digits, _ and -, "
                              "keys start with a letter, at most 63 characters)", f"fix {key}.{name}")
        if name in ("app", "pulumi-stack"):
            raise ConfigError(f"{key}.{name}", "is set by trainstack on every resource", f"remove {key}.{name}")
        if name.startswith("goog"):
            raise ConfigError(f"{key}.{name}", "starts with goog, which Google reserves for its own labels",
                              f"rename {key}.{name}")
    added = (*TRAINSTACK_LABELS, *GOOGLE_NODE_LABELS)
    room = MAX_LABELS - len(added)
    if len(labels) > room:
        raise ConfigError(key, f"{len(labels)} labels: GCP allows {MAX_LABELS} per resource, and a GPU node's VM "
                          f"carries up to {len(added)} more ({', '.join(added)})", f"keep at most {room} in {key}")
    stack_label = re.sub(r"[^a-z0-9_-]", "-", stack.lower())[:63]
    return {"app": "trainstack", "pulumi-stack": stack_label, **labels}


def _authorized_networks(given: list[str] | None) -> tuple[str, ...]:
    key = f"{NAMESPACE}:apiAuthorizedNetworks"
    cidrs = tuple(given or ())
    if len(cidrs) > MAX_AUTHORIZED_NETWORKS:
        raise ConfigError(key, f"{len(cidrs)} blocks: a private GKE cluster takes at most {MAX_AUTHORIZED_NETWORKS} "
                          "authorized networks", f"merge blocks until at most {MAX_AUTHORIZED_NETWORKS} remain")
    for cidr in cidrs:
        # Private and shared (100.64/10) ranges may reach the endpoint from inside a VPC; these never do.
        unroutable = unroutable_reason(cidr, allow_shared=True)
        if unroutable is not None:
            raise ConfigError(key, f"{cidr} is in the {unroutable} block: no client reaches the control plane from "
                              "there", "list the addresses you connect from, e.g. 203.0.113.7/32")
    return cidrs


def parse_gcp_config(raw: Mapping[str, str] | None = None, stack: str | None = None) -> GcpStackConfig:
    """All of a stack file's GCP config (`raw`: every key as the CLI hands it), loaded and resolved; raises
    ConfigError on the first bad key."""
    raw = raw_config() if raw is None else raw
    return resolve_gcp(load_stack(GcpStackArgs, raw, "gcp", PROVIDER_FIELDS), stack)


def resolve_gcp(args: GcpStackArgs, stack: str | None = None) -> GcpStackConfig:
    """The GCP stack's settings (loaded: trainstack/infra/config/loader.py) with every default applied and the rules
    between them checked, in a stack file's terms. Network names that are other resources' outputs (an existing
    network's) pass through; GCP checks them."""
    stack = pulumi.get_stack() if stack is None else stack
    project = (args.project or "").strip()
    if not project:
        raise ConfigError("gcp:project", "not set (the project that holds the cluster and pays for it)",
                          "pulumi config set gcp:project <your-project-id> (gcloud projects list shows them)")
    if not _PROJECT_ID.fullmatch(project):
        raise ConfigError("gcp:project", f"{project!r} is not a project ID (6-30 lowercase letters, digits and -)",
                          "pulumi config set gcp:project <your-project-id> (the ID, not the display name)")
    region = (args.region or "").strip() or DEFAULT_REGION
    if region not in GCP_REGIONS:
        close = difflib.get_close_matches(region, sorted(GCP_REGIONS), n=1)
        raise ConfigError("gcp:region", f"{region!r} is not a Google Cloud region" + (f" (did you mean {close[0]}?)"
                          if close else ""), f"pulumi config set gcp:region {close[0] if close else DEFAULT_REGION} "
                          "(gcloud compute regions list; a region newer than trainstack/infra/gcp/limits.py goes there)")
    zone_key = f"{NAMESPACE}:zone"
    zone = _given(args.zone, DEFAULT_ZONES.get(region))
    if zone is None:
        raise ConfigError(zone_key, f"no default zone for region {region}",
                          f"pulumi config set {zone_key} {region}-a (a zone of {region} that has your GPUs)")
    if zone != zone.strip().lower():
        raise ConfigError(zone_key, f"{zone!r}: zone names are lower case, without spaces",
                          f"pulumi config set {zone_key} {zone.strip().lower()}")
    if not re.fullmatch(re.escape(region) + r"-[a-z]", zone):
        raise ConfigError(zone_key, f"{zone!r} is not a zone of region {region}",
                          f"pulumi config set {zone_key} {region}-a (or set gcp:region to the zone's region)")

    name_key = f"{NAMESPACE}:clusterName"
    default_name = re.sub(r"[^a-z0-9-]", "-", f"{NAMESPACE}-{stack}".lower())[:40].rstrip("-")
    cluster_name = _given(args.cluster_name, default_name)
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ConfigError(name_key, f"{cluster_name!r} is not a valid GKE cluster name (lowercase letters, digits "
                          "and -, starting with a letter, at most 40)", set_hint(name_key, default_name))
    version_key = f"{NAMESPACE}:kubernetesVersion"
    version = _given(args.kubernetes_version, versions.GKE_MIN_KUBERNETES_VERSION)
    if not _VERSION_PREFIX.fullmatch(version):
        raise ConfigError(version_key, f"expected a minor version such as {versions.GKE_MIN_KUBERNETES_VERSION}, got "
                          f"{version!r}", set_hint(version_key, versions.GKE_MIN_KUBERNETES_VERSION))
    if tuple(map(int, version.split("."))) < tuple(map(int, versions.GKE_OLDEST_KUBERNETES_VERSION.split("."))):
        raise ConfigError(version_key, f"Kubernetes {version} is older than trainstack supports on GKE (native "
                          f"sidecars, Filestore CSI and Kueue need {versions.GKE_OLDEST_KUBERNETES_VERSION} or newer)",
                          set_hint(version_key, versions.GKE_MIN_KUBERNETES_VERSION))
    cidrs = _authorized_networks(args.api_authorized_networks)

    gpu_pools, job_pool, job = _gpu_pools_and_job(args)
    if not job.queue and any(p.topology_aware for p in gpu_pools):
        # Topology-aware placement is Kueue's; without Kueue the pools' topology has nothing to act on.
        aware = [p.name for p in gpu_pools if p.topology_aware]
        pulumi.log.warn(f"{NAMESPACE}:job.queue is false, so there is no Kueue and topologyAware on {', '.join(aware)} "
                        f"has no effect. Fix: pulumi config set --path {NAMESPACE}:job.queue true, or pulumi config "
                        f"set --path {NAMESPACE}:gpuPools.{aware[0]}.topologyAware false")
    check_queued_pools_have_kueue([(p.name, p.capacity) for p in gpu_pools], job.queue)
    network = _network(args)
    check_gpu_network_ranges(network, gpu_pools)
    filestore = _filestore(args.shared_filesystem)
    if filestore is None and job.enabled:
        raise ConfigError(f"{NAMESPACE}:sharedFilesystem.enabled", "false while the job is enabled: its checkpoints "
                          "and export would live only inside the pod and be lost when it ends",
                          f"pulumi config set --path '{NAMESPACE}:sharedFilesystem.enabled' true, or set "
                          f"{NAMESPACE}:job.enabled false")
    return GcpStackConfig(
        project=project,
        region=region,
        zone=zone,
        regional=_given(args.regional, False),
        cluster_name=cluster_name,
        release_channel=_given(args.release_channel, "REGULAR"),
        kubernetes_version=version,
        network=network,
        api_authorized_networks=cidrs,
        system_pool=_system_pool(args.system_nodes),
        gpu_pools=gpu_pools,
        job_pool=job_pool,
        job=job,
        filestore=filestore,
        delete_bucket_on_destroy=_given(args.delete_bucket_on_destroy, False),
        protect_shared_filesystem=_given(args.protect_shared_filesystem, True),
        labels=check_labels(args.labels, stack),
        budget=Budget(max_hourly_usd=args.max_hourly_usd, max_run_usd=args.max_run_usd),
    )
