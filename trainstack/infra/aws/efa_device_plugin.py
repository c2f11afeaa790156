"""EfaDevicePlugin: the AWS EFA Kubernetes device plugin (pinned chart), so EFA nodes advertise
vpc.amazonaws.com/efa and a pod that asks for them gets the /dev/infiniband devices mounted.

The EKS AL2023 NVIDIA AMI carries the EFA kernel driver and rdma-core (awslabs/amazon-eks-ami
templates/al2023/provisioners/install-efa.sh), not the device plugin: EKS user guide node-efa.html
installs it from aws/eks-charts. Runs on the GPU nodes only (their taint tolerated, their labels selected).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.core.resource_options import child_options
from trainstack.infra.core.versions import EFA_DEVICE_PLUGIN_CHART
from trainstack.infra.kubernetes.nvidia_device_plugin import DEFAULT_NAMESPACE as DEVICE_PLUGIN_NAMESPACE

# With the NVIDIA plugin: a namespace the stack's preview role may already read Helm state in (the
# access scope in aws/stack.py release_namespaces is immutable, so no new namespace is added to it).
NAMESPACE = DEVICE_PLUGIN_NAMESPACE


@dataclass(frozen=True, kw_only=True)
class EfaDevicePluginArgs:
    provider: k8s.Provider
    tolerations: Sequence[Mapping[str, str]] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)


def efa_device_plugin_values(args: EfaDevicePluginArgs) -> dict[str, Any]:
    """The chart's values (stable/aws-efa-k8s-device-plugin/values.yaml at v0.5.30): tolerations and
    nodeSelector are empty there, so ours are the whole list."""
    return {"tolerations": [dict(t) for t in args.tolerations], "nodeSelector": dict(args.node_selector)}


class EfaDevicePlugin(pulumi.ComponentResource):
    namespace: pulumi.Output[str]

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:EfaDevicePlugin", name, None, opts)
        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="aws-efa-k8s-device-plugin",
                namespace=NAMESPACE,
                create_namespace=True,
                chart=EFA_DEVICE_PLUGIN_CHART.chart,
                version=EFA_DEVICE_PLUGIN_CHART.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=EFA_DEVICE_PLUGIN_CHART.repo),
                values=efa_device_plugin_values(args),
            ),
            opts=child_options(self, args.provider, opts),
        )
        self.namespace = release.namespace
        self.register_outputs({"namespace": self.namespace})
