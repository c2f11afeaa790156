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

import pulumi

from trainstack.infra.config import NAMESPACE, ConfigError, JobConfig, gpu_nodes_for_job, raw_config, set_hint
from trainstack.infra.config.job import job_keys_as_written, resolve_job
from trainstack.infra.config.loader import camel_case, keys_of, load_stack, or_default
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
from trainstack.infra.gcp.gpu_pool_config import GpuPoolConfig, resolve_gpu_pool
from trainstack.infra.gcp.limits import (
    GCP_REGIONS,
    GOOGLE_NODE_LABELS,
    MAX_AUTHORIZED_NETWORKS,
    MAX_LABELS,
    STEPPED_TIERS,
    capacity_fits,
    nearest_capacity,
)
from trainstack.infra.gcp.machine_types import (
    FIXED_GPU_MACHINES,
    GPU_DIRECT,
    n1_vcpus,
)
from trainstack.infra.gcp.pool_capacity import (
    check_queued_pools_have_kueue,
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


def _gpu_pools_and_job(args: GcpStackArgs) -> tuple[tuple[GpuPoolConfig, ...], GpuPoolConfig, JobConfig]:
    pools_key = f"{NAMESPACE}:gpuPools"
    given = or_default(args.gpu_pools, {"t4": GkeGpuPool()})
    if not given:
        raise ConfigError(pools_key, "no GPU pool", f"pulumi config set --path '{pools_key}.t4.machineType' "
                          "n1-standard-4")
    pools = tuple(resolve_gpu_pool(name, pool) for name, pool in given.items())
    names = [pool.name for pool in pools]
    job_pool_name = or_default(args.job_pool, names[0] if len(names) == 1 else None)
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
        with job_keys_as_written(args.job):
            raise ConfigError(f"{NAMESPACE}:job.podsMax", f"{job.pods_max} pods need {nodes_for_max} GPU nodes, "
                              f"but {pool_key} is {job_pool.max_nodes}",
                              f"raise {pool_key} to {nodes_for_max} or lower {NAMESPACE}:job.podsMax")
    return pools, job_pool, job


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
        "subnetCidr": _cidr(or_default(given.subnet_cidr, "10.10.0.0/20"), f"{key}.subnetCidr", largest_prefix=24),
        "podsCidr": _cidr(or_default(given.pods_cidr, "10.16.0.0/14"), f"{key}.podsCidr", largest_prefix=21),
        "servicesCidr": _cidr(or_default(given.services_cidr, "10.20.0.0/20"), f"{key}.servicesCidr", largest_prefix=24),
    }
    master = or_default(given.master_cidr, "172.16.0.32/28")
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
    min_nodes = or_default(nodes.min, 1)
    max_nodes = or_default(nodes.max, max(min_nodes, 3))
    check_scaling(key, min_nodes, max_nodes)
    machine_type = or_default(nodes.machine_type, "e2-standard-4")
    if machine_type in FIXED_GPU_MACHINES or n1_vcpus(machine_type) is None and not re.fullmatch(
            r"[a-z][a-z0-9]*-[a-z]+-\d+", machine_type) or machine_type.split("-")[0] in ARM_SERIES:
        raise ConfigError(f"{key}.machineType", f"{machine_type!r} is not a general-purpose x86 machine type",
                          set_hint(f"{key}.machineType", "e2-standard-4"))
    return SystemPoolConfig(machine_type=machine_type, min_nodes=min_nodes, max_nodes=max_nodes,
                            disk_size_gb=or_default(nodes.disk_size_gb, 50))


def _filestore(share: Filestore | None) -> FilestoreConfig | None:
    share = share or Filestore()
    key = f"{NAMESPACE}:sharedFilesystem"
    if not or_default(share.enabled, True):
        return None
    tier = or_default(share.tier, "BASIC_HDD")
    smallest, largest = FILESTORE_TIERS[tier]
    capacity = or_default(share.capacity_gb, smallest)
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
    zone = or_default(args.zone, DEFAULT_ZONES.get(region))
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
    cluster_name = or_default(args.cluster_name, default_name)
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ConfigError(name_key, f"{cluster_name!r} is not a valid GKE cluster name (lowercase letters, digits "
                          "and -, starting with a letter, at most 40)", set_hint(name_key, default_name))
    version_key = f"{NAMESPACE}:kubernetesVersion"
    version = or_default(args.kubernetes_version, versions.GKE_MIN_KUBERNETES_VERSION)
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
        regional=or_default(args.regional, False),
        cluster_name=cluster_name,
        release_channel=or_default(args.release_channel, "REGULAR"),
        kubernetes_version=version,
        network=network,
        api_authorized_networks=cidrs,
        system_pool=_system_pool(args.system_nodes),
        gpu_pools=gpu_pools,
        job_pool=job_pool,
        job=job,
        filestore=filestore,
        delete_bucket_on_destroy=or_default(args.delete_bucket_on_destroy, False),
        protect_shared_filesystem=or_default(args.protect_shared_filesystem, True),
        labels=check_labels(args.labels, stack),
        budget=Budget(max_hourly_usd=args.max_hourly_usd, max_run_usd=args.max_run_usd),
    )
