"""A GPU pool of the GCP stack (`trainstack:gpuPools.<name>`, loaded: settings.GkeGpuPool) resolved: its machine,
GPUs, disks, capacity, placement and GPUDirect networking, every default applied and every rule between them
checked in a stack file's terms (trainstack/infra/gcp/config.py resolves the stack around it).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainstack.infra.config import NAMESPACE, ConfigError, set_hint
from trainstack.infra.config.loader import or_default
from trainstack.infra.config.reader import check_scaling
from trainstack.infra.gcp.limits import RESERVATION
from trainstack.infra.gcp.machine_types import (
    BUNDLED_LOCAL_SSDS,
    FIXED_GPU_MACHINES,
    GPU_DIRECT,
    N1_ACCELERATORS,
    UNSUPPORTED_BY_IMAGE,
    GpuDirectProfile,
    n1_vcpus,
)
from trainstack.infra.gcp.pool_capacity import check_queued_provisioning_pool, pool_topology_aware
from trainstack.infra.gcp.settings import GkeGpuPool

# Machine series that boot only from Hyperdisk: cluster-toolkit v1.95.0 sets disk_type hyperdisk-balanced
# in every A4 and A3 Ultra VM blueprint (examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml,
# a3-ultragpu-8g/a3ultra-vm.yaml).
HYPERDISK_ONLY_SERIES = ("a4-", "a3-ultragpu-")
# The CUDA training image (about 10 GB unpacked) and the node's own images fit with room to spare.
MIN_GPU_DISK_GB = 50


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


def resolve_gpu_pool(name: str, pool: GkeGpuPool) -> GpuPoolConfig:
    """trainstack:gpuPools.<name> (its name and each field checked by the loader: settings.read_gpu_pools)."""
    key = f"{NAMESPACE}:gpuPools.{name}"
    machine_type = or_default(pool.machine_type, "n1-standard-4")
    fixed = FIXED_GPU_MACHINES.get(machine_type)
    vcpus = n1_vcpus(machine_type)
    if fixed is not None:
        accelerator = or_default(pool.accelerator_type, fixed.accelerator)
        count = or_default(pool.accelerator_count, fixed.count)
        if accelerator != fixed.accelerator or count != fixed.count:
            raise ConfigError(f"{key}.acceleratorCount" if accelerator == fixed.accelerator else
                              f"{key}.acceleratorType",
                              f"{machine_type} comes with {fixed.count} x {fixed.accelerator}, not {count} x "
                              f"{accelerator}", f"remove {key}.acceleratorType and .acceleratorCount, or pick the "
                              "machine type of the size you want")
    elif vcpus is not None:
        accelerator = or_default(pool.accelerator_type, "nvidia-tesla-t4")
        counts = N1_ACCELERATORS.get(accelerator)
        if counts is None:
            raise ConfigError(f"{key}.acceleratorType", f"{accelerator} cannot be attached to {machine_type} "
                              f"(N1 machines take {', '.join(N1_ACCELERATORS)}; A100, H100, L4 come with A2, A3, G2 "
                              "machine types)", set_hint(f"{key}.acceleratorType", "nvidia-tesla-t4"))
        count = or_default(pool.accelerator_count, 1)
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
    disk = or_default(pool.disk_size_gb, 100)
    if disk < MIN_GPU_DISK_GB:
        raise ConfigError(f"{key}.diskSizeGb", f"{disk} GB cannot hold the CUDA training image (about 10 GB) and the "
                          f"node's images; GPU nodes need at least {MIN_GPU_DISK_GB} GB",
                          set_hint(f"{key}.diskSizeGb", "100"))
    min_nodes = or_default(pool.min, 0)
    max_nodes = or_default(pool.max, max(min_nodes, 2))
    check_scaling(key, min_nodes, max_nodes)
    gpu_direct = _gpu_direct(pool, key, machine_type)
    capacity = or_default(pool.capacity, "SPOT")
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
    placement = or_default(pool.placement, "COMPACT" if gpu_direct else "ANY")
    if placement == "COMPACT" and capacity == "RESERVATION":
        # GKE refuses a compact placement policy on a pool that consumes a specific reservation: the
        # reservation already fixes where the VMs are.
        raise ConfigError(f"{key}.placement", "COMPACT cannot be combined with a specific reservation (the "
                          "reservation decides placement)", set_hint(f"{key}.placement", "ANY"))
    if placement == "COMPACT" and capacity == "FLEX_START":
        raise ConfigError(f"{key}.placement", f"COMPACT is not offered with FLEX_START on {machine_type}",
                          set_hint(f"{key}.placement", "ANY"))
    hyperdisk_only = machine_type.startswith(HYPERDISK_ONLY_SERIES)
    disk_type = or_default(pool.disk_type, "hyperdisk-balanced" if hyperdisk_only else "pd-ssd")
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
        driver_version=or_default(pool.driver_version, "DEFAULT"),
        topology_aware=topology_aware,
    )


def _gpu_direct(pool: GkeGpuPool, pool_key: str, machine_type: str) -> GpuDirectProfile | None:
    """`auto` picks the machine type's GPUDirect networking; naming one it does not have is an error."""
    key = f"{pool_key}.gpuDirect"
    mode = or_default(pool.gpu_direct, "auto")
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


# Local SSD counts an N1 machine may have (Compute Engine "Choose a valid number of Local SSD disks",
# cloud.google.com/compute/docs/disks/local-ssd#choose_number_local_ssds).
N1_LOCAL_SSD_COUNTS = (0, *range(1, 9), 16, 24)


def _local_ssd_count(pool: GkeGpuPool, key: str, machine_type: str, gpu_direct: GpuDirectProfile | None) -> int:
    """A machine with bundled local SSDs (A3, A4) takes all of them or none as ephemeral storage: GKE
    refuses another count for a series that "dictates a specific number" (EphemeralStorageLocalSsdConfig);
    N1 takes the counts Compute Engine lists."""
    default = gpu_direct.local_ssd_count if gpu_direct else 0
    count = or_default(pool.local_ssd_count, default)
    bundled = BUNDLED_LOCAL_SSDS.get(machine_type)
    if bundled is not None and count not in (0, bundled):
        raise ConfigError(f"{key}.localSsdCount", f"{machine_type} comes with {bundled} local SSDs, "
                          f"and GKE uses all of them or none, not {count}",
                          set_hint(f"{key}.localSsdCount", str(bundled)))
    if n1_vcpus(machine_type) is not None and count not in N1_LOCAL_SSD_COUNTS:
        raise ConfigError(f"{key}.localSsdCount", f"an N1 machine takes 1 to 8, 16 or 24 local SSDs, not {count}",
                          set_hint(f"{key}.localSsdCount", "8"))
    return count
