"""NvidiaDevicePlugin, hosted: NVIDIA's device plugin (pinned chart) on a cluster given by kubeconfig."""

import dataclasses
from dataclasses import dataclass

import pulumi

from trainstack.components.cluster_access import (
    check_cluster_access,
    cluster_provider,
    given,
    stand_in_provider,
)
from trainstack.components.kubernetes_args import Toleration
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.loader import config_value, from_inputs
from trainstack.infra.kubernetes.nvidia_device_plugin import NvidiaDevicePlugin as InfraNvidiaDevicePlugin
from trainstack.infra.kubernetes.nvidia_device_plugin import (
    NvidiaDevicePluginArgs as InfraNvidiaDevicePluginArgs,
)


@dataclass(kw_only=True)
class NvidiaDevicePluginArgs:
    """Where the device plugin's DaemonSet runs; unset inputs keep the component's defaults."""

    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text); every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes."""
    node_selector: dict[str, str] | None = None
    """Labels of the GPU nodes."""
    tolerations: list[Toleration] | None = None
    """Tolerations added to the chart's defaults (which tolerate nvidia.com/gpu)."""
    namespace: str | None = None
    """The plugin's namespace (default nvidia-device-plugin; not default)."""


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """NVIDIA's k8s-device-plugin DaemonSet, so GPU nodes advertise nvidia.com/gpu (GKE runs its own)."""

    namespace: pulumi.Output[str]
    """The plugin's namespace."""

    def __init__(self, name: str, args: NvidiaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(NvidiaDevicePluginArgs, args)
        plugin_args = InfraNvidiaDevicePluginArgs(provider=stand_in_provider(), **given(
            node_selector=args.node_selector,
            tolerations=tuple(config_value(t) for t in args.tolerations) if args.tolerations is not None else None,
            namespace=args.namespace,
        ))
        plugin_args.validate(f"NvidiaDevicePlugin {name!r}")
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("NvidiaDevicePlugin"), name, None, moved_from_index("NvidiaDevicePlugin", opts))
        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        plugin = InfraNvidiaDevicePlugin(name, dataclasses.replace(plugin_args, provider=provider),
                                         opts=pulumi.ResourceOptions(parent=self))
        self.namespace = plugin.namespace
        self.register_outputs({"namespace": self.namespace})
