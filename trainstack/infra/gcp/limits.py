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
# Labels Google's side adds to a GPU node's VM next to ours: the provider's attribution label
# goog-pulumi-provisioned (add_terraform_attribution_label, default true: terraform-provider-google
# google/provider/provider.go, bridged by pulumi-gcp provider/resources.go) and GKE's own on node VMs
# (cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels, "Automatically applied labels").
GOOGLE_NODE_LABELS = ("goog-pulumi-provisioned", "goog-gke-node", "goog-k8s-cluster-name",
                      "goog-k8s-cluster-location", "goog-k8s-node-pool-name")
# Authorized networks: "Public clusters can have up to 50 authorized network CIDR ranges; private clusters
# can have up to 100" (cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks, "Limitations").
# trainstack's clusters are private.
MAX_AUTHORIZED_NETWORKS = 100
# GKE quotas: 1,000 nodes per node pool per zone (cloud.google.com/kubernetes-engine/quotas); every pool
# here lives in one zone.
MAX_NODES_PER_POOL_ZONE = 1000
# Filestore Zonal, Regional and Enterprise: 1 to 9.75 TiB in steps of 256 GiB, 10 to 100 TiB in steps of
# 2.5 TiB (cloud.google.com/filestore/docs/service-tiers, "Minimum scaling units"; each tier's own range
# bounds it further in config.py FILESTORE_TIERS). Basic tiers grow by the GiB.
STEPPED_TIERS = ("ZONAL", "REGIONAL", "ENTERPRISE")
CAPACITY_STEPS_GIB = ((1024, 9984, 256), (10240, 102400, 2560))
# Compute Engine names (a reservation's and a reservation block's included): RFC 1035, 1 to 63 characters
# (cloud.google.com/compute/docs/naming-resources). A pool names a reservation as
# [projects/<project>/reservations/]<reservation>[/reservationBlocks/<block>]: the path for a shared
# reservation, the block suffix to consume one block of it (A3 Ultra, A4: GKE docs, "Consuming reserved
# zonal resources", cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations).
_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
RESERVATION = re.compile(rf"^(projects/[a-z][a-z0-9-]{{4,28}}[a-z0-9]/reservations/)?{_NAME}(/reservationBlocks/{_NAME})?$")


def capacity_fits(capacity_gib: int) -> bool:
    return any(low <= capacity_gib <= high and (capacity_gib - low) % step == 0
               for low, high, step in CAPACITY_STEPS_GIB)


def nearest_capacity(capacity_gib: int) -> int:
    """The smallest allowed stepped capacity at least `capacity_gib` (or the largest)."""
    for low, high, step in CAPACITY_STEPS_GIB:
        if capacity_gib <= high:
            return max(low, low + -(-(capacity_gib - low) // step) * step)
    return CAPACITY_STEPS_GIB[-1][1]
