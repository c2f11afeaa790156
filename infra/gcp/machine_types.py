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
