"""TrainingJob: the training-job Helm chart (workloads/charts/training-job) deployed from typed arguments.

Why `helm.v3.Release` and not `helm.v4.Chart`:
- v4.Chart renders in the provider while the program runs and fails a preview when the cluster's
  kubeconfig is still unknown (pulumi/pulumi-kubernetes#3027), i.e. on every fresh stack. A Release
  skips rendering while its inputs are unknown and previews cleanly.
- A Job's pod template is immutable, so `helm upgrade` cannot apply a change of pods, image or
  command. The Release is replaced instead (delete, then install under the same name: same run
  directory, so training resumes from its newest checkpoint) when a value that shapes the pod
  template changes; `pods_replicas` (Job parallelism) scales in place without a queue. In a Kueue
  queue it replaces the Release too: with pods_min < replicas the Job carries
  kueue.x-k8s.io/job-min-parallelism, and Kueue's webhook refuses a parallelism change while the Job
  runs (kueue v0.19.2 pkg/controller/jobs/job/job_webhook.go validatePartialAdmissionUpdate).
Trade-off: the objects inside a Release are opaque to Pulumi diffs and policies; the chart's own
tests cover what it renders.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from trainstack.infra.core import validation
from trainstack.infra.core.contracts import EFA_RESOURCE, GPU_RESOURCE
from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR
from trainstack.infra.core.release_chart import chart_digest, release_chart_path
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.kubernetes.pod_requests import format_quantity, parse_quantity

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
CHART_DESCRIPTION = "trainstack training-job chart "
# The chart names the Job, its Services and ServiceAccount after the release, cut to 50 characters.
_RELEASE_NAME_MAX = 50

# Values that end up in the Job's pod template (immutable once the Job exists): a change replaces
# the Release. Not listed, so applied in place by `helm upgrade`: job.pods.replicas (parallelism),
# job.ttlSecondsAfterFinished, job.activeDeadlineSeconds, serviceAccount.annotations,
# networkPolicy, tensorboard.
REPLACE_ON_CHANGES = (
    "description",  # the chart's digest: new templates may change the pod template
    "values.image",
    "values.job.pods.min",
    "values.job.pods.max",
    "values.job.procsPerPod",
    "values.job.maxRestarts",
    "values.job.launcher",
    "values.job.joinTimeoutSeconds",
    "values.job.lastCallTimeoutSeconds",
    "values.job.runId",
    "values.job.rdzvBackend",
    "values.job.rdzvPort",
    "values.job.clusterDomain",
    "values.job.backoffLimit",
    "values.job.terminationGracePeriodSeconds",
    "values.job.lostPeerRestarts",  # the trainer's TRAINSTACK_LOST_PEER_BUDGET
    "values.job.submissionId",  # the pods' trainstack.dev/submission label
    "values.command",
    "values.train",
    "values.resources",
    "values.securityContext",
    "values.nodeSelector",
    "values.tolerations",
    "values.affinity",
    "values.storage",
    "values.kueue",
    "values.serviceAccount.create",
    "values.serviceAccount.name",
    "values.env",
    "values.secretEnv",
    "values.sidecars",
    "values.podAnnotations",
    "values.podLabels",
    "values.etcd",
    "values.gpuNetworking",
    "values.ncclCheck",
)
# In a queue, parallelism is fixed while the Job runs (see the module docstring). A helm upgrade for
# any other change also writes parallelism back to pods.replicas, which Kueue refuses for a Job it
# admitted with fewer pods: TensorBoard, the one such value the stack config toggles, replaces too,
# and so does the job owner (job_owner.py), set once by the first `pulumi up` that has it.
REPLACE_ON_CHANGES_IN_A_QUEUE = (*REPLACE_ON_CHANGES, "values.job.pods.replicas", "values.tensorboard",
                                 "values.owner")


@dataclass(frozen=True)
class SecretEnv:
    """An environment variable read from a Kubernetes Secret: the value never passes through Pulumi."""

    name: str  # e.g. WANDB_API_KEY
    secret_name: str  # the Secret in the job's namespace
    key: str  # the key inside that Secret


@dataclass(frozen=True, kw_only=True)
class TrainingJobArgs:
    provider: k8s.Provider
    image_ref: pulumi.Input[str]  # "<repository>@sha256:..." (TrainingImage.ref) or "<repository>:<tag>"
    namespace: pulumi.Input[str] = "default"
    pods_min: int = 1
    pods_max: int = 1
    # One process per GPU when unset (1 on CPU nodes); the chart requires
    # procsPerPod == gpusPerPod on GPU nodes.
    procs_per_pod: int | None = None
    gpus_per_pod: int = 0
    pvc_name: pulumi.Input[str] | None = None
    queue_name: pulumi.Input[str] | None = None  # Kueue LocalQueue (Kueue.local_queue_name)
    service_account_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # An existing ServiceAccount the pods run as (the chart then creates none and the annotations are
    # unused); None: the release creates one named after itself.
    service_account_name: pulumi.Input[str] | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, str]] = ()
    train: Mapping[str, Any] = field(default_factory=dict)  # chart values under `train`
    secret_env: Sequence[SecretEnv] = ()
    tensorboard: bool = False
    extra_values: Mapping[str, Any] = field(default_factory=dict)  # deep-merged last (escape hatch)
    # Optional, with defaults:
    release_name: str | None = None  # default: the component's name; names the Job and run directory
    pods_replicas: int | None = None  # pods running now, within [pods_min, pods_max]; default max
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)  # plain, non-secret variables
    cpu_request: str | None = None  # per pod; None keeps the chart's default
    memory_request: str | None = None
    memory_limit: str | None = None
    shm_size: str | None = None
    create_namespace: bool = False
    timeout_seconds: int = 600  # how long helm waits for the release's Deployments (TensorBoard, etcd)

    def validate(self, component: str, release_name: str) -> None:
        if not isinstance(self.provider, k8s.Provider):
            validation.fail(
                component, f"provider must be an explicit kubernetes.Provider, got {self.provider!r}"
            )
        if (
            not isinstance(release_name, str)
            or len(release_name) > _RELEASE_NAME_MAX
            or not _DNS_1035_LABEL.match(release_name)
        ):
            validation.fail(
                component,
                f"release name must start with a letter, hold only lowercase letters, digits and '-' and be at "
                f"most {_RELEASE_NAME_MAX} characters (it names the Job and its Service), got {release_name!r}",
            )
        validation.check_int(component, "pods_min", self.pods_min, minimum=1)
        validation.check_int(component, "pods_max", self.pods_max, minimum=1)
        if self.pods_min > self.pods_max:
            validation.fail(
                component, f"pods_min ({self.pods_min}) must not exceed pods_max ({self.pods_max})"
            )
        if self.pods_replicas is not None:
            validation.check_int(component, "pods_replicas", self.pods_replicas, minimum=self.pods_min)
            if self.pods_replicas > self.pods_max:
                validation.fail(
                    component,
                    f"pods_replicas must be <= pods_max ({self.pods_max}), got {self.pods_replicas}",
                )
        validation.check_int(component, "gpus_per_pod", self.gpus_per_pod, minimum=0)
        if self.procs_per_pod is not None:
            validation.check_int(component, "procs_per_pod", self.procs_per_pod, minimum=1)
            if self.gpus_per_pod > 0 and self.procs_per_pod != self.gpus_per_pod:
                validation.fail(
                    component,
                    f"procs_per_pod ({self.procs_per_pod}) must equal gpus_per_pod ({self.gpus_per_pod}): "
                    "torchrun starts one process per GPU",
                )
        validation.check_int(component, "timeout_seconds", self.timeout_seconds, minimum=1)
        if isinstance(self.image_ref, str):
            try:
                image_values(self.image_ref)
            except ValueError as error:
                validation.fail(component, f"image_ref: {error}")
        has_pvc = self.pvc_name is not None or bool(self.extra_values.get("storage", {}).get("pvc"))
        if self.pods_max > 1 and not has_pvc and "command" not in self.extra_values:
            validation.fail(
                component,
                "pvc_name is required when pods_max > 1: every pod reads and writes the same run directory",
            )
        if self.tensorboard and not has_pvc:
            validation.fail(
                component,
                "tensorboard needs pvc_name: TensorBoard reads the run's event files from the shared volume",
            )
        if isinstance(self.namespace, str):
            validation.check_dns_label(component, "namespace", self.namespace)
        validation.check_string_map(component, "node_selector", self.node_selector)
        validation.check_tolerations(component, "tolerations", self.tolerations)
        for name in ("cpu_request", "memory_request", "memory_limit", "shm_size"):
            if getattr(self, name) is not None:
                validation.check_quantity(component, name, getattr(self, name))
        self._validate_env(component)
        self._validate_chart_keys(component)

    def _validate_env(self, component: str) -> None:
        names: list[str] = []
        for i, item in enumerate(self.secret_env):
            if not isinstance(item, SecretEnv):
                validation.fail(
                    component, f"secret_env[{i}] must be a SecretEnv(name, secret_name, key), got {item!r}"
                )
            if not isinstance(item.secret_name, str) or not _DNS_SUBDOMAIN.match(item.secret_name):
                validation.fail(
                    component, f"secret_env[{i}].secret_name must name a Secret, got {item.secret_name!r}"
                )
            if not isinstance(item.key, str) or not item.key:
                validation.fail(
                    component, f"secret_env[{i}].key must be a non-empty string, got {item.key!r}"
                )
            names.append(item.name)
        names.extend(self.env)
        for name in names:
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                validation.fail(component, f"environment variable name {name!r} is not a valid name")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            validation.fail(component, f"environment variables set twice (env and secret_env): {duplicates}")

    def _validate_chart_keys(self, component: str) -> None:
        # A misspelt key would otherwise surface only when the provider renders the chart.
        defaults = chart_default_values()
        unknown = sorted(set(self.train) - set(defaults["train"]))
        if unknown:
            validation.fail(
                component,
                f"train has keys the chart does not know: {unknown} (known: {sorted(defaults['train'])})",
            )
        unknown = sorted(set(self.extra_values) - set(defaults))
        if unknown:
            validation.fail(component, f"extra_values has top-level keys the chart does not know: {unknown}")


@cache
def chart_default_values() -> dict[str, Any]:
    """The chart's values.yaml (read-only: callers must not mutate it)."""
    return yaml.safe_load((TRAINING_JOB_CHART_DIR / "values.yaml").read_text())


