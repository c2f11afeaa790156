"""Which GPUs a GKE node can have: accelerators attached to N1 machines, and machine types with fixed GPUs.

Sources: Compute Engine "GPU machine types" (N1 + T4/P4/V100/P100 counts and vCPU limits; A2, A3, A4
and G2 come with their GPUs) and cluster-toolkit's pkg/config/hardware.go (machine type -> accelerator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Accelerators that attach to N1 machines: allowed counts -> the most vCPUs an N1 machine may have with them.
N1_ACCELERATORS: Mapping[str, Mapping[int, int]] = {
    "nvidia-tesla-t4": {1: 48, 2: 48, 4: 96},
    "nvidia-tesla-p4": {1: 24, 2: 48, 4: 96},
    "nvidia-tesla-v100": {1: 12, 2: 24, 4: 48, 8: 96},
    "nvidia-tesla-p100": {1: 16, 2: 32, 4: 64},
}
N1_FAMILIES = ("n1-standard", "n1-highmem", "n1-highcpu")

# GPUs the training image cannot use: its PyTorch is a CUDA 12.8 build, which has no kernels for
# Pascal (P4, P100) or Volta (V100); a job there dies at its first CUDA call.
UNSUPPORTED_BY_IMAGE: Mapping[str, str] = {
    "nvidia-tesla-p4": "Pascal",
    "nvidia-tesla-p100": "Pascal",
    "nvidia-tesla-v100": "Volta",
}


@dataclass(frozen=True)
class FixedGpus:
    accelerator: str
    count: int


def _series(prefix: str, accelerator: str, counts: Mapping[str, int]) -> dict[str, FixedGpus]:
    return {f"{prefix}-{suffix}": FixedGpus(accelerator, count) for suffix, count in counts.items()}


# Machine types that come with their GPUs (no accelerator is attached; a different count is an error).
FIXED_GPU_MACHINES: Mapping[str, FixedGpus] = {
    **_series("a2-highgpu", "nvidia-tesla-a100", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_series("a2-megagpu", "nvidia-tesla-a100", {"16g": 16}),
    **_series("a2-ultragpu", "nvidia-a100-80gb", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_series("a3-highgpu", "nvidia-h100-80gb", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_series("a3-megagpu", "nvidia-h100-mega-80gb", {"8g": 8}),
    **_series("a3-ultragpu", "nvidia-h200-141gb", {"8g": 8}),
    **_series("a4-highgpu", "nvidia-b200", {"8g": 8}),
    **_series("g2-standard", "nvidia-l4", {"4": 1, "8": 1, "12": 1, "16": 1, "32": 1, "24": 2, "48": 4, "96": 8}),
}


def n1_vcpus(machine_type: str) -> int | None:
    """vCPUs of an N1 machine type (`n1-standard-4` -> 4), or None if it is not one."""
    family, _, size = machine_type.rpartition("-")
    return int(size) if family in N1_FAMILIES and size.isdigit() else None


@dataclass(frozen=True)
class GpuDirectProfile:
    """GPUDirect networking of a machine type: GPUs talk to their own NICs, one extra VPC per NIC.

    Without it a multi-node job on these machines runs NCCL over the single primary NIC at a few
    GB/s, silently. Minimum GKE patch per minor from cluster-toolkit's
    modules/compute/gke-node-pool/gpu_direct.tf (minors not listed have no minimum).
    """

    mode: str  # the chart's gpuNetworking.mode
    networks: int  # extra GPU VPCs (NICs) per node
    local_ssd_count: int  # the machine's bundled local NVMe SSDs, used as ephemeral storage
    min_versions: Mapping[str, str]
    # Pod size that leaves room for GKE's DaemonSets and the RxDM sidecar (208 vCPUs, 1872 GB nodes).
    pod_resources: Mapping[str, object]
    nccl_min_bus_bandwidth_gbps: int  # cluster-toolkit's daily A3 CI threshold (all_gather, 1M-512M)


_A3_POD = {"requests": {"cpu": "180", "memory": "1500Gi"}, "limits": {"memory": "1700Gi"}, "shmSize": "200Gi"}
GPU_DIRECT: Mapping[str, GpuDirectProfile] = {
    "a3-highgpu-8g": GpuDirectProfile(
        mode="tcpx", networks=4, local_ssd_count=16, pod_resources=_A3_POD, nccl_min_bus_bandwidth_gbps=25,
        min_versions={"1.27": "1.27.16-gke.2874000", "1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000"}),
    "a3-megagpu-8g": GpuDirectProfile(
        mode="tcpxo", networks=8, local_ssd_count=16, pod_resources=_A3_POD, nccl_min_bus_bandwidth_gbps=30,
        min_versions={"1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000", "1.30": "1.30.14-gke.1922000",
                      "1.31": "1.31.14-gke.1243000", "1.32": "1.32.11-gke.1174000"}),
}


def gke_version_key(version: str) -> tuple[int, ...]:
    """`1.31.14-gke.1243000` -> (1, 31, 14, 1243000): comparable GKE versions."""
    release, _, build = version.partition("-gke.")
    return (*map(int, release.split(".")), int(build or 0))


def meets_gpu_direct_minimum(profile: GpuDirectProfile, version: str) -> str | None:
    """The minimum `version` falls short of, or None when it is new enough."""
    minor = ".".join(version.split(".")[:2])
    minimum = profile.min_versions.get(minor)
    if minimum is not None and gke_version_key(version) < gke_version_key(minimum):
        return minimum
    return None
