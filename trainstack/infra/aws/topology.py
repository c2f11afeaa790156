"""Where an EFA node sits in the AWS network, as Kueue's Topology Aware Scheduling reads it.

EKS labels a node with its EC2 instance topology: `topology.k8s.aws/network-node-layer-1` (the widest
network node), `-2`, `-3`, and `-4` on types whose topology has four layers (EKS user guide
ml-workload-topology.html). The labels come from the AWS cloud controller manager EKS runs in the
control plane: it asks ec2:DescribeInstanceTopology (which AmazonEKSClusterPolicy grants; pulumi-eks
attaches that policy to the cluster role, nodejs/eks/cluster/cluster.ts) for the instance and sets one
label per network node, widest first, when it initializes the node (kubernetes/cloud-provider-aws
v1.32.0 and later, pkg/providers/v1/instances_v2.go getAdditionalLabels, pkg/providers/v1/topology.go;
k8s.io/cloud-provider controllers/node/node_controller.go applies the AdditionalLabels). A node
without them (a Region where EC2 describes no topology, an instance EC2 has no topology for) is left
out of every topology by Kueue (kueue v0.19.2 pkg/util/tas/node.go NodeMatchesFlavor), so a job that
waits for it is never admitted.

Nodes the cluster autoscaler adds from zero get the labels the same way, from the controller when they
join; the autoscaler's template node for a group at zero has none of them (cluster-autoscaler-1.35.2
cloudprovider/aws/aws_manager.go buildNodeFromTemplate: the generic labels (arch, os, instance type,
region, zone, hostname), `k8s.io/cluster-autoscaler/node-template/label/` ASG tags and the managed node
group's own labels, nothing from EC2's topology). It needs none: the ProvisioningRequest's pod templates
carry the flavor's node labels only, and Kueue assigns the topology after the nodes joined, from the
real nodes' labels (kueue v0.19.2 topology_aware_scheduling.md, "ClusterAutoscaler support").

On by default only where the capacity comes in one block (ON_DEMAND into an On-Demand Capacity
Reservation, or a Capacity Block): the autoscaler serves best-effort-atomic-scale-up on EKS (any cloud,
with --enable-provisioning-requests), but not atomically there: cloudprovider/aws/aws_cloud_provider.go
AwsNodeGroup.AtomicIncreaseSize returns ErrNotImplemented, and core/scaleup/orchestrator/executor.go
increaseSize then falls back to IncreaseSize (the ASG's desired size). So on plain ON_DEMAND or SPOT
capacity EC2 may launch part of the job's nodes into
the group, the request is reported provisioned anyway, and the job waits for the rest while the
launched nodes bill; a reservation or block holds every node the job needs before it asks. The same
rule as the GKE stack's (trainstack/infra/gcp), where only reserved capacity is one block.
"""

from __future__ import annotations

from typing import Any

import pulumi

from trainstack.infra.aws.efa import EfaInstanceType
from trainstack.infra.core.contracts import NodeTopology
from trainstack.infra.core.topology_capacity import topology_choice

NETWORK_NODE_LABEL_PREFIX = "topology.k8s.aws/network-node-layer-"  # cloud-provider-aws well_known_labels.go
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The cluster autoscaler's ProvisioningRequest class that adds a request's nodes in one scale-up or
# none (cluster-autoscaler-1.35.2 provisioningrequest/besteffortatomic). On AWS it sets the Auto
# Scaling group's desired size by the whole count at once (the AWS node group has no
# AtomicIncreaseSize: cloudprovider/aws/aws_cloud_provider.go), and reports the request provisioned
# once it has asked, before the instances run. check-capacity.autoscaling.x-k8s.io only looks for
# room on nodes that exist, which a group at zero never has.
ATOMIC_SCALE_UP_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
# On Kueue's controller pods while the cluster serves ProvisioningRequests (provisioning_kueue_values).
PROVISIONING_API_ANNOTATION = "trainstack/provisioning-request-api"
# Regions where EC2 describes instance topology (EC2 user guide ec2-instance-topology-prerequisites.html,
# "AWS Regions", read 2026-11-25; GovCloud and the European Sovereign Cloud are other partitions,
# which the stack refuses anyway). Elsewhere the cloud controller manager sets no topology label.
TOPOLOGY_REGIONS = frozenset({
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "af-south-1",
    "ap-southeast-3", "ap-east-1", "ap-south-2", "ap-southeast-4", "ap-south-1", "ap-northeast-3",
    "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "ca-central-1",
    "eu-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-2", "eu-north-1", "eu-central-2",
    "il-central-1", "me-south-1", "me-central-1", "sa-east-1",
})


