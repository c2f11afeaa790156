"""Handles an EKS part takes from another, as values: what a program that did not build that part can give.

The stack passes its real EksCluster, which carries the same attributes; a hosted part
(trainstack.components) builds this one from outputs another part or program handed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True, kw_only=True)
class EksClusterRef:
    """What EFS storage reads of its cluster (EksCluster's attributes of the same names)."""

    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]  # the cluster's IAM OIDC provider: the CSI driver's IRSA role trusts it
    oidc_issuer: pulumi.Input[str]  # without https://
    provider: k8s.Provider  # the cluster's Kubernetes provider: the volume goes there
    # The CSI add-on's controller needs a node to run on; None: the caller orders it (e.g. by the cluster's outputs).
    system_node_group: pulumi.Resource | None = None
