"""What a cloud hands the neutral layer: small typed handles, produced by one component, consumed by others.

A GPU node pool knows where its GPUs are; the device plugin, Kueue and the job only consume that
(`GpuPlacement`), never the cloud's constants. The same holds for the shared filesystem, the object
store and the workload's cloud identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

# Where a GPU pod asks for its GPUs, on every cloud (the NVIDIA device plugin's extended resource).
GPU_RESOURCE = "nvidia.com/gpu"
# The EFA device plugin's extended resource (aws/eks-charts stable/aws-efa-k8s-device-plugin; EKS user
# guide node-efa.html): the chart's gpuNetworking.mode efa asks for every EFA of the node by count.
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# gpuNetworking modes with GKE's GPUDirect wiring (RxDM sidecar, GPU VPC interfaces); efa has none.
GPU_DIRECT_MODES = ("tcpx", "tcpxo")


@dataclass(frozen=True, kw_only=True)
class GpuPlacement:
    """How a pod lands on a GPU node pool, and what it finds there."""

    node_selector: Mapping[str, str]  # labels every node of the pool carries
    tolerations: tuple[Mapping[str, str], ...]  # for the pool's taint (CPU pods never hold a GPU node up)
    gpus_per_node: int
    accelerator: str  # e.g. nvidia-tesla-t4, or the instance type on AWS: for humans and outputs
    # The chart's `resources` for a pod that takes the whole node (requests, limits, shmSize), when the
    # node type calls for more than the chart's defaults.
    pod_resources: Mapping[str, Any] = field(default_factory=dict)
    # What must exist before a GPU pod can be scheduled (the node pool itself).
    ready: Sequence[pulumi.Resource] = ()
    # The pool's most nodes (the autoscaler's bound): its queue's quota. None: unknown, the queue is
    # sized for the stack's own job instead.
    max_nodes: int | None = None
    # The pool's network topology, for Kueue's Topology Aware Scheduling (None: no TAS on this pool).
    topology: NodeTopology | None = None
    # A pool whose nodes come only through a ProvisioningRequest (GKE queued provisioning): the class
    # Kueue's admission check asks for, with or without a topology. None: the topology's, if any.
    provisioning_class: str | None = None


@dataclass(frozen=True, kw_only=True)
class NodeTopology:
    """A GPU pool's nested network domains as node labels, for Kueue's Topology Aware Scheduling.

    `levels` name the domains widest first, kubernetes.io/hostname (if listed) last: Kueue's Topology
    levels (kueue v0.19.2 apis/kueue/v1beta2/topology_types.go). Every node of the pool must carry
    every label, or Kueue leaves it out of the topology (pkg/util/tas/node.go NodeMatchesFlavor). Any
    cloud fills this in for its pools: GKE with its cloud.google.com/gce-topology-* labels, AWS with
    whatever labels its nodes carry.
    """

    levels: tuple[str, ...]
    # Kueue places pods by topology only on nodes that exist. A pool that scales from zero needs the
    # ProvisioningRequest admission check, so the autoscaler adds the nodes before Kueue assigns them
    # (kueue v0.19.2 site/content/en/docs/concepts/topology_aware_scheduling.md, "ClusterAutoscaler
    # support"): the class the cluster's autoscaler offers. None: the pool's nodes are already there.
    provisioning_class: str | None = None


@dataclass(frozen=True, kw_only=True)
class SharedStorage:
    """A ReadWriteMany filesystem the platform claims: by StorageClass (dynamic) or by PersistentVolume."""

    storage_class_name: pulumi.Input[str]  # "" with a pre-made PersistentVolume
    size: str  # the claim's request; a static volume binds only if its capacity covers it
    volume_name: pulumi.Input[str] | None = None  # the PersistentVolume to bind to, when static
    ready: Sequence[pulumi.Resource] = ()  # what the claim needs before it can bind (driver, mounts)


@dataclass(frozen=True, kw_only=True)
class ObjectStore:
    """The bucket that holds the prepared data set and the results to keep."""

    uri: pulumi.Input[str]  # s3://<bucket> or gs://<bucket>, no trailing slash
    name: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class WorkloadIdentity:
    """The cloud identity the job's Kubernetes service account takes (IRSA, GKE Workload Identity)."""

    service_account_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
