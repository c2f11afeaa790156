"""Which GPUs a GKE node can have: accelerators attached to N1 machines, and machine types with fixed GPUs.

Sources: Compute Engine "GPU machine types" (N1 + T4/P4/V100/P100 counts and vCPU limits; A2, A3, A4
and G2 come with their GPUs) and cluster-toolkit's pkg/config/hardware.go (machine type -> accelerator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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


# Local SSDs these machine types always come with (Compute Engine "About Local SSD disks", the table of
# machine types that automatically attach Local SSD: cloud.google.com/compute/docs/disks/local-ssd).
# GKE uses all of them as ephemeral storage or none: a series that "dictates a specific number"
# refuses another count (EphemeralStorageLocalSsdConfig).
BUNDLED_LOCAL_SSDS: Mapping[str, int] = {
    **{f"a2-ultragpu-{n}g": n for n in (1, 2, 4, 8)},
    **{f"a3-highgpu-{n}g": 2 * n for n in (1, 2, 4, 8)},
    "a3-megagpu-8g": 16,
    "a3-ultragpu-8g": 32,
    "a4-highgpu-8g": 32,
}


def n1_vcpus(machine_type: str) -> int | None:
    """vCPUs of an N1 machine type (`n1-standard-4` -> 4), or None if it is not one."""
    family, _, size = machine_type.rpartition("-")
    return int(size) if family in N1_FAMILIES and size.isdigit() else None


@dataclass(frozen=True)
class GpuDirectProfile:
    """GPUDirect networking of a machine type: GPUs talk to their own NICs.

    Without it a multi-node job on these machines runs NCCL over the single primary NIC at a few
    GB/s, silently. Minimum GKE patch per minor: TCPX/TCPXO from cluster-toolkit's
    modules/compute/gke-node-pool/gpu_direct.tf, RDMA from Google's A4 / A3 Ultra GKE guides (newer
    minors than those listed have no minimum; older ones are refused: see meets_gpu_direct_minimum).

    TCPX / TCPXO (A3 High / Mega): one extra VPC per GPU NIC, NetDevice mode. RDMA (A3 Ultra, A4):
    the GPU NICs are RoCE NICs in one RDMA VPC (one subnet per NIC, RDMA mode), and the machine has a
    second gVNIC besides the primary one, in its own VPC (cluster-toolkit v1.95.0
    examples/gke-a4/gke-a4.yaml: gke-a4-net-1 and gke-a4-rdma-net with 8 subnets).
    """

    mode: str  # the chart's gpuNetworking.mode
    gpu_nics: int  # GPU NICs per node: extra VPCs (TCPX/TCPXO) or subnets of the RDMA VPC (RDMA)
    local_ssd_count: int  # the machine's bundled local NVMe SSDs, used as ephemeral storage
    min_versions: Mapping[str, str]
    # Pod size that leaves room for GKE's DaemonSets (and, on TCPX/TCPXO, the RxDM sidecar).
    pod_resources: Mapping[str, object]
    # The bar of cluster-toolkit's daily CI for this machine (tools/cloud-build/daily-tests/
    # ansible_playbooks/test-validation/test-gke-a3-*.yml, test-gke-a4.yml: nccl-tests' average bus bandwidth).
    nccl_min_bus_bandwidth_gbps: int
    # gVNICs beyond the primary one, each in its own VPC (A3 Ultra and A4 have one: 2 gVNICs in all).
    extra_gvnics: int = 0
    # This machine's NCCL settings over the chart's gpuNetworking.<mode>.ncclEnv (gIB's tuner file).
    nccl_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def rdma(self) -> bool:
        return self.mode == "rdma"

    @property
    def device_mode(self) -> str:
        """GKENetworkParamSet.spec.deviceMode of the GPU networks (cluster-toolkit gke-cluster main.tf)."""
        return "RDMA" if self.rdma else "NetDevice"


_A3_POD = {"requests": {"cpu": "180", "memory": "1500Gi"}, "limits": {"memory": "1700Gi"}, "shmSize": "200Gi"}
# A3 Ultra and A4 nodes: 224 vCPUs, 2952 GB (A3 Ultra) or 3968 GB (A4); no RxDM sidecar. Sized for
# the smaller of the two, so one profile serves both. upstream's nccl-test pods give /dev/shm 250Gi
# (container-engine-accelerators gpudirect-rdma/nccl-test-a4.yaml).
_RDMA_POD = {"requests": {"cpu": "200", "memory": "2000Gi"}, "limits": {"memory": "2400Gi"}, "shmSize": "250Gi"}
# GPUDirect-RDMA machines: 8 RoCE NICs (one per GPU), 32 bundled local SSDs (cluster-toolkit
# modules/compute/gke-node-pool/disk_definitions.tf); cluster-toolkit's daily A3 Ultra and A4 tests
# require 100 GB/s (all_gather_perf 1K-8G, examples/gke-a4/nccl-jobset-example.yaml).
_RDMA = {"mode": "rdma", "gpu_nics": 8, "extra_gvnics": 1, "local_ssd_count": 32, "pod_resources": _RDMA_POD,
         "nccl_min_bus_bandwidth_gbps": 100}
# The GKE versions GPUDirect-RDMA runs on: "To use GPUDirect RDMA ... A4: Use 1.32.2-gke.1475000 or later.
# A3 Ultra: Use 1.31.4-gke.1183000 or later." (GKE, "Create an AI-optimized GKE cluster"). 1.32.2-gke.1422000,
# quoted elsewhere, is Autopilot's minimum for B200 GPUs, not for RDMA.
A4_MIN_VERSIONS = {"1.32": "1.32.2-gke.1475000"}
A3_ULTRA_MIN_VERSIONS = {"1.31": "1.31.4-gke.1183000"}
GPU_DIRECT: Mapping[str, GpuDirectProfile] = {
    "a3-highgpu-8g": GpuDirectProfile(
        mode="tcpx", gpu_nics=4, local_ssd_count=16, pod_resources=_A3_POD, nccl_min_bus_bandwidth_gbps=25,
        min_versions={"1.27": "1.27.16-gke.2874000", "1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000"}),
    "a3-megagpu-8g": GpuDirectProfile(
        mode="tcpxo", gpu_nics=8, local_ssd_count=16, pod_resources=_A3_POD, nccl_min_bus_bandwidth_gbps=30,
        min_versions={"1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000", "1.30": "1.30.14-gke.1922000",
                      "1.31": "1.31.14-gke.1243000", "1.32": "1.32.11-gke.1174000"}),
    # A3 Ultra's gIB tuner file (cluster-toolkit examples/machine-learning/a3-ultragpu-8g/nemo-framework/
    # Dockerfile); the chart's default is A4's.
    "a3-ultragpu-8g": GpuDirectProfile(**_RDMA, min_versions=A3_ULTRA_MIN_VERSIONS, nccl_env={
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb"}),
    "a4-highgpu-8g": GpuDirectProfile(**_RDMA, min_versions=A4_MIN_VERSIONS),
}


def gke_version_key(version: str) -> tuple[int, ...]:
    """`1.31.14-gke.1243000` -> (1, 31, 14, 1243000): comparable GKE versions."""
    release, _, build = version.partition("-gke.")
    return (*map(int, release.split(".")), int(build or 0))


def _minor_key(minor: str) -> tuple[int, ...]:
    return tuple(map(int, minor.split(".")))


def meets_gpu_direct_minimum(profile: GpuDirectProfile, version: str) -> str | None:
    """The minimum `version` falls short of, or None when it is new enough.

    A minor older than every minor listed falls short of the oldest one's minimum: GKE has no
    GPUDirect for the machine there (B200 nodes start at 1.32). A newer unlisted minor has no minimum."""
    if not profile.min_versions:
        return None
    minor = ".".join(version.split(".")[:2])
    oldest = min(profile.min_versions, key=_minor_key)
    if _minor_key(minor) < _minor_key(oldest):
        return profile.min_versions[oldest]
    minimum = profile.min_versions.get(minor)
    if minimum is not None and gke_version_key(version) < gke_version_key(minimum):
        return minimum
    return None
