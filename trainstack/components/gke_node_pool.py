"""GkeGpuNodePool, hosted: one of the stacks' GKE GPU node pools (trainstack.infra.gcp.node_pools) on a
cluster given by its outputs (GkeCluster's clusterName, location, nodeZone).

Its outputs are what the training platform needs of it (TrainingPlatform's gpu: node selector,
tolerations, GPUs per node). GPUDirect (A3) pools attach GpuDirectNetworks' VPCs as extra NICs. The stack's
checks of a pool run before the node pool is created (gke_pool_preflight.py).
"""

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.gcp_part_config import part_config
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.gke_pool_preflight import pool_checks
from trainstack.components.gpu_direct import per_network
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.errors import InputError
from trainstack.infra.config.known_outputs import known_output
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp.config import GcpStackConfig, GpuPoolConfig
from trainstack.infra.gcp.handles import ClusterRef
from trainstack.infra.gcp.node_pools import GpuNodePool as InfraGpuNodePool
from trainstack.infra.gcp.node_pools import GpuNodePoolArgs as InfraGpuNodePoolArgs
from trainstack.infra.gcp.settings import GkeGpuPool

PROVIDER_KEYS = {"project": "gcp:project"}


@dataclass(kw_only=True)
class GkeGpuNodePoolArgs:
    """A GPU node pool on an existing GKE cluster; unset pool settings keep the GKE stack's defaults."""

    project: str | None = None
    """The cluster's Google Cloud project (default: the given gcp provider's; needed when no gcp provider is given)."""
    cluster_name: pulumi.Input[str]
    """The cluster's name (GkeCluster's clusterName)."""
    location: pulumi.Input[str]
    """The cluster's location (GkeCluster's location)."""
    node_zone: pulumi.Input[str]
    """The zone of the pool's nodes (GkeCluster's nodeZone)."""
    node_service_account_email: pulumi.Input[str]
    """The Google service account the nodes run as (logging, monitoring, pulling images), GkeCluster's nodeServiceAccountEmail; never the default Compute Engine account."""
    pool_name: str
    """The node pool's name (lowercase letters, digits and -), also its trainstack/node-pool label."""
    pool: GkeGpuPool | None = None
    """The machine, GPUs, disk, scaling and capacity (default: n1-standard-4 with one T4, spot, 0 to 2 nodes)."""
    gpu_network_names: pulumi.Input[list[str]] | None = None
    """GPUDirect machines only: the GPU VPCs in NIC order (GpuDirectNetworks' networkNames)."""
    gpu_subnetwork_names: pulumi.Input[list[str]] | None = None
    """GPUDirect machines only: their subnets in the same order (GpuDirectNetworks' subnetworkNames)."""
    labels: dict[str, str] | None = None
    """Extra labels on the pool's VMs (plus app and pulumi-stack)."""


