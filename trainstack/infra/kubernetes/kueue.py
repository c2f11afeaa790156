"""Kueue: the pinned Kueue release plus, per GPU pool, a ResourceFlavor, ClusterQueue and LocalQueue.

A Job labelled `kueue.x-k8s.io/queue-name: <LocalQueue>` is created suspended and started once its
whole pod set fits in the ClusterQueue's quota: a multi-node job starts all at once or not at all
(kubernetes-sigs/kueue v0.19.2 pkg/controller/jobframework/defaults.go ApplyDefaultForSuspend, called
from pkg/controller/jobs/job/job_webhook.go: the Job is suspended on creation, so no pod exists and
no autoscaler sees one until Kueue admits it and unsuspends the Job).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.core import namespaces, validation
from trainstack.infra.core.contracts import NodeTopology
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.core.versions import KUEUE_API_VERSION, KUEUE_CHART
from trainstack.infra.kubernetes.training_job import deep_merge

KUEUE_NAMESPACE = namespaces.KUEUE
KUEUE_RELEASE_NAME = "kueue"
GPU_RESOURCE = "nvidia.com/gpu"
_QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
# The chart's own controllerManagerConfigYaml (kubernetes-sigs/kueue v0.19.2 charts/kueue/values.yaml), but:
# - only the batch/job integration: the chart then makes the Pod, Deployment and StatefulSet webhooks
#   failurePolicy Ignore (templates/webhook/manifests.yaml "if has \"pod\" ..."), so while Kueue is not
#   ready nothing but a Job is refused (the autoscaler, the device plugin, GKE's add-ons start as usual);
# - managedJobsNamespaceSelector: the job webhooks (failurePolicy Fail) select the training namespace
#   only, so an unready Kueue blocks no other namespace's Jobs;
# - waitForPodsReady with a longer timeout (WAIT_FOR_PODS_READY).
#
# An admitted job whose pods never all become ready (an image that cannot be pulled, a pod that cannot be
# placed) would hold its GPU nodes and quota for ever: the Job controller counts only pods that ended
# (kubernetes/kubernetes#122300). Kueue v0.19.2 turns waitForPodsReady on by default (apis/config/v1beta2/
# defaults.go: timeout 30m, recoveryTimeout = timeout), so it is set here, explicitly: an hour for all pods
# to be ready after admission (a GPU node scale-up plus a multi-GB image pull take well under that; 30
# minutes is tight for a slow spot scale-up), then Kueue evicts the workload (nodes and quota freed) and
# requeues it after 60 s, 120 s, 240 s, ... up to backoffMaxSeconds (an hour) between tries. A running
# job's lost pod gets two hours to be back (recoveryTimeout): longer than the survivors of a job of fixed
# size wait for it themselves (2 x job.joinTimeoutSeconds, then they fail and count), while an elastic job
# trains on without it meanwhile.
# No backoffLimitCount: "When it is null, the workloads will repeatedly and endless re-queueing"
# (configuration_types.go RequeuingStrategy). With a count, pkg/controller/core/workload_controller.go
# (triggerDeactivation) deactivates the workload once requeueState.count reaches it, and the count is
# cleared only on deactivation, never on success: a queued job on a spot pool whose pods wait for nodes
# during a capacity shortage of a few hours (pods without a node cost nothing) would be deactivated, and
# so would a long job after as many lost-pod recoveries in its life. The case a limit was meant for, an
# image that cannot be pulled, is caught before it costs: `submit` checks the image in the stack's
# registry, and `list` shows "not starting: ImagePullBackOff ..." for the user to cancel.
# Fields: apis/config/v1beta2/configuration_types.go WaitForPodsReady, RequeuingStrategy.
WAIT_FOR_PODS_READY = {
    "timeout": "60m",
    "recoveryTimeout": "120m",
    "blockAdmission": False,
    "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
}


def manager_config_yaml(namespace: str) -> str:
    """The Kueue controller's Configuration for a cluster whose queued jobs all live in `namespace`."""
    return json.dumps({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        "managedJobsNamespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "integrations": {"frameworks": ["batch/job"]},
        "waitForPodsReady": WAIT_FOR_PODS_READY,
    }, indent=2, sort_keys=True)  # JSON is YAML: the chart reads it with fromYaml


def release_values(args: KueueArgs) -> dict[str, Any]:
    """The Kueue chart's values: our manager configuration, under anything `args.chart_values` sets."""
    config = pulumi.Output.from_input(args.namespace).apply(manager_config_yaml)
    return deep_merge({"managerConfig": {"controllerManagerConfigYaml": config}}, args.chart_values)