def capacity_in_one_block(capacity_type: str, reservation_id: str | None) -> bool:
    """Whether the GPU group's capacity is held for it as one block: a Capacity Block, or ON_DEMAND into an
    On-Demand Capacity Reservation (gpuNodes.capacityReservationId)."""
    return capacity_type == "CAPACITY_BLOCK" or reservation_id is not None


def topology_aware_default(*, efa: bool, region: str, capacity_type: str, reservation_id: str | None) -> bool:
    """gpuNodes.topologyAware unless set: an EFA group, in a Region where EC2 describes instance topology,
    whose capacity comes in one block (see the module docstring)."""
    return efa and region in TOPOLOGY_REGIONS and capacity_in_one_block(capacity_type, reservation_id)


def warn_unless_one_block(key: str, *, topology_aware: bool, capacity_type: str, reservation_id: str | None) -> None:
    """An explicit topologyAware: true on capacity that does not come in one block is honoured, with the risk
    and the fix: the rule and its wording are trainstack/infra/core/topology_capacity.py's, the risk AWS's own."""
    choice = topology_choice(
        key, topology_aware, capacity_type, one_block=capacity_in_one_block(capacity_type, reservation_id),
        risk="the cluster autoscaler's best-effort-atomic-scale-up class is not atomic on AWS, so EC2 may launch "
             "only part of the job's nodes, which bill while the job stays pending with no error",
        instead=f"launch into a reservation or Capacity Block ({key}.capacityReservationId)")
    if choice.warning is not None:
        pulumi.log.warn(choice.warning)


def efa_topology(instance: EfaInstanceType, *, autoscaled: bool) -> NodeTopology:
    """The Kueue Topology levels of an EFA group's nodes: every network layer of the type, then the host.

    A group the cluster autoscaler sizes gets the ProvisioningRequest admission check: Kueue assigns a
    topology only over nodes that exist, so the autoscaler adds any that are missing first (kueue
    v0.19.2 site/content/en/docs/concepts/topology_aware_scheduling.md, "ClusterAutoscaler support").
    A group that already has the nodes (min > 0) gets the check too; the autoscaler then finds the
    capacity on them and adds nothing.
    """
    layers = tuple(f"{NETWORK_NODE_LABEL_PREFIX}{layer}" for layer in range(1, instance.topology_layers + 1))
    return NodeTopology(levels=(*layers, HOSTNAME_LABEL),
                        provisioning_class=ATOMIC_SCALE_UP_CLASS if autoscaled else None)


def serves_provisioning_requests(topology: NodeTopology | None, *, autoscaler: bool, queued: bool) -> bool:
    """Whether the cluster autoscaler must serve ProvisioningRequests: it runs (`autoscaler`), Kueue
    queues the jobs (`queued`), and the GPU group's Topology has the provisioning admission check (the
    autoscaler sizes the group: efa_topology)."""
    return autoscaler and queued and topology is not None and topology.provisioning_class is not None


def provisioning_kueue_values() -> dict[str, Any]:
    """A pod annotation on Kueue's controller while the stack serves ProvisioningRequests: switching
    topology-aware placement on in a running stack then restarts Kueue after the CRD exists, so that it
    enables its provisioning controller (kueue v0.19.2 cmd/kueue/main.go reads the API once, at start;
    the chart puts controllerManager.manager.podAnnotations on the Deployment's pods)."""
    return {"controllerManager": {"manager": {"podAnnotations": {PROVISIONING_API_ANNOTATION: "served"}}}}
