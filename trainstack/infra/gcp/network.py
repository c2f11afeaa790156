"""The cluster's network: a VPC with one subnet (secondary ranges for pods and services), and a Cloud
Router with Cloud NAT so private nodes can pull images; or an existing network from config."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.resource_options import child_options
from trainstack.infra.gcp.config import NetworkConfig

PODS_RANGE = "pods"
SERVICES_RANGE = "services"


@dataclass(frozen=True, kw_only=True)
class GkeNetworkArgs:
    region: str
    config: NetworkConfig


class GkeNetwork(pulumi.ComponentResource):
    network_name: pulumi.Output[str]  # what the cluster, Filestore and firewall rules name
    network_id: pulumi.Output[str]
    subnetwork_name: pulumi.Output[str]
    pods_range_name: str
    services_range_name: str

    def __init__(self, name: str, args: GkeNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GkeNetwork", name, None, opts)
        child = child_options(self, None, opts)
        existing = args.config.existing
        if existing is not None:
            self.network_name = pulumi.Output.from_input(existing.network)
            self.network_id = pulumi.Output.from_input(existing.network)
            self.subnetwork_name = pulumi.Output.from_input(existing.subnetwork)
            self.pods_range_name = existing.pods_range_name
            self.services_range_name = existing.services_range_name
        else:
            network = gcp.compute.Network(name, auto_create_subnetworks=False, routing_mode="REGIONAL", opts=child)
            subnet = gcp.compute.Subnetwork(
                f"{name}-nodes",
                network=network.id,
                region=args.region,
                ip_cidr_range=args.config.subnet_cidr,
                # Private nodes reach Google APIs (Artifact Registry, GCS) without NAT.
                private_ip_google_access=True,
                secondary_ip_ranges=[
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE,
                                                               ip_cidr_range=args.config.pods_cidr),
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE,
                                                               ip_cidr_range=args.config.services_cidr),
                ],
                opts=child,
            )
            router = gcp.compute.Router(f"{name}-router", network=network.id, region=args.region, opts=child)
            gcp.compute.RouterNat(
                f"{name}-nat",
                router=router.name,
                region=args.region,
                # Egress for images outside Google (Docker Hub, nvcr.io) from nodes without public IPs.
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
                opts=child,
            )
            self.network_name = network.name
            self.network_id = network.id
            self.subnetwork_name = subnet.name
            self.pods_range_name = PODS_RANGE
            self.services_range_name = SERVICES_RANGE
        self.register_outputs({"networkName": self.network_name, "subnetworkName": self.subnetwork_name})