_QUOTA_FIELDS = {"cpu": "cpu_quota", "memory": "memory_quota", GPU_RESOURCE: "gpu_quota"}
# Kueue's built-in admission check controller for cluster-autoscaler ProvisioningRequests
# (kueue v0.19.2 apis/kueue/v1beta2 ProvisioningRequestControllerName).
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_TOPOLOGY_LEVELS = 16  # Topology spec.levels maxItems (kueue v0.19.2 topology_types.go)
# A node label key: an optional DNS-subdomain prefix and a name (Topology's nodeLabel pattern).
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")


def check_topology(component: str, topology: NodeTopology | None) -> None:
    """The rules Kueue's Topology CRD enforces (topology_types.go), checked before anything is created."""
    if topology is None:
        return
    levels = topology.levels
    if not levels or len(levels) > MAX_TOPOLOGY_LEVELS:
        validation.fail(component, f"topology.levels must list 1 to {MAX_TOPOLOGY_LEVELS} node labels, got {len(levels)}")
    for level in levels:
        if not isinstance(level, str) or len(level) > 316 or not _LABEL_KEY.fullmatch(level):
            validation.fail(component, f"topology.levels: {level!r} is not a node label key")
    if len(set(levels)) != len(levels):
        validation.fail(component, f"topology.levels must not repeat a label, got {list(levels)}")
    if HOSTNAME_LABEL in levels[:-1]:
        validation.fail(component, f"topology.levels: {HOSTNAME_LABEL} can only be the last (lowest) level")
    if topology.provisioning_class is not None and not topology.provisioning_class:
        validation.fail(component, "topology.provisioning_class must be a ProvisioningRequest class name or None")


def topology_spec(topology: NodeTopology) -> dict[str, Any]:
    return {"levels": [{"nodeLabel": level} for level in topology.levels]}


# How often and how fast Kueue asks again for a workload's nodes. A request that fails, or whose
# booking expires before the nodes join (the autoscaler's 10-minute reservation,
# cluster-autoscaler-1.35.2 processors/provreq/processor.go), is retried after a backoff of
# base*2^(n-1) seconds, capped at the max; past backoffLimitCount retries Kueue rejects the check and
# deactivates the workload (.spec.active=false) until someone reactivates it. Kueue's default of 3
# retries (60 s base, 1800 s max) gives up within about an hour, while scarce GPU capacity can take
# days: each round lasts the 10-minute booking (or until the request fails) plus a backoff of up to
# 10 minutes, so 1000 retries keep a workload asking for two weeks or more, and one request per
# workload every 10 minutes at most is no load on the autoscaler. Fields, int32 with no other
# bound: kueue v0.19.2 apis/kueue/v1beta2/provisioningrequestconfig_types.go
# ProvisioningRequestRetryStrategy; its use: pkg/controller/admissionchecks/provisioning/controller.go.
PROVISIONING_RETRY_STRATEGY = {"backoffLimitCount": 1000, "backoffBaseSeconds": 60, "backoffMaxSeconds": 600}


def provisioning_config_spec(provisioning_class: str) -> dict[str, Any]:
    """ProvisioningRequestConfig: the autoscaler provisions the GPU nodes a workload needs before Kueue
    assigns its pods to them (kueue v0.19.2 site/content/en/docs/concepts/admission_check/provisioning_request.md)."""
    return {"provisioningClassName": provisioning_class, "managedResources": [GPU_RESOURCE],
            "retryStrategy": dict(PROVISIONING_RETRY_STRATEGY)}