def image_values(image_ref: str) -> dict[str, str]:
    """Split "repo@sha256:..." / "repo:tag" into the chart's image values (a registry port is no tag)."""
    if "@" in image_ref:
        repository, digest = image_ref.split("@", 1)
        return {"repository": repository, "digest": digest, "tag": ""}
    head, _, last = image_ref.rpartition("/")
    if ":" in last:
        name, tag = last.split(":", 1)
        return {"repository": f"{head}/{name}" if head else name, "digest": "", "tag": tag}
    raise ValueError(f"image reference {image_ref!r} has neither a digest nor a tag")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Maps merge key by key; anything else (lists included) in `override` replaces `base`, like Helm."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _gpu_container_resources(values: Mapping[str, Any]) -> dict[str, Any]:
    """templates/_helpers.tpl training-job.gpuContainerRequests / gpuContainerLimits."""
    resources = values["resources"]
    requests = dict(resources["requests"])
    limits = dict(resources["limits"])
    if "ephemeral-storage" not in requests and "ephemeral-storage" in limits:
        requests["ephemeral-storage"] = limits["ephemeral-storage"]  # as the API server defaults it
    if "ephemeral-storage" not in requests:
        local = parse_quantity(resources["tmpSize"])
        cache = values["storage"]["cache"]
        if cache["enabled"] and cache.get("request"):
            local += parse_quantity(cache["request"])  # not sizeLimit: that is only the cap
        requests["ephemeral-storage"] = format_quantity(local)
    gpus = _gpus_per_pod(resources)
    if gpus > 0:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = gpus
    networking = values["gpuNetworking"]
    if networking["mode"] == "efa":  # training-job.gpuNetworking.efaResources: every EFA of the node
        requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = int(networking["efa"]["interfaces"])
    return {"requests": requests, "limits": limits}


