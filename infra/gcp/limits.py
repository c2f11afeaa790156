"""What Google Cloud documents as valid: the regions accepted for gcp:region, and the limits the config is checked against.

Regions: cloud.google.com/compute/docs/regions-zones ("Available regions and zones"). A region Google
opens later is refused as unknown until it is added here.
"""

from __future__ import annotations

import re

GCP_REGIONS = frozenset({
    "africa-south1",
    "asia-east1", "asia-east2", "asia-northeast1", "asia-northeast2", "asia-northeast3", "asia-south1", "asia-south2",
    "asia-southeast1", "asia-southeast2",
    "australia-southeast1", "australia-southeast2",
    "europe-central2", "europe-north1", "europe-north2", "europe-southwest1", "europe-west1", "europe-west2",
    "europe-west3", "europe-west4", "europe-west6", "europe-west8", "europe-west9", "europe-west10", "europe-west12",
    "me-central1", "me-central2", "me-west1",
    "northamerica-northeast1", "northamerica-northeast2", "northamerica-south1",
    "southamerica-east1", "southamerica-west1",
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3", "us-west4",
})

# Labels: "Each resource can have up to 64 labels" (cloud.google.com/compute/docs/labeling-resources,
# "Requirements for labels").
MAX_LABELS = 64
# Authorized networks: "Public clusters can have up to 50 authorized network CIDR ranges; private clusters
# can have up to 100" (cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks, "Limitations").
# trainstack's clusters are private.
MAX_AUTHORIZED_NETWORKS = 100
# GKE quotas: 1,000 nodes per node pool per zone (cloud.google.com/kubernetes-engine/quotas); every pool
# here lives in one zone.
MAX_NODES_PER_POOL_ZONE = 1000
# Filestore Zonal: 1 to 9.75 TiB in steps of 256 GiB, 10 to 100 TiB in steps of 2.5 TiB
# (cloud.google.com/filestore/docs/service-tiers-zonal, "Minimum scaling units").
ZONAL_CAPACITY_STEPS_GIB = ((1024, 9984, 256), (10240, 102400, 2560))
# Compute Engine names (a reservation's included): RFC 1035, 1 to 63 characters
# (cloud.google.com/compute/docs/naming-resources); a shared reservation is named by its path.
RESOURCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
SHARED_RESERVATION = re.compile(r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def zonal_capacity_fits(capacity_gib: int) -> bool:
    return any(low <= capacity_gib <= high and (capacity_gib - low) % step == 0
               for low, high, step in ZONAL_CAPACITY_STEPS_GIB)


def nearest_zonal_capacity(capacity_gib: int) -> int:
    """The smallest allowed Zonal capacity at least `capacity_gib` (or the largest)."""
    for low, high, step in ZONAL_CAPACITY_STEPS_GIB:
        if capacity_gib <= high:
            return max(low, low + -(-(capacity_gib - low) // step) * step)
    return ZONAL_CAPACITY_STEPS_GIB[-1][1]
