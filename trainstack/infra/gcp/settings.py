"""The GCP stack's settings as one typed model: GcpStack's Args, and what `Pulumi.gcp.yaml` loads into.

Each field declares its own check (trainstack/infra/config/loader.py setting: a reader of reader.py and its
options), run with the field's full key when a stack file or a component's inputs are loaded; resolve_gcp
(trainstack/infra/gcp/config.py) applies the defaults and the rules between fields. No cloud SDK here: the
schema's type names are these classes' names (trainstack.components re-exports them).
"""

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from trainstack.infra.config.errors import ConfigError
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.loader import config_value, load, setting
from trainstack.infra.config.reader import (
    as_bool,
    as_choice,
    as_cidr_list,
    as_int,
    as_number,
    as_object,
    as_str,
    as_str_map,
)
from trainstack.infra.gcp.limits import MAX_NODES_PER_POOL_ZONE

# How a pool gets its VMs: spot (preemptible, cheapest), on demand, a named reservation, or DWS
# flex-start (queued for up to a week, then up to 7 days of run time, no preemption).
CAPACITY_TYPES = ("SPOT", "ON_DEMAND", "RESERVATION", "FLEX_START")
GPU_DIRECT_MODES = ("auto", "tcpx", "tcpxo", "rdma", "none")
PLACEMENTS = ("COMPACT", "ANY")
RELEASE_CHANNELS = ("REGULAR", "STABLE", "RAPID")
DISK_TYPES = ("pd-ssd", "pd-balanced", "pd-standard", "hyperdisk-balanced")
DRIVER_VERSIONS = ("DEFAULT", "LATEST")
# Filestore tiers: (smallest, largest) share in GiB, as the Filestore CSI driver on GKE supports them.
FILESTORE_TIERS: Mapping[str, tuple[int, int]] = {
    "BASIC_HDD": (1024, 65433),
    "BASIC_SSD": (2560, 65433),
    "ZONAL": (1024, 102400),
    "REGIONAL": (1024, 102400),
    "ENTERPRISE": (1024, 10240),
}


@dataclass(kw_only=True)
class GkeNetwork:
    """The VPC the stack creates: the subnet and its secondary ranges."""

    subnet_cidr: str | None = setting(as_str)
    """The nodes' subnet (default 10.10.0.0/20)."""
    pods_cidr: str | None = setting(as_str)
    """The pods' secondary range (default 10.16.0.0/14)."""
    services_cidr: str | None = setting(as_str)
    """The services' secondary range (default 10.20.0.0/20)."""
    master_cidr: str | None = setting(as_str)
    """The control plane's private /28 (default 172.16.0.32/28)."""


@dataclass(kw_only=True)
class GcpExistingNetwork:
    """A VPC and subnet to use instead of creating them; the subnet must have both secondary ranges."""

    network: pulumi.Input[str] = setting(as_str, default=dataclasses.MISSING)
    """The VPC's name or self link (your own gcp.compute.Network's name may go here)."""
    subnetwork: pulumi.Input[str] = setting(as_str, default=dataclasses.MISSING)
    """The subnet's name or self link."""
    pods_range_name: str = setting(as_str, default=dataclasses.MISSING)
    """The subnet's secondary range for pods."""
    services_range_name: str = setting(as_str, default=dataclasses.MISSING)
    """The subnet's secondary range for services."""


@dataclass(kw_only=True)
class GkeSystemNodes:
    """The CPU node pool for system pods (Kueue, TensorBoard, DNS)."""

    machine_type: str | None = setting(as_str)
    """A general-purpose x86 machine type (default e2-standard-4)."""
    min: int | None = setting(as_int, minimum=1)
    """Nodes at least (default 1)."""
    max: int | None = setting(as_int, minimum=1, maximum=MAX_NODES_PER_POOL_ZONE)
    """Nodes at most (default 3)."""
    disk_size_gb: int | None = setting(as_int, minimum=20, maximum=65536)
    """Boot disk size in GB (default 50)."""


@dataclass(kw_only=True)
class GkeGpuPool:
    """A GPU node pool: spot or on-demand, scaling to zero, GKE-managed driver."""

    machine_type: str | None = setting(as_str)
    """e.g. n1-standard-4 (T4s attached), g2-standard-8, a3-highgpu-8g (default n1-standard-4)."""
    accelerator_type: str | None = setting(as_str)
    """e.g. nvidia-tesla-t4; fixed by the machine type on A2/A3/G2 (the stack file's key; the platform's gpu.accelerator)."""
    accelerator_count: int | None = setting(as_int)
    """GPUs per node; fixed by the machine type on A2/A3/G2 (the stack file's key; the platform's gpu.gpusPerNode)."""
    disk_size_gb: int | None = setting(as_int, maximum=65536)
    """Boot disk size in GB (default 100)."""
    disk_type: str | None = setting(as_choice, choices=DISK_TYPES)
    """pd-ssd, pd-balanced, pd-standard or hyperdisk-balanced (default pd-ssd; A4, A3 Ultra: hyperdisk only)."""
    min: int | None = setting(as_int, minimum=0)
    """Nodes at least (default 0: no job, no GPU nodes)."""
    max: int | None = setting(as_int, minimum=0, maximum=MAX_NODES_PER_POOL_ZONE)
    """Nodes at most (default 2)."""
    capacity: str | None = setting(as_choice, choices=CAPACITY_TYPES)
    """SPOT, ON_DEMAND, RESERVATION or FLEX_START (default SPOT)."""
    reservation: str | None = setting(as_str)
    """The reservation's name, with capacity RESERVATION."""
    placement: str | None = setting(as_choice, choices=PLACEMENTS)
    """COMPACT or ANY (default COMPACT with GPUDirect, else ANY)."""
    local_ssd_count: int | None = setting(as_int, minimum=0, maximum=32)
    """Local NVMe SSDs as the node's ephemeral storage (the data cache)."""
    gpu_direct: str | None = setting(as_choice, choices=GPU_DIRECT_MODES)
    """auto, tcpx, tcpxo, rdma or none: GPUDirect networking on A3, A3 Ultra and A4 (default auto)."""
    driver_version: str | None = setting(as_choice, choices=DRIVER_VERSIONS)
    """The GKE-managed NVIDIA driver: DEFAULT or LATEST."""
    topology_aware: bool | None = setting(as_bool)
    """Kueue places multi-node jobs by GKE's gce-topology labels (default on A4, A3 Ultra with capacity RESERVATION; needs GPUDirect)."""


