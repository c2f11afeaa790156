"""When a GPU pool gets Kueue's topology-aware placement by default: only where its capacity comes in one block.

Topology-aware scheduling (TAS) with an atomic ProvisioningRequest check can only admit a job when
(a) every node the autoscaler adds carries every topology label (Kueue v0.19.2 pkg/util/tas/node.go
NodeMatchesFlavor drops a node that lacks any level's label) and (b) the autoscaler serves the check's
ProvisioningRequest class for that pool. Both are documented for reserved capacity, which comes in
one block: Google's TAS guide describes `cloud.google.com/gce-topology-block` as the ID of the
*reserved* block a VM is in, and cluster-toolkit's TAS setup (examples/gke-a4) runs on a specific
reservation with no admission check at all. Neither is documented for capacity the autoscaler buys
VM by VM (on demand, spot). When either fails, the Workload stays pending: `pulumi up` succeeds and
the first job and the NCCL check never start, without an error anywhere.

So the default follows the capacity type, on every cloud: on where the capacity is one block (GCP
reservations; AWS on-demand capacity reservations and Capacity Blocks), off elsewhere. An explicit
`topologyAware: true` elsewhere is honoured, with a warning that names the risk and the fix.
Each cloud's config says which of its capacity types are one block and calls `topology_choice`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TopologyChoice:
    """Whether the pool gets TAS, and the warning to show when the choice carries the risk above."""

    enabled: bool
    warning: str | None = None


# What can go wrong off reserved capacity, as GKE shows it; a cloud where it shows otherwise says its own.
PENDING_RISK = ("Kueue leaves out nodes that lack any topology label, and the autoscaler may not serve the "
                "ProvisioningRequest check for this capacity, so the job and the NCCL check can stay pending "
                "with no error")


def topology_choice(key: str, requested: bool | None, capacity: str, *, one_block: bool,
                    default_on: bool = True, risk: str = PENDING_RISK,
                    instead: str = "use reserved capacity") -> TopologyChoice:
    """TAS for the pool at config `key` (`<namespace>:gpuPools.<name>`).

    `requested`: the pool's topologyAware value, None when unset. `capacity`: its capacity type, as the
    config spells it. `one_block`: whether that capacity comes as one reserved block. `default_on`:
    whether the machine type would get TAS at all by default (e.g. GPUDirect-RDMA machines on GKE).
    `risk` and `instead`: the warning's middle and its fix, as the cloud words them.
    """
    if requested is None:
        return TopologyChoice(default_on and one_block)
    if requested and not one_block:
        return TopologyChoice(True, (
            f"{key}.topologyAware is true on {capacity} capacity, which does not come as one reserved block: "
            f"{risk}. Fix: {instead}, or pulumi config set --path {key}.topologyAware false"))
    return TopologyChoice(requested)
