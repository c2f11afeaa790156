"""GKE node pools: a small system pool for the controllers (always up), and GPU pools that scale from 0.

Every node runs as the stack's node service account (no default Compute Engine account with Editor),
boots shielded, and serves pods the GKE metadata server (pods get Workload Identity, never the
node's credentials). GPU pools get the GKE-managed NVIDIA driver (no driver DaemonSet from a URL),
spot VMs by default, gVNIC, and the GPU taint that keeps CPU pods off them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.contracts import GPU_RESOURCE, GpuPlacement, NodeTopology
from trainstack.infra.gcp.cluster import GkeCluster
from trainstack.infra.gcp.config import GpuPoolConfig, SystemPoolConfig
from trainstack.infra.gcp.handles import ClusterRef
from trainstack.infra.gcp.pool_capacity import QUEUED_CAPACITY

POOL_LABEL = "trainstack/node-pool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"  # GKE sets it on GPU nodes
# GKE taints GPU nodes with this itself; declaring it keeps the pool free of a perpetual diff.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NO_SCHEDULE"}
GPU_TOLERATIONS = ({"key": GPU_RESOURCE, "operator": "Equal", "value": "present", "effect": "NoSchedule"},)
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # access is decided by IAM roles


LOCAL_SSD_LABEL = "cloud.google.com/gke-ephemeral-storage-local-ssd"  # GKE sets it where emptyDirs are on SSD
RESERVATION_KEY = "compute.googleapis.com/reservation-name"

# GKE's node labels for where a VM sits in the data center, widest first, as cluster-toolkit v1.95.0
# examples/gke-a4/kueue-configuration.yaml.tftpl gives them to Kueue's Topology.
GKE_TOPOLOGY_LEVELS = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
                       "cloud.google.com/gce-topology-host", "kubernetes.io/hostname")
# The cluster autoscaler's ProvisioningRequest class that adds all of a request's nodes or none
# (kubernetes/autoscaler cluster-autoscaler FAQ, "Supported ProvisioningClasses"): the GPU pools scale
# from zero, so Kueue asks for the nodes before it places the pods on them.
# On by default only for reserved capacity (pool_capacity.py).
ATOMIC_SCALE_UP_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GKE_TOPOLOGY = NodeTopology(levels=GKE_TOPOLOGY_LEVELS, provisioning_class=ATOMIC_SCALE_UP_CLASS)
# FLEX_START pools are Dynamic Workload Scheduler queued provisioning: GKE adds their nodes only for a
# ProvisioningRequest of this class and taints them (cluster-toolkit v1.95.0
# examples/gke-consumption-options/dws-flex-start-queued-provisioning: dws-queues.yaml.tftpl's
# ProvisioningRequestConfig, nccl-jobset-example.yaml's toleration; modules/compute/gke-node-pool
# enable_queued_provisioning "adds the cloud.google.com/gke-queued taint to the node pool").
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
QUEUED_TOLERATION = {"key": "cloud.google.com/gke-queued", "operator": "Equal", "value": "true",
                     "effect": "NoSchedule"}


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    cluster: GkeCluster | ClusterRef
    service_account_email: pulumi.Input[str]
    labels: Mapping[str, str] = field(default_factory=dict)  # billing labels on the VMs

    def with_labels(self, labels: Mapping[str, str]) -> NodePoolArgs:
        return dataclasses.replace(self, labels={**self.labels, **labels})


@dataclass(frozen=True, kw_only=True)
class GpuNodePoolArgs(NodePoolArgs):
    config: GpuPoolConfig
    # The GPU VPCs (network, subnetwork) attached as extra NICs, for GPUDirect machines.
    gpu_networks: Sequence[tuple[pulumi.Input[str], pulumi.Input[str]]] = ()


def capacity_settings(config: GpuPoolConfig) -> dict[str, object]:
    """node_config arguments for the pool's capacity choice."""
    if config.capacity == "RESERVATION":
        return {"reservation_affinity": gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY, values=[config.reservation])}
    no_reservation = gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
    if config.capacity == "SPOT":
        return {"spot": True, "reservation_affinity": no_reservation}
    if config.capacity == "FLEX_START":
        return {"flex_start": True, "reservation_affinity": no_reservation}
    return {}


def queued_provisioning(config: GpuPoolConfig) -> bool:
    return config.capacity == QUEUED_CAPACITY


def pool_topology(config: GpuPoolConfig) -> NodeTopology | None:
    """Kueue's view of the pool: its topology levels (TAS) and the ProvisioningRequest class that sizes it."""
    if not config.topology_aware:
        return None
    if queued_provisioning(config):
        return NodeTopology(levels=GKE_TOPOLOGY_LEVELS, provisioning_class=QUEUED_PROVISIONING_CLASS)
    return GKE_TOPOLOGY


