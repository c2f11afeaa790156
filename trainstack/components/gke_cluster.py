"""GkeCluster, hosted: the stacks' GKE cluster (trainstack.infra.gcp.cluster) on a VPC you give by name.

Private nodes, Workload Identity, Dataplane V2, the Filestore CSI driver. As in the GKE stack, GKE's default
pool is replaced by the stack's system pool (untainted CPU nodes, at least one always up: kube-system and
Kueue run there, the GPU pools' taint keeps them off GPU nodes), and the private control plane is let
through to the ports the training platform's charts serve webhooks and aggregated APIs on (Kueue's 9443
and 8082); both run as, and target, the nodes' service account. Add GkeGpuNodePool parts on its outputs.
The settings are checked and resolved as the GKE stack's (resolve_gcp), and its preflight runs (APIs enabled,
zone, the release channel's version), before anything is created. The project's Compute Engine and Kubernetes Engine APIs
must be enabled already (the preflight says so).
"""

import dataclasses
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.gcp_part_config import part_config
from trainstack.components.gcp_provider import gcp_settings, provider_zone
from trainstack.components.part_config import checked_as_inputs, shared_settings
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.gcp import preflight
from trainstack.infra.gcp.cluster import GkeCluster as InfraGkeCluster
from trainstack.infra.gcp.cluster import GkeClusterArgs as InfraGkeClusterArgs
from trainstack.infra.gcp.control_plane_firewall import ControlPlaneFirewall, ControlPlaneFirewallArgs
from trainstack.infra.gcp.handles import NetworkRef
from trainstack.infra.gcp.node_pools import NodePoolArgs, SystemNodePool
from trainstack.infra.gcp.settings import PROVIDER_FIELDS, GcpStackArgs, GkeNetwork, GkeSystemNodes

PROVIDER_KEYS = PROVIDER_FIELDS
RENAMES = {"network.masterCidr": "masterCidr"}  # the stack file's key -> this part's input
# What TrainingPlatform may install on this cluster, by control_plane_firewall's table keys: the rule opens
# the ports of all of them, since the cluster cannot know whether the platform's job queues (Kueue).
PLATFORM_CHARTS = (KUEUE_CHART.chart, "training-job")


@dataclass(kw_only=True)
class GkeClusterArgs:
    """A GKE cluster on an existing VPC; unset inputs keep the GKE stack's defaults."""

    project: str | None = None
    """The Google Cloud project that holds the cluster and pays for it (default: the given gcp provider's; needed when no gcp provider is given)."""
    network: pulumi.Input[str]
    """The VPC's name or self link."""
    subnetwork: pulumi.Input[str]
    """The nodes' subnet (name or self link), with secondary ranges for pods and services."""
    node_service_account_email: pulumi.Input[str]
    """The Google service account the system pool's nodes run as (never the default Compute Engine account); the control-plane firewall rule targets it, so give the GPU pools the same one."""
    pods_range_name: str
    """The subnet's secondary range for pods."""
    services_range_name: str
    """The subnet's secondary range for services."""
    region: str | None = None
    """The region (default us-central1)."""
    zone: str | None = None
    """The zone of the nodes (default us-central1-a in us-central1; other regions must name theirs)."""
    regional: bool | None = None
    """Replicate the control plane across the region's zones (default false)."""
    cluster_name: str | None = None
    """The GKE cluster's name (default trainstack-<stack>)."""
    release_channel: str | None = None
    """REGULAR, STABLE or RAPID (default REGULAR)."""
    kubernetes_version: str | None = None
    """The minimum minor version, e.g. 1.34; the newest patch the channel offers is used."""
    master_cidr: str | None = None
    """The control plane's private /28, unused in the VPC (default 172.16.0.32/28)."""
    api_authorized_networks: list[str] | None = None
    """CIDR blocks that may reach the cluster's endpoint (default: any, still authenticated by IAM)."""
    multi_networking: bool | None = None
    """GKE multi-networking, which GPUDirect (A3) pools need for their extra VPCs (default false)."""
    system_nodes: GkeSystemNodes | None = None
    """The untainted CPU pool for kube-system and Kueue (default e2-standard-4, 1 to 3 nodes)."""
    labels: dict[str, str] | None = None
    """Extra labels on the cluster and its system pool's VMs (plus app and pulumi-stack)."""