class GkeGpuNodePool(pulumi.ComponentResource):
    """A GKE GPU node pool: spot or on-demand, scaling from zero, GKE-managed driver, the GPU taint, shielded nodes with Workload Identity."""

    pool_name: pulumi.Output[str]
    """The node pool's name, once it exists."""
    node_selector: pulumi.Output[dict[str, str]]
    """Labels every node of the pool carries (TrainingPlatform's gpu.nodeSelector: passed on in Python; written out in other languages, where it is plain)."""
    tolerations: pulumi.Output[list[dict[str, str]]]
    """Tolerations for the pool's GPU taint (TrainingPlatform's gpu.tolerations: passed on in Python; written out in other languages, where it is plain)."""
    gpus_per_node: pulumi.Output[int]
    """GPUs on each node (TrainingPlatform's gpu.gpusPerNode: passed on in Python; written out in other languages, where it is plain)."""
    accelerator: pulumi.Output[str]
    """The GPU type, e.g. nvidia-tesla-t4 (TrainingPlatform's gpu.accelerator: passed on in Python; written out in other languages, where it is plain)."""
    max: pulumi.Output[int]
    """The pool's most nodes (pool.max: the autoscaler's bound)."""

    def __init__(self, name: str, args: GkeGpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(GkeGpuNodePoolArgs, args)
        given, project, _, known = gcp_settings(opts, args.project, None, args.labels, takes_region=False)
        config = resolved_pool(args, project)
        pool = config.gpu_pools[0]
        gpu_networks = gpu_network_pairs(f"GkeGpuNodePool {name!r}", pool, args)
        super().__init__(token("GkeGpuNodePool"), name, None, moved_from_index("GkeGpuNodePool", opts))

        google = given or gcp.Provider(f"{name}-gcp", project=config.project, default_labels=dict(config.labels),
                              opts=pulumi.ResourceOptions(parent=self))
        # The stack's checks of this pool (machine type in the zone; GPUDirect's cluster version), before the pool.
        ready = pool_checks(pool, config.project, args.cluster_name, args.location, args.node_zone,
                            {f"gpuPools.{pool.name}": "pool", "the input zone": "the input nodeZone"},
                            pulumi.InvokeOutputOptions(parent=self, provider=google), known)
        node_pool = InfraGpuNodePool(name, InfraGpuNodePoolArgs(
            cluster=ClusterRef(cluster_name=args.cluster_name, location=args.location, node_zone=args.node_zone),
            service_account_email=args.node_service_account_email, labels=config.labels, config=pool,
            gpu_networks=gpu_networks,
        ), opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}, depends_on=ready))
        placement = node_pool.placement
        self.pool_name = node_pool.pool.name
        # Known now (decided by the inputs): TrainingPlatform's gpu may take them in Python (known_outputs.py).
        self.node_selector = known_output(dict(placement.node_selector))
        self.tolerations = known_output([dict(t) for t in placement.tolerations])
        self.gpus_per_node = known_output(placement.gpus_per_node)
        self.accelerator = known_output(placement.accelerator)
        self.max = pulumi.Output.from_input(pool.max_nodes)
        self.register_outputs({"poolName": self.pool_name, "nodeSelector": self.node_selector,
                               "tolerations": self.tolerations, "gpusPerNode": self.gpus_per_node,
                               "accelerator": self.accelerator, "max": self.max})


def resolved_pool(args: GkeGpuNodePoolArgs, project: str) -> GcpStackConfig:
    """The GKE stack's settings with this one pool, resolved (gcp_part_config): the name first, as its own
    input; then the pool's settings, each error named pool.<key>."""
    for key, pool in (("poolName", GkeGpuPool()), ("pool", args.pool or GkeGpuPool())):
        config = part_config(PROVIDER_KEYS, {f"gpuPools.{args.pool_name}": key}, project=project,
                             gpu_pools={args.pool_name: pool}, labels=args.labels)
    return config


def gpu_network_pairs(component: str, pool: GpuPoolConfig, args: GkeGpuNodePoolArgs) -> list[tuple[pulumi.Input[str], pulumi.Input[str]]]:
    """(network, subnetwork) per GPU NIC for a GPUDirect pool; nothing for any other, which must name none."""
    given = {"gpuNetworkNames": args.gpu_network_names, "gpuSubnetworkNames": args.gpu_subnetwork_names}
    if pool.gpu_direct is None:
        named = [key for key, value in given.items() if value is not None]
        if named:
            raise InputError(f"{component}: {named[0]}: {pool.machine_type} has no GPUDirect NICs to attach. Fix: "
                             f"remove {' and '.join(named)}, or choose an A3 machine type")
        return []
    gpu_nics = pool.gpu_direct.gpu_nics

    def counted(key: str, names: list) -> list:
        if len(names) != gpu_nics:
            raise InputError(f"{component}: {key}: {pool.machine_type} attaches {gpu_nics} GPU NICs, got "
                             f"{len(names)} names. Fix: list one per GPU NIC, in NIC order")
        return names

    lists = {}
    for key, value in given.items():
        if value is None:
            raise InputError(f"{component}: {key}: not set, and {pool.machine_type} attaches {gpu_nics} GPU NICs "
                             f"(GPUDirect-{pool.gpu_direct.mode.upper()}). Fix: pass GpuDirectNetworks' outputs, or "
                             "set pool.gpuDirect to none")
        # A literal list is counted now; an output once it resolves, before the node pool reads its entries.
        lists[key] = counted(key, value) if isinstance(value, list) else \
            pulumi.Output.from_input(value).apply(lambda names, key=key: counted(key, names))
    return list(zip(per_network(lists["gpuNetworkNames"], gpu_nics),
                    per_network(lists["gpuSubnetworkNames"], gpu_nics),
                    strict=True))
