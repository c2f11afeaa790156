"""GKE GPU pool rules that follow from how the pool gets its VMs (its `capacity`).

- Topology-aware placement (Kueue TAS with a ProvisioningRequest check) is on by default only on
  GPUDirect-RDMA pools whose capacity is a reservation (trainstack/infra/core/topology_capacity.py has
  the rule and why); an explicit `topologyAware: true` on other capacity gets a warning.
- FLEX_START pools are Dynamic Workload Scheduler queued provisioning, as cluster-toolkit v1.95.0
  examples/gke-consumption-options/dws-flex-start-queued-provisioning builds them: GKE adds their
  nodes only for a ProvisioningRequest of class queued-provisioning.gke.io, all at once, from zero
  (modules/compute/gke-node-pool/main.tf preconditions: total min nodes 0, no COMPACT placement,
  NO_RESERVATION; auto_upgrade false). So `min` > 0 is refused, and so is a FLEX_START pool without
  Kueue: nothing else would ask for its nodes, and every job there would stay pending.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from trainstack.infra.config import NAMESPACE, ConfigError, set_hint
from trainstack.infra.core.topology_capacity import topology_choice
from trainstack.infra.gcp.machine_types import GpuDirectProfile

# Capacity that comes as one reserved block (Google's TAS guide: gce-topology-block is the reserved block's ID).
ONE_BLOCK_CAPACITY = frozenset({"RESERVATION"})
QUEUED_CAPACITY = "FLEX_START"


def pool_topology_aware(key: str, requested: bool | None, capacity: str, gpu_direct: GpuDirectProfile | None) -> bool:
    """The pool's topologyAware: the capacity rule, on by default only for RDMA machines on a reservation."""
    choice = topology_choice(key, requested, capacity, one_block=capacity in ONE_BLOCK_CAPACITY,
                             default_on=gpu_direct is not None and gpu_direct.rdma)
    if choice.warning is not None:
        pulumi.log.warn(choice.warning)
    return choice.enabled


def check_queued_provisioning_pool(key: str, capacity: str, min_nodes: int) -> None:
    """A FLEX_START (queued provisioning) pool holds no node without a job: its min must be 0."""
    if capacity == QUEUED_CAPACITY and min_nodes > 0:
        raise ConfigError(f"{key}.min", f"{min_nodes} with capacity {QUEUED_CAPACITY}: queued provisioning adds a "
                          "job's nodes all at once for its ProvisioningRequest and keeps none without one",
                          set_hint(f"{key}.min", "0"))


def check_queued_pools_have_kueue(pools: Sequence[tuple[str, str]], queue: bool) -> None:
    """`pools`: (name, capacity) of every GPU pool. Queued provisioning needs Kueue's ProvisioningRequest."""
    queued = [name for name, capacity in pools if capacity == QUEUED_CAPACITY]
    if queued and not queue:
        raise ConfigError(f"{NAMESPACE}:job.queue", f"false, but gpuPools.{queued[0]} has capacity {QUEUED_CAPACITY}, "
                          "whose nodes GKE adds only for a ProvisioningRequest, which only Kueue makes here: its "
                          "jobs would stay pending", f"pulumi config set --path {NAMESPACE}:job.queue true, or use "
                          f"another capacity for {NAMESPACE}:gpuPools.{queued[0]}")