class GkeCluster(pulumi.ComponentResource):
    """A private GKE cluster with its system node pool and the control-plane firewall rule for Kueue (Workload Identity, Dataplane V2, Filestore CSI driver, a maintenance exclusion that keeps node upgrades away from running jobs)."""

    cluster_name: pulumi.Output[str]
    """The cluster's name, once it exists: GkeGpuNodePool's clusterName."""
    location: pulumi.Output[str]
    """The cluster's location (the zone, or the region when regional): GkeGpuNodePool's location."""
    node_zone: pulumi.Output[str]
    """The zone the node pools go to: GkeGpuNodePool's nodeZone, FilestoreShare's location for zonal tiers."""
    endpoint: pulumi.Output[str]
    """The control plane's IP address."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret; tokens from gke-gcloud-auth-plugin): the kubeconfig of the in-cluster parts."""
    system_pool_name: pulumi.Output[str]
    """The system node pool's name (system)."""
    control_plane_ports: pulumi.Output[list[int]]
    """The node ports the control plane may call (Kueue's webhook and visibility API): depend on the cluster before installing the platform."""

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(GkeClusterArgs, args)
        given, project, region, known = gcp_settings(opts, args.project, args.region, args.labels)
        zone = provider_zone(given, project, region, args.zone)
        # Only the cluster's settings are the caller's (no pools of its own: GkeGpuNodePool makes them).
        config = part_config(PROVIDER_KEYS, RENAMES, **{**shared_settings(args, GcpStackArgs), "project": project,
                             "region": region, "zone": zone, "network": GkeNetwork(master_cidr=args.master_cidr)})
        # The resolver's default GPU pool is not this part's: no pools to check, multi-networking as asked.
        config = dataclasses.replace(config, gpu_pools=())
        super().__init__(token("GkeCluster"), name, None, moved_from_index("GkeCluster", opts))

        google = given or gcp.Provider(f"{name}-gcp", project=config.project, region=config.region,
                              default_labels=dict(config.labels), opts=pulumi.ResourceOptions(parent=self))
        checks = preflight.gate(config, google, parent=self,
                                checked=lambda check: checked_as_inputs(check, PROVIDER_KEYS, RENAMES),
                                settings_known=known)
        cluster = InfraGkeCluster(name, InfraGkeClusterArgs(
            config=config,
            network=NetworkRef(network_name=args.network, subnetwork_name=args.subnetwork,
                               pods_range_name=args.pods_range_name, services_range_name=args.services_range_name),
            services=(),
            control_plane_version=checks.control_plane_version,
            multi_networking=bool(args.multi_networking),
        ), opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}, depends_on=checks.ready))
        # The GKE stack's own system pool and control-plane rule (trainstack/infra/gcp/stack.py): without the
        # pool nothing untainted runs kube-system or Kueue; without the rule Kueue's webhook times out.
        in_cluster = pulumi.ResourceOptions(parent=self, providers={"gcp": google}, depends_on=checks.ready)
        system_pool = SystemNodePool(f"{name}-system", NodePoolArgs(
            cluster=cluster, service_account_email=args.node_service_account_email, labels=config.labels),
            config.system_pool, opts=in_cluster)
        firewall = ControlPlaneFirewall(f"{name}-control-plane-calls", ControlPlaneFirewallArgs(
            network_name=args.network, master_cidr=config.network.master_cidr, charts=PLATFORM_CHARTS,
            node_service_account=args.node_service_account_email), opts=in_cluster)
        self.cluster_name = cluster.cluster_name
        self.location = pulumi.Output.from_input(cluster.location)
        self.node_zone = cluster.node_zone
        self.endpoint = cluster.cluster.endpoint
        # Whatever installs with this kubeconfig (TrainingPlatform, in any language) waits for the system pool and
        # the rule, as the stack's platform does (depends_on there).
        ready = [system_pool.pool.id, *([firewall.rule.id] if firewall.rule is not None else [])]
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(cluster.kubeconfig_json, *ready).apply(lambda values: values[0]))
        self.system_pool_name = system_pool.pool.name
        self.control_plane_ports = pulumi.Output.from_input(firewall.ports)
        self.register_outputs({"clusterName": self.cluster_name, "location": self.location, "nodeZone": self.node_zone,
                               "endpoint": self.endpoint, "kubeconfig": self.kubeconfig,
                               "systemPoolName": self.system_pool_name,
                               "controlPlanePorts": self.control_plane_ports})

