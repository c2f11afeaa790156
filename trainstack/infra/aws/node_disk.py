"""The local disk one EKS GPU node offers pods (its allocatable ephemeral-storage), estimated from the
node group's root volume as the EKS AL2023 kubelet configuration reserves it: awslabs/amazon-eks-ami
nodeadm internal/kubelet/config.go sets kubeReserved ephemeral-storage 1Gi and evictionHard
nodefs.available 10%, so allocatable = capacity - 1 GiB - 10%. The capacity the kubelet reports is the
root filesystem's, not the volume's: the AL2023 AMI's root volume holds a partition table, an EFI
partition and an XFS file system whose log and metadata take their share (awslabs/amazon-eks-ami), so
the estimate leaves FILESYSTEM_MARGIN of the volume out before the reservations. A template node larger
than a real node's allocatable would make the autoscaler add a node a pod does not fit on, then another.

Two uses: the cluster-autoscaler's node template (a group at size 0 has no node to read it from), and
the config-time check that the job's pod fits a node at all.
"""

from __future__ import annotations

import math

# kubernetes/autoscaler cluster-autoscaler-1.35.2 cloudprovider/aws/aws_manager.go buildNodeFromTemplate:
# a template node has cpu, memory, GPUs and pods from the instance type; any other resource only from
# this tag prefix, read from the ASG or (for a managed node group) from eks:DescribeNodegroup's tags.
NODE_TEMPLATE_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/"

_GIB = 2**30
# The share of the EBS volume the root filesystem does not offer (partitions, XFS log and metadata): a
# margin, generous for the volume sizes trainstack allows (20 GiB and up), not a measured figure.
FILESYSTEM_MARGIN = 0.02


def eks_allocatable_ephemeral_storage(root_volume_gib: int) -> str:
    """A node's allocatable ephemeral-storage for this root volume (GiB, as EBS sizes it), rounded down."""
    capacity = root_volume_gib * _GIB * (1 - FILESYSTEM_MARGIN)
    allocatable = capacity - _GIB - capacity / 10
    return f"{math.floor(allocatable / _GIB)}Gi"
