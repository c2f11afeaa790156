"""EFA (Elastic Fabric Adapter) GPU machines: what each type has, and the network interfaces it boots with.

The one table of the EFA types trainstack builds node groups for. Sources:
- GPUs and their model: the EC2 accelerated computing instance types page
  (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html): p5 8 x H100, p5e/p5en 8 x H200, p6-b200 8 x B200.
- EFA interfaces = network cards (one EFA per card): the EC2 user guide, "Network cards"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-eni.html#network-cards) and "EFA configuration for
  P5 and P5e instances" (efa-acc-inst-types.html#efa-for-p5, 32 EFA devices); ec2:DescribeInstanceTypes
  NetworkInfo.MaximumNetworkCards / EfaInfo.MaximumEfaInterfaces answer the same, and preflight.py asks
  the account before anything is created, so a wrong row here fails the preview, not the launch.
- GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA): "Supported instance types" of the EFA page
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types): RDMA read and write on
  p5/p5e (Nitro v4), p5en (Nitro v5) and p6-b200 (Nitro v6).
- Network topology layers: the EC2 user guide, "Prerequisites for Amazon EC2 topology"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html, "Instance types"):
  DescribeInstanceTopology returns 3 network nodes for p5, p5e and p5en, 4 for p6-b200; EKS labels a
  node with one topology.k8s.aws/network-node-layer-N per node (trainstack/infra/aws/topology.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.infra.core.contracts import EFA_RESOURCE

__all__ = ["EFA_INSTANCE_TYPES", "EFA_POD_RESOURCES", "EFA_RESOURCE", "NCCL_MIN_BUS_BANDWIDTH_GBPS", "EfaInstanceType",
           "efa_network_interfaces"]


@dataclass(frozen=True)
class EfaInstanceType:
    gpus: int
    gpu: str  # as trainstack/infra/aws/cost.py GPU_OF_FAMILY names it
    efa_interfaces: int  # network cards, one EFA each
    gpudirect_rdma: bool  # RDMA read and write: NCCL moves GPU memory over EFA without a host copy
    topology_layers: int  # network nodes in the instance's EC2 topology, widest first


EFA_INSTANCE_TYPES: Mapping[str, EfaInstanceType] = {
    "p5.48xlarge": EfaInstanceType(gpus=8, gpu="H100", efa_interfaces=32, gpudirect_rdma=True, topology_layers=3),
    "p5e.48xlarge": EfaInstanceType(gpus=8, gpu="H200", efa_interfaces=32, gpudirect_rdma=True, topology_layers=3),
    "p5en.48xlarge": EfaInstanceType(gpus=8, gpu="H200", efa_interfaces=16, gpudirect_rdma=True, topology_layers=3),
    "p6-b200.48xlarge": EfaInstanceType(gpus=8, gpu="B200", efa_interfaces=8, gpudirect_rdma=True, topology_layers=4),
}
DEFAULT_EFA_INSTANCE_TYPE = "p5.48xlarge"
# The NCCL check's bar (GB/s, one all-reduce of 512M across two nodes): the chart's profiles/eks-efa.yaml
# ncclCheck.minBusBandwidthGBps, where the reasoning is written (aws/aws-k8s-tester#503: about 124 GB/s
# average over all_reduce_perf's whole range on two p5.48xlarge; sockets on the ENA cannot pass 12.5).
NCCL_MIN_BUS_BANDWIDTH_GBPS = 100
# The chart's `resources` for the one pod per EFA node. All four types have 192 vCPUs and 2048 GiB
# (EC2 accelerated computing instance types page); the pod leaves about a sixth of each to the
# kubelet's reservations (EKS AL2023 nodeadm kubeReserved) and the DaemonSets (VPC CNI, EFA and NVIDIA
# device plugins, EFS CSI node). A real node's allocatable (kubectl describe node) is the check.
EFA_POD_RESOURCES: Mapping[str, object] = {
    "requests": {"cpu": "160", "memory": "1600Gi"}, "limits": {"memory": "1800Gi"}, "shmSize": "200Gi"}


def efa_network_interfaces(count: int, security_group_ids: Sequence[pulumi.Input[str]]
                           ) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One interface per network card, as terraform-aws-modules/terraform-aws-eks v21.19.0
    modules/eks-managed-node-group/main.tf builds them with enable_efa_support and enable_efa_only
    (its defaults, efa_indices [0]): card 0 device 0 an `efa` interface (EFA with ENA: the node's
    primary interface, which must carry IP), cards 1..n-1 device 1 `efa-only` interfaces (EFA
    devices without an IP address, so they use no subnet addresses). Every interface carries the
    same security groups (the cluster's and the EFA group's), as the module does.
    efa-only needs the VPC CNI v1.18.4 or later (the module's enable_efa_only note). The EC2 user guide's
    current text (efa-acc-inst-types.html) puts the other cards' efa-only interfaces on device index 0
    instead, and an older revision on 1, as the module does; which one EKS's launch accepts on every type
    only a real launch shows (docs/aws.md).
    """
    groups = list(security_group_ids)
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=0 if card == 0 else 1,
            interface_type="efa" if card == 0 else "efa-only",
            associate_public_ip_address="false",
            delete_on_termination="true",
            description=f"EFA{'' if card == 0 else '-only'} network interface {card}",
            security_groups=groups,
        )
        for card in range(count)
    ]