@dataclass(frozen=True, kw_only=True)
class KueueArgs:
    provider: k8s.Provider
    namespace: pulumi.Input[str] = "default"  # where the LocalQueue lives (and the only one the queue admits)
    gpu_quota: int = 0
    cpu_quota: str = "64"
    memory_quota: str = "256Gi"
    node_labels: Mapping[str, str] = field(default_factory=dict)  # ResourceFlavor nodeLabels
    tolerations: Sequence[Mapping[str, str]] = ()  # ResourceFlavor tolerations, added to admitted pods
    # Optional, with defaults:
    queue_name: str = "training"  # names both the LocalQueue and the ClusterQueue
    flavor_name: str = "training-nodes"
    queueing_strategy: str = "BestEffortFIFO"  # StrictFIFO: a big job at the head blocks smaller ones
    chart_values: Mapping[str, Any] = field(default_factory=dict)  # values for the Kueue chart itself
    # Quota for any other resource the pods request (e.g. ephemeral-storage): Kueue admits a
    # workload only when the ClusterQueue covers every resource it requests.
    other_quota: Mapping[str, str] = field(default_factory=dict)
    # Further queues, one per further GPU pool, in the same namespace: the fields above are the first's.
    more_queues: Sequence[PoolQueue] = ()
    # Topology Aware Scheduling on this queue's flavor: a Topology of these node labels, which the
    # flavor names (and a ProvisioningRequest admission check when the cluster autoscaler sizes the pool).
    topology: NodeTopology | None = None
    # A pool whose nodes come only through a ProvisioningRequest (GKE queued provisioning): the class
    # of the admission check, with or without a topology. None: the topology's class, if any.
    provisioning_class: str | None = None

    @property
    def admission_class(self) -> str | None:
        """The ProvisioningRequest class this queue's admission check asks for (None: no check)."""
        return self.provisioning_class or (self.topology.provisioning_class if self.topology else None)

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
        check_topology(component, self.topology)
        if self.provisioning_class is not None and not self.provisioning_class:
            validation.fail(component, "provisioning_class must be a ProvisioningRequest class name or None")
        if self.topology is not None and not self.node_labels:
            # Kueue's CEL rule on ResourceFlavor: "at least one nodeLabel is required when topology is set".
            validation.fail(component, "topology needs node_labels: Kueue requires a topology flavor to select its nodes")
        if isinstance(self.namespace, str):
            validation.check_dns_label(component, "namespace", self.namespace)
        names = [self.queue_name, *(q.queue_name for q in self.more_queues)]
        flavors = [self.flavor_name, *(q.flavor_name for q in self.more_queues)]
        if len(set(names)) != len(names) or len(set(flavors)) != len(flavors):
            validation.fail(component, f"every queue needs its own queue_name and flavor_name, got {names} and {flavors}")
        for queue in self.more_queues:
            queue_args(self, queue).validate(f"{component} queue {queue.queue_name!r}")
        if self.queueing_strategy not in _QUEUEING_STRATEGIES:
            validation.fail(
                component,
                f"queueing_strategy must be one of {list(_QUEUEING_STRATEGIES)}, got {self.queueing_strategy!r}",
            )


@dataclass(frozen=True, kw_only=True)
class PoolQueue:
    """One more GPU pool's queue: its own flavor (the pool's labels and taints) and quota."""

    queue_name: str
    flavor_name: str
    gpu_quota: int = 0
    cpu_quota: str = "64"
    memory_quota: str = "256Gi"
    node_labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, str]] = ()
    other_quota: Mapping[str, str] = field(default_factory=dict)
    topology: NodeTopology | None = None
    provisioning_class: str | None = None


def queue_args(args: KueueArgs, queue: PoolQueue) -> KueueArgs:
    """`args` with `queue`'s own fields: what that queue's objects are made from."""
    return replace(args, **{f.name: getattr(queue, f.name) for f in fields(queue)}, more_queues=())


