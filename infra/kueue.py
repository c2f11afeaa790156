"""Kueue: the pinned Kueue release plus one ResourceFlavor, ClusterQueue and LocalQueue for training jobs.

A Job labelled `kueue.x-k8s.io/queue-name: <LocalQueue>` is created suspended and started once its
whole pod set fits in the ClusterQueue's quota: a multi-node job starts all at once or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import validation
from infra.resource_options import child_options
from infra.versions import KUEUE_API_VERSION, KUEUE_CHART

# The namespace and release name of the Kueue installation docs (`helm install kueue ... -n kueue-system`).
KUEUE_NAMESPACE = "kueue-system"
KUEUE_RELEASE_NAME = "kueue"
GPU_RESOURCE = "nvidia.com/gpu"
_QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
_QUOTA_FIELDS = {"cpu": "cpu_quota", "memory": "memory_quota", GPU_RESOURCE: "gpu_quota"}


@dataclass(frozen=True, kw_only=True)
class KueueArgs:
    provider: k8s.Provider
    namespace: pulumi.Input[str] = "default"  # where the LocalQueue lives (and the only one the queue admits)
    gpu_quota: int = 0
    cpu_quota: str = "64"
    memory_quota: str = "256Gi"
    node_labels: Mapping[str, str] = field(default_factory=dict)  # ResourceFlavor nodeLabels
    tolerations: Sequence[Mapping[str, str]] = ()  # ResourceFlavor tolerations, added to admitted pods
    # Beyond contracts.md:
    queue_name: str = "training"  # names both the LocalQueue and the ClusterQueue
    flavor_name: str = "training-nodes"
    queueing_strategy: str = "BestEffortFIFO"  # StrictFIFO: a big job at the head blocks smaller ones
    chart_values: Mapping[str, Any] = field(default_factory=dict)  # values for the Kueue chart itself
    # Quota for any other resource the pods request (e.g. ephemeral-storage): Kueue admits a
    # workload only when the ClusterQueue covers every resource it requests.
    other_quota: Mapping[str, str] = field(default_factory=dict)

    def validate(self, component: str) -> None:
        if not isinstance(self.provider, k8s.Provider):
            validation.fail(
                component, f"provider must be an explicit kubernetes.Provider, got {self.provider!r}"
            )
        validation.check_int(component, "gpu_quota", self.gpu_quota, minimum=0)
        validation.check_quantity(component, "cpu_quota", self.cpu_quota)
        validation.check_quantity(component, "memory_quota", self.memory_quota)
        for resource, quantity in self.other_quota.items():
            if resource in ("cpu", "memory", GPU_RESOURCE):
                validation.fail(component, f"other_quota must not name {resource}: use {_QUOTA_FIELDS[resource]}")
            validation.check_quantity(component, f"other_quota[{resource!r}]", quantity)
        validation.check_string_map(component, "node_labels", self.node_labels)
        validation.check_tolerations(component, "tolerations", self.tolerations)
        validation.check_dns_label(component, "queue_name", self.queue_name)
        validation.check_dns_label(component, "flavor_name", self.flavor_name)
        if isinstance(self.namespace, str):
            validation.check_dns_label(component, "namespace", self.namespace)
        if self.queueing_strategy not in _QUEUEING_STRATEGIES:
            validation.fail(
                component,
                f"queueing_strategy must be one of {list(_QUEUEING_STRATEGIES)}, got {self.queueing_strategy!r}",
            )


def flavor_spec(args: KueueArgs) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.node_labels:
        spec["nodeLabels"] = dict(args.node_labels)
    if args.tolerations:
        spec["tolerations"] = [dict(t) for t in args.tolerations]
    return spec


def cluster_queue_spec(args: KueueArgs, flavor_name: pulumi.Input[str]) -> dict[str, Any]:
    quotas = {"cpu": args.cpu_quota, "memory": args.memory_quota, GPU_RESOURCE: args.gpu_quota,
              **args.other_quota}
    return {
        # Least privilege: only workloads from the LocalQueue's namespace may use this quota.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": args.namespace}},
        "queueingStrategy": args.queueing_strategy,
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()],
                    }
                ],
            }
        ],
    }


class Kueue(pulumi.ComponentResource):
    """Kueue installed from its pinned chart, and a queue for training jobs."""

    local_queue_name: pulumi.Output[str]
    cluster_queue_name: pulumi.Output[str]

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate(f"Kueue {name!r}")
        super().__init__("trainstack:index:Kueue", name, None, opts)

        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name=KUEUE_RELEASE_NAME,
                namespace=KUEUE_NAMESPACE,
                create_namespace=True,
                chart=KUEUE_CHART.chart,
                version=KUEUE_CHART.version,
                values=dict(args.chart_values),
                # The release is ready once the controller (and its admission webhook) is; the
                # queues below are created only then, or the webhook would reject them.
                timeout=600,
            ),
            opts=child_options(self, args.provider, opts),
        )
        # Kueue's CRDs come with the release: every custom resource waits for it.
        after_release = child_options(self, args.provider, opts, depends_on=[release])

        flavor = k8s.apiextensions.CustomResource(
            f"{name}-flavor",
            api_version=KUEUE_API_VERSION,
            kind="ResourceFlavor",
            metadata={"name": args.flavor_name},
            spec=flavor_spec(args),
            opts=after_release,
        )
        flavor_name = flavor.metadata.apply(lambda m: m["name"])
        cluster_queue = k8s.apiextensions.CustomResource(
            f"{name}-cluster-queue",
            api_version=KUEUE_API_VERSION,
            kind="ClusterQueue",
            metadata={"name": args.queue_name},
            spec=cluster_queue_spec(args, flavor_name),
            opts=after_release,
        )
        self.cluster_queue_name = cluster_queue.metadata.apply(lambda m: m["name"])
        local_queue = k8s.apiextensions.CustomResource(
            f"{name}-local-queue",
            api_version=KUEUE_API_VERSION,
            kind="LocalQueue",
            metadata={"name": args.queue_name, "namespace": args.namespace},
            spec={"clusterQueue": self.cluster_queue_name},
            opts=after_release,
        )
        # Read from the LocalQueue so that a job given this name also depends on the queue existing.
        self.local_queue_name = local_queue.metadata.apply(lambda m: m["name"])
        self.register_outputs(
            {"localQueueName": self.local_queue_name, "clusterQueueName": self.cluster_queue_name}
        )
