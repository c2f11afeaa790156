"""Handles a GKE part takes from another, as values: what a program that did not build that part can give.

The stacks pass their real components (GkeNetwork, GkeCluster), which carry the same attributes; a
hosted part (trainstack.components) builds these from outputs another part or program handed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True, kw_only=True)
class NetworkRef:
    """What the cluster and Filestore read of their VPC (GkeNetwork's attributes of the same names)."""

    network_name: pulumi.Input[str]  # name or self link
    subnetwork_name: pulumi.Input[str]  # the nodes' subnet: the cluster's only
    pods_range_name: str = ""  # the subnet's secondary ranges: the cluster's only
    services_range_name: str = ""


@dataclass(frozen=True, kw_only=True)
class ClusterRef:
    """What node pools and Filestore read of their cluster (GkeCluster's attributes of the same names)."""

    cluster_name: pulumi.Input[str]
    location: pulumi.Input[str]  # the cluster's zone or region
    node_zone: pulumi.Input[str]  # where the nodes are
    cluster_location: pulumi.Input[str] | None = None  # where a regional-tier Filestore goes (default location)
    provider: k8s.Provider | None = None  # the cluster's Kubernetes provider: Filestore's volume needs it

    def __post_init__(self) -> None:
        if self.cluster_location is None:
            object.__setattr__(self, "cluster_location", self.location)
