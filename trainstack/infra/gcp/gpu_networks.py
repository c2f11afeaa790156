"""The extra VPCs of GPUDirect machines: one VPC with one subnet per GPU NIC (4 for TCPX, 8 for TCPXO).

NCCL traffic between nodes leaves through these NICs, GPU memory to wire, at up to 200 Gbps each.
Each VPC allows all traffic from inside its own subnet and nothing from outside; jumbo frames
(MTU 8244) as on the A3 reference deployments. GKE's Network objects point at them by name
(gpu_direct.py), so the names are set, not left to Pulumi's auto-naming.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.resource_options import child_options

GPU_NETWORK_MTU = 8244
# 16 /20 blocks: room for the 8 networks of TCPXO, away from the node subnet's default 10.10.0.0/20.
GPU_NETWORKS_RANGE = "192.168.0.0/16"


def gpu_subnet_ranges(count: int) -> list[str]:
    return [str(block) for block in ipaddress.IPv4Network(GPU_NETWORKS_RANGE).subnets(new_prefix=20)][:count]


@dataclass(frozen=True, kw_only=True)
class GpuNetworksArgs:
    region: str
    name_prefix: str  # the cluster's name: GCE network names are per project
    count: int


class GpuNetworks(pulumi.ComponentResource):
    network_names: list[pulumi.Output[str]]
    subnetwork_names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: GpuNetworksArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GpuNetworks", name, None, opts)
        child = child_options(self, None, opts)
        self.network_names, self.subnetwork_names = [], []
        for index, cidr in enumerate(gpu_subnet_ranges(args.count)):
            network_name = f"{args.name_prefix}-gpunet-{index}"
            network = gcp.compute.Network(
                f"{name}-{index}", name=network_name, auto_create_subnetworks=False, routing_mode="REGIONAL",
                mtu=GPU_NETWORK_MTU, opts=child)
            subnet = gcp.compute.Subnetwork(
                f"{name}-{index}-subnet", name=f"{network_name}-subnet", network=network.id, region=args.region,
                ip_cidr_range=cidr, private_ip_google_access=True, opts=child)
            gcp.compute.Firewall(
                f"{name}-{index}-internal",
                network=network.name,
                direction="INGRESS",
                source_ranges=[cidr],  # only the other GPU NICs of this VPC
                allows=[gcp.compute.FirewallAllowArgs(protocol=protocol) for protocol in ("tcp", "udp", "icmp")],
                opts=child,
            )
            self.network_names.append(network.name)
            self.subnetwork_names.append(subnet.name)
        self.register_outputs({"networkNames": self.network_names})
