"""The extra VPCs of GPUDirect machines.

TCPX / TCPXO (A3 High / Mega): one VPC with one subnet per GPU NIC (4 or 8), each allowing all
traffic from inside its own subnet and nothing from outside; jumbo frames (MTU 8244) as on the A3
reference deployments.

RDMA (A3 Ultra, A4): one VPC with the zone's RoCE network profile and one subnet per RDMA NIC (8),
plus one ordinary VPC per extra gVNIC, as cluster-toolkit v1.95.0 examples/gke-a4/gke-a4.yaml builds
them (gke-a4-net-1 through modules/network/vpc, gke-a4-rdma-net through modules/network/gpu-rdma-vpc
with network_profile .../networkProfiles/<zone>-vpc-roce, MTU 8896, no firewall rules of its own).

NCCL traffic between nodes leaves through the GPU NICs, GPU memory to wire. GKE's Network objects
point at these by name (gpu_direct.py), so the names are set, not left to Pulumi's auto-naming.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.resource_options import child_options
from trainstack.infra.gcp.gpu_network_ranges import gpu_subnet_ranges

GPU_NETWORK_MTU = 8244
# cluster-toolkit's default for both the RDMA VPC (gpu-rdma-vpc) and the extra gVNIC VPC (vpc module).
RDMA_NETWORK_MTU = 8896
_INTERNAL_PROTOCOLS = ("tcp", "udp", "icmp")


def roce_network_profile(project: str, zone: str) -> str:
    """The zone's RoCE network profile (Compute Engine network profiles: <zone>-vpc-roce)."""
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


@dataclass(frozen=True, kw_only=True)
class GpuNetworksArgs:
    region: str
    name_prefix: str  # the cluster's name: GCE network names are per project
    gpu_nics: int  # GPU NICs per node (GpuDirectProfile.gpu_nics)
    # RDMA machines: the RoCE network profile of the nodes' zone (roce_network_profile); the GPU NICs
    # are then subnets of one RDMA VPC instead of one VPC each.
    rdma_network_profile: str | None = None
    extra_gvnics: int = 0  # gVNICs beyond the primary one, each in its own VPC


class GpuNetworks(pulumi.ComponentResource):
    # Per GPU NIC, in NIC order (on RDMA machines every NIC names the same VPC).
    network_names: list[pulumi.Output[str]]
    subnetwork_names: list[pulumi.Output[str]]
    # Per extra gVNIC, in NIC order: attached before the GPU NICs, as cluster-toolkit lists them.
    gvnic_network_names: list[pulumi.Output[str]]
    gvnic_subnetwork_names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: GpuNetworksArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GpuNetworks", name, None, opts)
        child = child_options(self, None, opts)
        self.network_names, self.subnetwork_names = [], []
        self.gvnic_network_names, self.gvnic_subnetwork_names = [], []
        if args.rdma_network_profile is None:
            for index, cidr in enumerate(gpu_subnet_ranges(args.gpu_nics)):
                network, subnet = self._vpc_with_subnet(name, f"{args.name_prefix}-gpunet-{index}", index, cidr,
                                                        args.region, GPU_NETWORK_MTU, child)
                self.network_names.append(network)
                self.subnetwork_names.append(subnet)
        else:
            for index, cidr in enumerate(gpu_subnet_ranges(args.extra_gvnics)):
                network, subnet = self._vpc_with_subnet(name, f"{args.name_prefix}-gvnic-{index + 1}",
                                                        f"gvnic-{index + 1}", cidr, args.region, RDMA_NETWORK_MTU,
                                                        child)
                self.gvnic_network_names.append(network)
                self.gvnic_subnetwork_names.append(subnet)
            rdma_name = f"{args.name_prefix}-net"
            rdma = gcp.compute.Network(
                f"{name}-rdma", name=rdma_name, auto_create_subnetworks=False, routing_mode="REGIONAL",
                mtu=RDMA_NETWORK_MTU, network_profile=args.rdma_network_profile, opts=child)
            # After the gVNIC blocks; RoCE VPCs take no firewall rules of trainstack's (upstream sets none).
            for index, cidr in enumerate(gpu_subnet_ranges(args.gpu_nics, first=args.extra_gvnics)):
                subnet = gcp.compute.Subnetwork(
                    f"{name}-rdma-{index}", name=f"{args.name_prefix}-sub-{index}", network=rdma.id, region=args.region,
                    ip_cidr_range=cidr, opts=child)
                self.network_names.append(rdma.name)
                self.subnetwork_names.append(subnet.name)
        self.register_outputs({"networkNames": self.network_names, "gvnicNetworkNames": self.gvnic_network_names})

    @staticmethod
    def _vpc_with_subnet(name: str, network_name: str, suffix: object, cidr: str, region: str, mtu: int,
                         child: pulumi.ResourceOptions) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        network = gcp.compute.Network(
            f"{name}-{suffix}", name=network_name, auto_create_subnetworks=False, routing_mode="REGIONAL",
            mtu=mtu, opts=child)
        subnet = gcp.compute.Subnetwork(
            f"{name}-{suffix}-subnet", name=f"{network_name}-subnet", network=network.id, region=region,
            ip_cidr_range=cidr, private_ip_google_access=True, opts=child)
        gcp.compute.Firewall(
            f"{name}-{suffix}-internal",
            network=network.name,
            direction="INGRESS",
            source_ranges=[cidr],  # only the other NICs of this VPC
            allows=[gcp.compute.FirewallAllowArgs(protocol=protocol) for protocol in _INTERNAL_PROTOCOLS],
            opts=child,
        )
        return network.name, subnet.name