def flavor_spec(args: KueueArgs, topology_name: pulumi.Input[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.node_labels:
        spec["nodeLabels"] = dict(args.node_labels)
    if args.tolerations:
        spec["tolerations"] = [dict(t) for t in args.tolerations]
    if topology_name is not None:
        spec["topologyName"] = topology_name
    return spec


def flavor_object_name(args: KueueArgs) -> str:
    """The ResourceFlavor's (and its Topology's) object name.

    Once a flavor has topologyName, Kueue refuses any change to its topologyName, nodeLabels or
    tolerations, and a Topology's levels never change (kueue v0.19.2 apis/kueue/v1beta2
    resourceflavor_types.go and topology_types.go, x-kubernetes-validations). A topology flavor is
    therefore named after those fields: a change gives a new name, which Pulumi's Kubernetes provider
    treats as a replacement (pulumi-kubernetes provider/pkg/provider/force_new.go: .metadata.name is
    force-new), created before the old one is deleted; the ClusterQueue is updated to the new flavor
    in between, and Kueue's resource-in-use finalizer lets the old one go once no ClusterQueue names it
    (kueue v0.19.2 pkg/controller/core/resourceflavor_controller.go). A flavor without a topology keeps
    its plain name: every field of it can be updated in place, and existing stacks see no change.
    """
    if args.topology is None:
        return args.flavor_name
    immutable = {"nodeLabels": dict(args.node_labels), "tolerations": [dict(t) for t in args.tolerations],
                 "levels": list(args.topology.levels)}
    digest = hashlib.sha256(json.dumps(immutable, sort_keys=True).encode()).hexdigest()[:8]
    return f"{args.flavor_name}-{digest}"


def cluster_queue_spec(args: KueueArgs, flavor_name: pulumi.Input[str],
                       admission_check: pulumi.Input[str] | None = None) -> dict[str, Any]:
    quotas = {"cpu": args.cpu_quota, "memory": args.memory_quota, GPU_RESOURCE: args.gpu_quota,
              **args.other_quota}
    checks = {"admissionChecksStrategy": {"admissionChecks": [{"name": admission_check, "onFlavors": [flavor_name]}]}
              } if admission_check is not None else {}
    return {
        **checks,
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
                values=release_values(args),
                # The release is ready once the controller (and its admission webhook) is; the
                # queues below are created only then, or the webhook would reject them.
                timeout=600,
            ),
            opts=child_options(self, args.provider, opts),
        )
        # Kueue's CRDs come with the release: every custom resource waits for it.
        after_release = child_options(self, args.provider, opts, depends_on=[release])

        # The first queue keeps its resource names; each further one is named after its queue.
        self.local_queue_names: dict[str, pulumi.Output[str]] = {}
        self.cluster_queue_names: dict[str, pulumi.Output[str]] = {}
        for prefix, queue in [(name, args), *((f"{name}-{q.queue_name}", queue_args(args, q))
                                              for q in args.more_queues)]:
            topology_name, admission_check = None, None
            object_name = flavor_object_name(queue)
            if queue.topology is not None:
                # Named after the flavor: one Topology, and at most one admission check, per GPU pool,
                # all replaced together when the flavor is.
                topology = k8s.apiextensions.CustomResource(
                    f"{prefix}-topology", api_version=KUEUE_API_VERSION, kind="Topology",
                    metadata={"name": object_name}, spec=topology_spec(queue.topology), opts=after_release)
                topology_name = topology.metadata.apply(lambda m: m["name"])
            if queue.admission_class is not None:
                config = k8s.apiextensions.CustomResource(
                    f"{prefix}-provisioning", api_version=KUEUE_API_VERSION, kind="ProvisioningRequestConfig",
                    metadata={"name": object_name}, spec=provisioning_config_spec(queue.admission_class),
                    opts=after_release)
                check = k8s.apiextensions.CustomResource(
                    f"{prefix}-admission-check", api_version=KUEUE_API_VERSION, kind="AdmissionCheck",
                    metadata={"name": object_name},
                    spec={"controllerName": PROVISIONING_CONTROLLER,
                          "parameters": {"apiGroup": KUEUE_API_VERSION.split("/")[0],
                                         "kind": "ProvisioningRequestConfig",
                                         "name": config.metadata.apply(lambda m: m["name"])}},
                    opts=after_release)
                admission_check = check.metadata.apply(lambda m: m["name"])
            flavor = k8s.apiextensions.CustomResource(
                f"{prefix}-flavor",
                api_version=KUEUE_API_VERSION,
                kind="ResourceFlavor",
                metadata={"name": object_name},
                spec=flavor_spec(queue, topology_name),
                opts=after_release,
            )
            flavor_name = flavor.metadata.apply(lambda m: m["name"])
            cluster_queue = k8s.apiextensions.CustomResource(
                f"{prefix}-cluster-queue",
                api_version=KUEUE_API_VERSION,
                kind="ClusterQueue",
                metadata={"name": queue.queue_name},
                spec=cluster_queue_spec(queue, flavor_name, admission_check),
                opts=after_release,
            )
            cluster_queue_name = cluster_queue.metadata.apply(lambda m: m["name"])
            local_queue = k8s.apiextensions.CustomResource(
                f"{prefix}-local-queue",
                api_version=KUEUE_API_VERSION,
                kind="LocalQueue",
                metadata={"name": queue.queue_name, "namespace": args.namespace},
                spec={"clusterQueue": cluster_queue_name},
                opts=after_release,
            )
            # Read from the LocalQueue so that a job given this name also depends on the queue existing.
            self.local_queue_names[queue.queue_name] = local_queue.metadata.apply(lambda m: m["name"])
            self.cluster_queue_names[queue.queue_name] = cluster_queue_name
        self.local_queue_name = self.local_queue_names[args.queue_name]
        self.cluster_queue_name = self.cluster_queue_names[args.queue_name]
        self.register_outputs(
            {"localQueueName": self.local_queue_name, "clusterQueueName": self.cluster_queue_name}
        )
