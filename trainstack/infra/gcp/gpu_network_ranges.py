"""The address blocks of the GPUDirect VPCs, and the check that the cluster's own ranges stay out of them.

A GPUDirect node has its primary NIC in the cluster's subnet and its GPU NICs (and, on A3 Ultra and
A4, a second gVNIC) in the GPU subnets below, all on one host: a pod, service, node or control-plane
address inside a GPU subnet is routed out of the wrong NIC (and GKE's multi-network refuses a pod
network that overlaps one). The GPU subnets are /20 blocks from GPU_NETWORKS_RANGE, in NIC order
(gpu_networks.py), so the check runs on the parsed config, before anything is created.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from trainstack.infra.config import NAMESPACE, ConfigError
from trainstack.infra.gcp.machine_types import GpuDirectProfile

if TYPE_CHECKING:
    from trainstack.infra.gcp.config import GpuPoolConfig, NetworkConfig

# 16 /20 blocks: room for the 8 networks of TCPXO (or the gVNIC and 8 RDMA subnets), away from the
# node subnet's default 10.10.0.0/20.
GPU_NETWORKS_RANGE = "192.168.0.0/16"
GPU_SUBNET_PREFIX = 20


def gpu_subnet_ranges(count: int, first: int = 0) -> list[str]:
    blocks = ipaddress.IPv4Network(GPU_NETWORKS_RANGE).subnets(new_prefix=GPU_SUBNET_PREFIX)
    return [str(block) for block in blocks][first:first + count]


def used_gpu_subnets(profiles: Iterable[GpuDirectProfile]) -> list[str]:
    """Every GPU subnet the stack creates: per GPUDirect mode, its extra gVNICs' then its GPU NICs'."""
    count = max((profile.extra_gvnics + profile.gpu_nics for profile in profiles), default=0)
    return gpu_subnet_ranges(count)


def check_cluster_ranges(ranges: Mapping[str, str], profiles: Iterable[GpuDirectProfile]) -> None:
    """`ranges`: config key suffix (network.podsCidr, ...) -> CIDR. One line for the first overlap."""
    subnets = [ipaddress.IPv4Network(block) for block in used_gpu_subnets(profiles)]
    for name, cidr in ranges.items():
        block = ipaddress.IPv4Network(cidr)
        overlapping = [str(subnet) for subnet in subnets if block.overlaps(subnet)]
        if overlapping:
            key = f"{NAMESPACE}:{name}"
            raise ConfigError(key, f"{cidr} overlaps the GPUDirect subnets {', '.join(overlapping)} (the GPU NICs "
                              f"of the GPUDirect pools are numbered from {GPU_NETWORKS_RANGE})",
                              f"set {key} to a block outside {GPU_NETWORKS_RANGE}, or remove it for its default "
                              f"(pulumi config rm --path '{key}')")


def check_gpu_network_ranges(network: NetworkConfig, pools: Sequence[GpuPoolConfig]) -> None:
    """The config's node, pod, service and control-plane ranges against its GPUDirect pools' subnets.
    With an existing network only the control-plane range is trainstack's (the others are that subnet's)."""
    ranges = {"network.masterCidr": network.master_cidr}
    if network.existing is None:
        ranges = {"network.subnetCidr": network.subnet_cidr, "network.podsCidr": network.pods_cidr,
                  "network.servicesCidr": network.services_cidr, **ranges}
    check_cluster_ranges(ranges, [pool.gpu_direct for pool in pools if pool.gpu_direct is not None])
