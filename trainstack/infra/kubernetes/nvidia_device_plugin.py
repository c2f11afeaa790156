"""NvidiaDevicePlugin: NVIDIA's k8s-device-plugin DaemonSet (pinned chart), so nodes advertise nvidia.com/gpu.

Needed where the node image does not ship the plugin (EKS AL2023 NVIDIA AMIs, plain Ubuntu nodes);
GKE installs its own and does not need this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.core import namespaces, validation
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.core.versions import NVIDIA_DEVICE_PLUGIN_CHART

DEFAULT_NAMESPACE = namespaces.NVIDIA_DEVICE_PLUGIN  # the chart refuses the default namespace

# The chart's own default tolerations (deployments/helm/nvidia-device-plugin/values.yaml at v0.20.0).
# Helm replaces lists instead of merging them, so they are repeated here before the caller's.
CHART_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True, kw_only=True)
class NvidiaDevicePluginArgs:
    provider: k8s.Provider
    tolerations: Sequence[Mapping[str, str]] = ()  # added to the chart's defaults
    node_selector: Mapping[str, str] = field(default_factory=dict)  # labels of the GPU nodes
    # Optional, with defaults:
    namespace: str = DEFAULT_NAMESPACE

    def validate(self, component: str) -> None:
        if not isinstance(self.provider, k8s.Provider):
            validation.fail(
                component, f"provider must be an explicit kubernetes.Provider, got {self.provider!r}"
            )
        validation.check_tolerations(component, "tolerations", self.tolerations)
        validation.check_string_map(component, "node_selector", self.node_selector)
        validation.check_dns_label(component, "namespace", self.namespace)
        if self.namespace == "default":
            validation.fail(component, "namespace must not be 'default' (the chart refuses it)")


def device_plugin_values(args: NvidiaDevicePluginArgs) -> dict[str, Any]:
    tolerations = [dict(t) for t in CHART_DEFAULT_TOLERATIONS]
    tolerations += [dict(t) for t in args.tolerations if dict(t) not in tolerations]
    values: dict[str, Any] = {"tolerations": tolerations}
    if args.node_selector:
        values["nodeSelector"] = dict(args.node_selector)
        # The chart's default affinity asks for node-feature-discovery labels, which nodes without NFD
        # never get; with a node selector those terms are replaced by the selector's (lists replace).
        values["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": key, "operator": "In", "values": [value]}
                                for key, value in sorted(args.node_selector.items())
                            ]
                        }
                    ]
                }
            }
        }
    return values


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """The device plugin DaemonSet on the GPU nodes."""

    namespace: pulumi.Output[str]

    def __init__(
        self, name: str, args: NvidiaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args.validate(f"NvidiaDevicePlugin {name!r}")
        super().__init__("trainstack:index:NvidiaDevicePlugin", name, None, opts)

        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="nvidia-device-plugin",
                namespace=args.namespace,
                create_namespace=True,
                chart=NVIDIA_DEVICE_PLUGIN_CHART.chart,
                version=NVIDIA_DEVICE_PLUGIN_CHART.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=NVIDIA_DEVICE_PLUGIN_CHART.repo),
                values=device_plugin_values(args),
            ),
            opts=child_options(self, args.provider, opts),
        )
        self.namespace = release.namespace
        self.register_outputs({"namespace": self.namespace})
