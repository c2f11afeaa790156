"""Kueue, hosted: the pinned Kueue release and one queue for training jobs, on a cluster given by kubeconfig."""

import dataclasses
from dataclasses import dataclass
from typing import Any

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
from trainstack.infra.kubernetes.kueue import Kueue as InfraKueue
from trainstack.infra.kubernetes.kueue import KueueArgs as InfraKueueArgs


@dataclass(kw_only=True)
class KueueArgs:
    """Kueue and its ResourceFlavor, ClusterQueue and LocalQueue; unset inputs keep the component's defaults."""

    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text); every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes."""
    namespace: pulumi.Input[str] | None = None
    """Where the LocalQueue lives, and the only namespace the queue admits (default: default)."""
    gpu_quota: int | None = None
    """GPUs the queue admits at once (default 0)."""
    cpu_quota: str | None = None
    """CPUs the queue admits at once (default 64)."""
    memory_quota: str | None = None
    """Memory the queue admits at once (default 256Gi)."""
    node_labels: dict[str, str] | None = None
    """The ResourceFlavor's node labels (the GPU nodes')."""
    tolerations: list[Toleration] | None = None
    """The ResourceFlavor's tolerations, added to admitted pods."""
    queue_name: str | None = None
    """Names both the LocalQueue and the ClusterQueue (default training)."""
    flavor_name: str | None = None
    """The ResourceFlavor (default training-nodes)."""
    queueing_strategy: str | None = None
    """BestEffortFIFO or StrictFIFO (default BestEffortFIFO)."""
    chart_values: dict[str, Any] | None = None
    """Values for the Kueue chart itself."""


class Kueue(pulumi.ComponentResource):
    """Kueue (pinned chart) with a queue that starts a multi-node job's pods all at once or not at all."""

    local_queue_name: pulumi.Output[str]
    """The LocalQueue a job names (kueue.x-k8s.io/queue-name)."""
    cluster_queue_name: pulumi.Output[str]
    """The ClusterQueue holding the quota."""

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(KueueArgs, args)
        kueue_args = InfraKueueArgs(provider=stand_in_provider(), **given(
            namespace=args.namespace, gpu_quota=args.gpu_quota, cpu_quota=args.cpu_quota,
            memory_quota=args.memory_quota, node_labels=args.node_labels,
            tolerations=tuple(config_value(t) for t in args.tolerations) if args.tolerations is not None else None,
            queue_name=args.queue_name, flavor_name=args.flavor_name, queueing_strategy=args.queueing_strategy,
            chart_values=args.chart_values,
        ))
        kueue_args.validate(f"Kueue {name!r}")
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("Kueue"), name, None, moved_from_index("Kueue", opts))
        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        kueue = InfraKueue(name, dataclasses.replace(kueue_args, provider=provider),
                           opts=pulumi.ResourceOptions(parent=self))
        self.local_queue_name = kueue.local_queue_name
        self.cluster_queue_name = kueue.cluster_queue_name
        self.register_outputs({"localQueueName": self.local_queue_name, "clusterQueueName": self.cluster_queue_name})
