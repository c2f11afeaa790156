"""The local disk one GKE node offers pods (its allocatable ephemeral-storage), estimated as GKE
reserves it (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, "Local ephemeral
storage reservation"): capacity - min(50%, 6 GiB + 35%, 100 GiB) - the 10% eviction threshold, where
capacity is the boot disk, or the local SSDs (375 GB each) when they back ephemeral storage.
Disk sizes count as decimal GB here, the smaller reading, so the estimate errs low.
"""

from __future__ import annotations

import math

_GIB = 2**30
_LOCAL_SSD_BYTES = 375 * 10**9


def gke_allocatable_ephemeral_storage(boot_disk_gb: int, local_ssd_count: int) -> str:
    """A node's allocatable ephemeral-storage (rounded down to GiB) for this boot disk and local SSDs."""
    capacity = local_ssd_count * _LOCAL_SSD_BYTES if local_ssd_count else boot_disk_gb * 10**9
    reserved = min(capacity / 2, 6 * _GIB + 0.35 * capacity, 100 * _GIB)
    return f"{math.floor((capacity - reserved - capacity / 10) / _GIB)}Gi"