# GPU networking modes whose pods run the RxDM sidecar (templates/_gpu_networking.tpl); rdma has none.
RXDM_MODES = ("tcpx", "tcpxo")


def _gpus_per_pod(resources: Mapping[str, Any]) -> int:
    """templates/_pods.tpl: resources.gpusPerPod, else its old name gpusPerNode, else 0."""
    for key in ("gpusPerPod", "gpusPerNode"):
        if resources.get(key) is not None:
            return int(resources[key])
    return 0


def pod_resources(values: Mapping[str, Any]) -> dict[str, Any]:
    """The resource-bearing part of the pod template the chart renders for these values (templates/job.yaml):
    {"initContainers": [...], "containers": [...]}, each container's name, restartPolicy and resources.

    For sizing a Kueue queue (trainstack/infra/kubernetes/pod_requests.py) where the chart cannot be rendered (the Pulumi
    program has no Helm engine); tests/workloads/test_chart_pod_requests.py holds it to the rendered pod.
    Only the resource values are read, so the rest may still be Outputs.
    """
    values = deep_merge(chart_default_values(), values)
    mode = values["gpuNetworking"]["mode"]
    init_containers: list[dict[str, Any]] = []
    if mode in RXDM_MODES:  # the RxDM sidecar (rdma and efa have none)
        init_containers.append({"name": f"{mode}-daemon", "restartPolicy": "Always",
                                "resources": values["gpuNetworking"]["rxdmResources"]})
    for sidecar in values.get("sidecars") or []:
        init_containers.append({"name": sidecar["name"], "restartPolicy": "Always",
                                "resources": sidecar.get("resources") or {}})
    cache = values["storage"]["cache"]
    if cache["enabled"]:
        init_containers.append({"name": "fetch-data", "resources": cache["resources"]})
    name = "nccl-check" if values["ncclCheck"]["enabled"] else "trainer"
    return {"initContainers": init_containers,
            "containers": [{"name": name, "resources": _gpu_container_resources(values)}]}


