"""The GKE cluster: zonal (regional as an option), private nodes, Workload Identity, Dataplane V2, shielded
nodes, the Filestore CSI driver (GCS FUSE's off: nothing mounts a bucket), and a maintenance exclusion that keeps GKE from
upgrading nodes under a running job. The default node pool is removed (node_pool.py makes ours).

The control-plane version comes from preflight.py (the release channel's newest patch of the
configured minor), which also confirms the zone before any resource is registered.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from trainstack.infra.gcp.config import GcpStackConfig
from trainstack.infra.gcp.handles import NetworkRef
from trainstack.infra.gcp.network import GkeNetwork

# Upgrades of nodes and minor versions wait while the exclusion holds (until the minor's end of
# support); security patches of the control plane still apply. The start is fixed so that it does
# not change on every `pulumi up`.
UPGRADE_EXCLUSION_START = "2026-01-01T00:00:00Z"
MAINTENANCE_WINDOW_START = "03:00"  # UTC, daily


@dataclass(frozen=True, kw_only=True)
class GkeClusterArgs:
    config: GcpStackConfig
    network: GkeNetwork | NetworkRef
    services: Sequence[pulumi.Resource]  # the APIs, enabled first
    # A version the release channel offers (preflight.channel_version): GKE refuses one outside it.
    control_plane_version: pulumi.Input[str]
    # GKE multi-networking (GPUDirect's extra VPCs); None: on when a GPU pool of the config uses GPUDirect.
    multi_networking: bool | None = None


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that gets its tokens from gcloud's auth plugin (no static credentials in it)."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": f"https://{endpoint}",
                                                 "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
        }}}],
    }, sort_keys=True)


class GkeCluster(pulumi.ComponentResource):
    cluster: gcp.container.Cluster
    cluster_name: pulumi.Output[str]
    location: str
    cluster_location: pulumi.Output[str]  # the cluster resource's: what uses it waits for the cluster
    node_zone: pulumi.Output[str]  # the configured zone (preflight confirmed it is one of the region's)
    kubeconfig_json: pulumi.Output[str]  # secret
    provider: k8s.Provider

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GkeCluster", name, None, opts)
        cfg = args.config
        gpu_direct = [pool.gpu_direct for pool in cfg.gpu_pools if pool.gpu_direct is not None]
        multi_networking = bool(gpu_direct) if args.multi_networking is None else args.multi_networking
        self.location = cfg.location
        self.node_zone = pulumi.Output.from_input(cfg.zone)

        authorized = None
        if cfg.api_authorized_networks:
            authorized = gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(cidr_blocks=[
                gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=cidr,
                                                                                display_name=f"allowed-{i}")
                for i, cidr in enumerate(cfg.api_authorized_networks)])
        self.cluster = gcp.container.Cluster(
            name,
            name=cfg.cluster_name,
            project=cfg.project,
            location=cfg.location,
            node_locations=[self.node_zone] if cfg.regional else None,
            min_master_version=args.control_plane_version,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cfg.release_channel),
            # Our node pools are separate resources: changing one never replaces the cluster.
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=False,  # `pulumi destroy` must be able to remove it
            network=args.network.network_name,
            subnetwork=args.network.subnetwork_name,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=args.network.pods_range_name,
                services_secondary_range_name=args.network.services_range_name,
            ),
            # Dataplane V2 enforces NetworkPolicy (the training chart ships one) without Calico.
            datapath_provider="ADVANCED_DATAPATH",
            # GPUDirect pools attach extra VPCs to pods (GKE multi-networking; needs Dataplane V2).
            enable_multi_networking=True if multi_networking else None,
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,  # no public IPs on nodes; egress through Cloud NAT
                enable_private_endpoint=False,
                master_ipv4_cidr_block=cfg.network.master_cidr,
            ),
            master_authorized_networks_config=authorized,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{cfg.project}.svc.id.goog"),
            enable_shielded_nodes=True,
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcp_filestore_csi_driver_config=gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
                    enabled=True),
                # Off: nothing mounts a bucket (the trainer reads and writes gs:// itself); a driver
                # nobody uses is one more privileged DaemonSet on every node.
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=False),
                gce_persistent_disk_csi_driver_config=(
                    gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(enabled=True)),
            ),
            maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
                daily_maintenance_window=gcp.container.ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
                    start_time=MAINTENANCE_WINDOW_START),
                maintenance_exclusions=[gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name="no-minor-or-node-upgrades",
                    start_time=UPGRADE_EXCLUSION_START,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope="NO_MINOR_OR_NODE_UPGRADES", end_time_behavior="UNTIL_END_OF_SUPPORT"),
                )],
            ),
            # Image streaming: nodes start the multi-GB CUDA image before it is fully pulled.
            node_pool_defaults=gcp.container.ClusterNodePoolDefaultsArgs(
                node_config_defaults=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsArgs(
                    gcfs_config=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfigArgs(enabled=True))),
            resource_labels=dict(cfg.labels),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=list(args.services),
                # The release channel upgrades the control plane; the removed default pool's config
                # must not show as a diff either.
                ignore_changes=["minMasterVersion", "nodeConfig"]),
        )
        self.cluster_name = self.cluster.name
        self.cluster_location = self.cluster.location
        self.kubeconfig_json = pulumi.Output.secret(pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate,
        ).apply(lambda values: kubeconfig(*values)))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig_json,
            # Replace the provider (and every object in the cluster) only when the cluster changes.
            cluster_identifier=cfg.cluster_name,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfigJson": self.kubeconfig_json})