# GKE's node pool names: lowercase letters, digits and -, starting with a letter, at most 32.
POOL_NAME = re.compile(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?")


def read_gpu_pools(value: Any, key: str) -> dict[str, GkeGpuPool]:
    """trainstack:gpuPools: pools by name (a stack file's objects, or a component's GkeGpuPool), each name one GKE
    takes and each pool's fields checked under `<key>.<name>`."""
    pools = as_object(value, key)
    for name in pools:
        if not POOL_NAME.fullmatch(name):
            raise ConfigError(f"{key}.{name}", f"{name!r} is not a valid node pool name (lowercase letters, digits "
                              "and -, at most 32)", f"rename {key}.{name} to e.g. t4")
    return {name: load(GkeGpuPool, config_value(pool), f"{key}.{name}") for name, pool in pools.items()}


@dataclass(kw_only=True)
class Filestore:
    """The Filestore share the job's pods share."""

    enabled: bool | None = setting(as_bool)
    """Create it (default true; a job needs it)."""
    tier: str | None = setting(as_choice, choices=tuple(FILESTORE_TIERS))
    """BASIC_HDD, BASIC_SSD, ZONAL, REGIONAL or ENTERPRISE (default BASIC_HDD)."""
    capacity_gb: int | None = setting(as_int)
    """Size in GiB, within the tier's range (default: the tier's smallest)."""


@dataclass(kw_only=True)
class GcpStackArgs:
    """The GKE stack's settings: the keys of Pulumi.gcp.yaml (trainstack:* and gcp:project, gcp:region)."""

    project: str | None = None
    """The Google Cloud project that holds the cluster and pays for it (gcp:project; default: the given gcp provider's, needed when no gcp provider is given)."""
    region: str | None = None
    """The region (gcp:region; default: the given gcp provider's, else us-central1)."""
    zone: str | None = setting(as_str)
    """The zone of the nodes (default us-central1-a in us-central1; other regions must name theirs)."""
    regional: bool | None = setting(as_bool)
    """Replicate the control plane across the region's zones (default false)."""
    cluster_name: str | None = setting(as_str)
    """The GKE cluster's name (default trainstack-<stack>)."""
    release_channel: str | None = setting(as_choice, choices=RELEASE_CHANNELS)
    """REGULAR, STABLE or RAPID (default REGULAR)."""
    kubernetes_version: str | None = setting(as_str)
    """The minimum minor version, e.g. 1.34; the newest patch GKE offers is used."""
    network: GkeNetwork | None = None
    """The VPC the stack creates."""
    existing_network: GcpExistingNetwork | None = None
    """A VPC and subnet to use instead of creating one."""
    api_authorized_networks: list[str] | None = setting(as_cidr_list, allow_empty=True)
    """CIDR blocks that may reach the cluster's endpoint (default: any, still authenticated by IAM)."""
    system_nodes: GkeSystemNodes | None = None
    """The CPU node pool."""
    gpu_pools: dict[str, GkeGpuPool] | None = setting(read_gpu_pools)
    """GPU node pools by name (default one pool t4)."""
    job_pool: str | None = setting(as_str)
    """The GPU pool the job runs on (default: the only pool)."""
    job: Job | None = None
    """The training job."""
    # The stack file's order of keys (the unknown-key hint lists them so): budget, then the shared filesystem.
    max_hourly_usd: float | None = setting(as_number, minimum=0.01)
    """Refuse to deploy when the estimate at the pools' maximum exceeds this many USD an hour."""
    max_run_usd: float | None = setting(as_number, minimum=0.01)
    """Refuse to deploy when the job's estimated run exceeds this many USD."""
    shared_filesystem: Filestore | None = None
    """The Filestore share."""
    delete_bucket_on_destroy: bool | None = setting(as_bool)
    """Delete the snapshot bucket and its contents on destroy (default false)."""
    protect_shared_filesystem: bool | None = setting(as_bool)
    """Refuse to destroy the Filestore share, which holds the runs (default true)."""
    labels: dict[str, str] | None = setting(as_str_map)
    """Extra labels on every resource (plus app and pulumi-stack)."""


# trainstack builds its Google provider explicitly from these; any other gcp:* key would be ignored.
PROVIDER_FIELDS = {"project": "gcp:project", "region": "gcp:region"}