def chart_values(args: TrainingJobArgs, release_name: str) -> dict[str, Any]:
    """Typed arguments -> the chart's values (workloads/charts/training-job/values.schema.json). Inputs may still be Outputs."""
    procs = args.procs_per_pod if args.procs_per_pod is not None else max(args.gpus_per_pod, 1)
    pods: dict[str, Any] = {"min": args.pods_min, "max": args.pods_max}
    if args.pods_replicas is not None:
        pods["replicas"] = args.pods_replicas
    requests = {
        k: v for k, v in {"cpu": args.cpu_request, "memory": args.memory_request}.items() if v is not None
    }
    resources: dict[str, Any] = {"gpusPerPod": args.gpus_per_pod}
    if requests:
        resources["requests"] = requests
    if args.memory_limit is not None:
        resources["limits"] = {"memory": args.memory_limit}
    if args.shm_size is not None:
        resources["shmSize"] = args.shm_size

    values: dict[str, Any] = {
        "image": pulumi.Output.from_input(args.image_ref).apply(image_values),
        "job": {"pods": pods, "procsPerPod": procs},
        "resources": resources,
        "nodeSelector": dict(args.node_selector),
        "tolerations": [dict(t) for t in args.tolerations],
        "serviceAccount": {
            "create": True,
            # Named explicitly so `service_account_name` is known without knowing the chart's naming.
            "name": release_name,
            "annotations": dict(args.service_account_annotations),
        } if args.service_account_name is None else {
            "create": False, "name": args.service_account_name, "annotations": {}},
        "env": [{"name": k, "value": v} for k, v in args.env.items()],
        # By reference only: the chart mounts secretKeyRef, the secret value never enters values.
        "secretEnv": [{"name": s.name, "secretName": s.secret_name, "key": s.key} for s in args.secret_env],
        "tensorboard": {"enabled": args.tensorboard},
    }
    if args.train:
        values["train"] = dict(args.train)
    if args.pvc_name is not None:
        values["storage"] = {"pvc": args.pvc_name}
    if args.queue_name is not None:
        values["kueue"] = {"queueName": args.queue_name}
    return deep_merge(values, args.extra_values)


class TrainingJob(pulumi.ComponentResource):
    """A multi-node torchrun job (Indexed Job + headless Service) from the training-job chart."""

    release_name: pulumi.Output[str]
    job_name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    service_account_name: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        release_name = args.release_name if args.release_name is not None else name
        args.validate(f"TrainingJob {name!r}", release_name)
        super().__init__("trainstack:index:TrainingJob", name, None, opts)

        values = chart_values(args, release_name)
        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name=release_name,
                namespace=args.namespace,
                create_namespace=args.create_namespace,
                chart=release_chart_path(),  # the same on every machine (release_chart.py)
                # What the chart renders, by digest: the provider diffs inputs only, so without it a new
                # chart under the same path would never reach the cluster (release_chart.py).
                description=f"{CHART_DESCRIPTION}{chart_digest()}",
                values=values,
                # A failed install or upgrade is rolled back instead of leaving a half-applied job.
                atomic=True,
                cleanup_on_fail=True,
                timeout=args.timeout_seconds,
                max_history=10,  # each revision is a Secret in the namespace
            ),
            opts=child_options(
                self,
                args.provider,
                opts,
                replace_on_changes=list(REPLACE_ON_CHANGES_IN_A_QUEUE if args.queue_name is not None
                                        else REPLACE_ON_CHANGES),
                # Same release name for the new Job: the old one must be gone first.
                delete_before_replace=True,
            ),
        )

        service_account_name = values["serviceAccount"]["name"]
        self.release_name = release.name
        self.job_name = release.name  # the chart names the Job after the release
        self.namespace = release.namespace
        self.service_account_name = release.name.apply(lambda _: service_account_name)
        self.register_outputs(
            {
                "releaseName": self.release_name,
                "jobName": self.job_name,
                "namespace": self.namespace,
                "serviceAccountName": self.service_account_name,
            }
        )
