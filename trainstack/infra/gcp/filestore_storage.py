"""Shared storage on GKE: a Filestore instance in the nodes' zone and a static PersistentVolume for it.

Pulumi owns the instance (not a dynamic StorageClass), so `pulumi destroy` removes it in order: the
platform's claim, then the volume, then the instance. The volume's reclaim policy is Retain: deleting
the claim never deletes the files.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.contracts import SharedStorage
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.gcp.cluster import GkeCluster
from trainstack.infra.gcp.config import FilestoreConfig
from trainstack.infra.gcp.handles import ClusterRef, NetworkRef
from trainstack.infra.gcp.network import GkeNetwork
from trainstack.infra.kubernetes.static_volume import static_volume

SHARE_NAME = "trainstack"
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"


@dataclass(frozen=True, kw_only=True)
class FilestoreStorageArgs:
    project: str
    config: FilestoreConfig
    cluster: GkeCluster | ClusterRef
    network: GkeNetwork | NetworkRef
    claim_namespace: str  # the volume is reserved for this claim (the platform's)
    claim_name: str
    protect: bool = True  # trainstack:protectSharedFilesystem: destroy refuses while the runs live here


class FilestoreStorage(pulumi.ComponentResource):
    instance_name: pulumi.Output[str]
    ip_address: pulumi.Output[str]
    shared_storage: SharedStorage

    def __init__(self, name: str, args: FilestoreStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:FilestoreStorage", name, None, opts)
        zonal = args.config.tier not in ("REGIONAL", "ENTERPRISE")
        instance = gcp.filestore.Instance(
            name,
            project=args.project,
            location=args.cluster.node_zone if zonal else args.cluster.cluster_location,
            tier=args.config.tier,
            file_shares=gcp.filestore.InstanceFileSharesArgs(name=SHARE_NAME, capacity_gb=args.config.capacity_gb),
            networks=[gcp.filestore.InstanceNetworkArgs(
                network=args.network.network_name, modes=["MODE_IPV4"], connect_mode="DIRECT_PEERING")],
            # Pulumi's protect, not GCP's: `pulumi destroy` stops before deleting anything at all.
            deletion_protection_enabled=False,
            opts=child_options(self, None, opts, protect=args.protect),
        )
        self.instance_name = instance.name
        self.ip_address = instance.networks.apply(lambda networks: networks[0].ip_addresses[0])
        _, self.shared_storage = static_volume(
            f"{name}-volume", claim_namespace=args.claim_namespace, claim_name=args.claim_name,
            capacity=f"{args.config.capacity_gb}Gi", driver=FILESTORE_CSI_DRIVER,
            volume_handle=pulumi.Output.concat("modeInstance/", instance.location, "/", instance.name, f"/{SHARE_NAME}"),
            volume_attributes={"ip": self.ip_address, "volume": SHARE_NAME},
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider))
        self.register_outputs({"instanceName": self.instance_name, "ipAddress": self.ip_address})
