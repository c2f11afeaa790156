"""GkeCluster, hosted: the stacks' GKE cluster (trainstack.infra.gcp.cluster) on a VPC you give by name.

Private nodes, Workload Identity, Dataplane V2, the Filestore CSI driver, no default node pool: add
GkeGpuNodePool parts (and a CPU pool of your own) on its outputs. The settings go through the GKE stack's
parser and its preflight (APIs enabled, zone, the release channel's version) before anything is created.
The project's Compute Engine and Kubernetes Engine APIs must be enabled already (the preflight says so).
"""

import dataclasses
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.part_config import parsed_as_inputs, raw_config
from trainstack.infra.gcp import preflight
from trainstack.infra.gcp.cluster import GkeCluster as InfraGkeCluster
from trainstack.infra.gcp.cluster import GkeClusterArgs as InfraGkeClusterArgs
from trainstack.infra.gcp.config import parse_gcp_config
from trainstack.infra.gcp.handles import NetworkRef

PROVIDER_KEYS = {"project": "gcp:project", "region": "gcp:region"}
# Only the cluster's settings are the caller's: the stack parser's job and filestore stay off.
NO_JOB = {"enabled": False}


@dataclass(kw_only=True)
class GkeClusterArgs:
    """A GKE cluster on an existing VPC; unset inputs keep the GKE stack's defaults."""

    project: str
    """The Google Cloud project that holds the cluster and pays for it."""
    network: pulumi.Input[str]
    """The VPC's name or self link."""
    subnetwork: pulumi.Input[str]
    """The nodes' subnet (name or self link), with secondary ranges for pods and services."""
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
    labels: dict[str, str] | None = None
    """Extra labels on the cluster (plus app and pulumi-stack)."""


class GkeCluster(pulumi.ComponentResource):
    """A private GKE cluster without node pools (Workload Identity, Dataplane V2, Filestore CSI driver, a maintenance exclusion that keeps node upgrades away from running jobs)."""

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

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = args_from_inputs(GkeClusterArgs, args)
        raw = raw_config(
            {"gcp:project": args.project, "gcp:region": args.region},
            zone=args.zone, regional=args.regional, clusterName=args.cluster_name, releaseChannel=args.release_channel,
            kubernetesVersion=args.kubernetes_version, apiAuthorizedNetworks=args.api_authorized_networks,
            labels=args.labels, job=NO_JOB, sharedFilesystem=NO_JOB,
            network={"masterCidr": args.master_cidr} if args.master_cidr is not None else None)
        config = parsed_as_inputs(parse_gcp_config, raw, PROVIDER_KEYS, {"network.masterCidr": "masterCidr"})
        # The parser's default GPU pool is not this part's: no pools to check, multi-networking as asked.
        config = dataclasses.replace(config, gpu_pools=())
        super().__init__("trainstack:index:GkeCluster", name, None, opts)

        google = gcp.Provider(f"{name}-gcp", project=config.project, region=config.region,
                              default_labels=dict(config.labels), opts=pulumi.ResourceOptions(parent=self))
        checks = preflight.gate(config, google, parent=self)
        cluster = InfraGkeCluster(name, InfraGkeClusterArgs(
            config=config,
            network=NetworkRef(network_name=args.network, subnetwork_name=args.subnetwork,
                               pods_range_name=args.pods_range_name, services_range_name=args.services_range_name),
            services=(),
            control_plane_version=checks.control_plane_version,
            multi_networking=bool(args.multi_networking),
        ), opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}, depends_on=checks.ready))
        self.cluster_name = cluster.cluster_name
        self.location = pulumi.Output.from_input(cluster.location)
        self.node_zone = cluster.node_zone
        self.endpoint = cluster.cluster.endpoint
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.register_outputs({"clusterName": self.cluster_name, "location": self.location, "nodeZone": self.node_zone,
                               "endpoint": self.endpoint, "kubeconfig": self.kubeconfig})