def _node_config(args: NodePoolArgs, pool: str, machine_type: str, disk_size_gb: int, disk_type: str,
                 **gpu: object) -> gcp.container.NodePoolNodeConfigArgs:
    return gcp.container.NodePoolNodeConfigArgs(
        machine_type=machine_type,
        disk_size_gb=disk_size_gb,
        disk_type=disk_type,
        image_type="COS_CONTAINERD",
        service_account=args.service_account_email,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True),
        gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
        metadata={"disable-legacy-endpoints": "true"},
        labels={POOL_LABEL: pool},
        resource_labels=dict(args.labels),
        **gpu,
    )


class SystemNodePool(pulumi.ComponentResource):
    pool: gcp.container.NodePool

    def __init__(self, name: str, args: NodePoolArgs, config: SystemPoolConfig,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:SystemNodePool", name, None, opts)
        self.pool = gcp.container.NodePool(
            name,
            name="system",
            cluster=args.cluster.cluster_name,
            location=args.cluster.location,
            node_locations=[args.cluster.node_zone],
            # Without it the pool starts empty, and kube-system, Kueue and the DaemonSets wait for the
            # autoscaler to notice them; afterwards the autoscaler owns the count.
            initial_node_count=config.min_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=config.min_nodes, total_max_node_count=config.max_nodes),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=_node_config(args, "system", config.machine_type, config.disk_size_gb, "pd-balanced"),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )
        self.register_outputs({"name": self.pool.name})


class GpuNodePool(pulumi.ComponentResource):
    pool: gcp.container.NodePool
    placement: GpuPlacement  # what the job, Kueue and the platform consume

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GpuNodePool", name, None, opts)
        config = args.config
        accelerator = gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=config.accelerator_type,
            count=config.gpus_per_node,
            # Set explicitly: GKE's own default otherwise shows as a diff that replaces the pool.
            gpu_driver_installation_config=(
                gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version=config.driver_version)),
        )
        self.pool = gcp.container.NodePool(
            name,
            name=config.name,
            cluster=args.cluster.cluster_name,
            location=args.cluster.location,
            node_locations=[args.cluster.node_zone],
            # No job, no GPU node: the autoscaler adds nodes for pending GPU pods and removes idle ones.
            initial_node_count=config.min_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=config.min_nodes, total_max_node_count=config.max_nodes,
                # Any zone capacity (and any unused reservation) first: fewer spot preemptions.
                location_policy="ANY"),
            # Flex-start VMs are not repaired (GKE requires it off for them). Auto-upgrade stays on: on a
            # cluster in a release channel (ours always are) GKE refuses it off ("Node auto-upgrade defaults
            # to true and cannot be disabled", ReleaseChannel REST reference); GKE's queued-provisioning
            # command sets only --no-enable-autorepair. cluster-toolkit's "auto_upgrade: false" blueprint
            # runs on a cluster with no release channel.
            management=gcp.container.NodePoolManagementArgs(auto_repair=config.capacity != "FLEX_START",
                                                            auto_upgrade=True),
            queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
            if queued_provisioning(config) else None,
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
            if config.compact_placement else None,
            network_config=gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=[
                gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=network,
                                                                                   subnetwork=subnetwork)
                for network, subnetwork in args.gpu_networks]) if args.gpu_networks else None,
            # Replace a node only after removing one: GPU quota rarely has room for a surge node.
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=0, max_unavailable=1),
            node_config=_node_config(
                # On-demand GPUs are a deliberate choice in config; the label records it for policy and billing.
                args.with_labels({"trainstack-capacity": "on-demand"}) if config.capacity == "ON_DEMAND" else args,
                config.name, config.machine_type, config.disk_size_gb, config.disk_type,
                guest_accelerators=[accelerator],
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(**GPU_TAINT)],
                ephemeral_storage_local_ssd_config=gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                    local_ssd_count=config.local_ssd_count) if config.local_ssd_count else None,
                **capacity_settings(config),
            ),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )
        node_selector = {ACCELERATOR_LABEL: config.accelerator_type, POOL_LABEL: config.name}
        if config.local_ssd_count:
            node_selector[LOCAL_SSD_LABEL] = "true"
        self.placement = GpuPlacement(
            node_selector=node_selector,
            tolerations=(*GPU_TOLERATIONS, QUEUED_TOLERATION) if queued_provisioning(config) else GPU_TOLERATIONS,
            gpus_per_node=config.gpus_per_node,
            accelerator=config.accelerator_type,
            pod_resources=config.gpu_direct.pod_resources if config.gpu_direct else {},
            ready=[self.pool],
            max_nodes=config.max_nodes,  # total_max_node_count: the whole pool's bound
            topology=pool_topology(config),
            provisioning_class=QUEUED_PROVISIONING_CLASS if queued_provisioning(config) else None,
        )
        self.register_outputs({"name": self.pool.name})
