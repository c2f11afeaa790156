"""TrainingPlatform: the in-cluster half every cloud shares.

A cloud builds the cluster, its GPU nodes, a shared filesystem, a bucket and an identity, and hands
them over as handles (infra.contracts). From those this component makes, on the cluster's provider:

    namespace -> shared-volume claim -> [NVIDIA device plugin] -> [Kueue + queue] -> training job

The device plugin is optional because GKE installs its own on GPU nodes; the queue and the job follow
`trainstack:job`. The job's data set is copied from the bucket to the node-local cache before
torchrun starts, unless `job.train.data` points elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import validation
from infra.config import JobConfig
from infra.contracts import GpuPlacement, ObjectStore, SharedStorage, WorkloadIdentity
from infra.job_submission import shared_job_values, submission_output
from infra.kueue import Kueue, KueueArgs
from infra.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from infra.resource_options import child_options
from infra.training_job import TrainingJob, TrainingJobArgs, chart_default_values, deep_merge


@dataclass(frozen=True, kw_only=True)
class TrainingPlatformArgs:
    provider: k8s.Provider  # the cluster's; nothing here may fall back to an ambient kubeconfig
    job: JobConfig
    gpu: GpuPlacement
    storage: SharedStorage | None  # None: no shared filesystem (then there is no job to run either)
    bucket: ObjectStore
    identity: WorkloadIdentity
    image_ref: pulumi.Input[str]  # by digest (TrainingImage.ref)
    install_device_plugin: bool = True
    # Chart values merged over what the job gets from the handles (e.g. GPU networking on A3 nodes).
    job_values: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, component: str) -> None:
        if not isinstance(self.provider, k8s.Provider):
            validation.fail(component, f"provider must be an explicit kubernetes.Provider, got {self.provider!r}")
        if self.job.enabled and self.storage is None:
            validation.fail(component, "the job needs a shared filesystem: its checkpoints and export would "
                            "otherwise live only inside the pod")
        if self.job.gpus_per_node > self.gpu.gpus_per_node:
            validation.fail(component, f"the job asks {self.job.gpus_per_node} GPUs per pod, the GPU nodes have "
                            f"{self.gpu.gpus_per_node}")


def shared_claim_name(job: JobConfig) -> str:
    """The job's shared-volume claim: a cloud that pre-makes the volume reserves it for this name."""
    return f"{job.name}-shared"


def scaled_quantity(quantity: str, factor: int) -> str:
    """A Kubernetes quantity times a whole number: "180" x 2 = "360", "1500Gi" x 2 = "3000Gi"."""
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", str(quantity))
    if match is None:
        raise ValueError(f"cannot scale the quantity {quantity!r}; give whole numbers such as 180 or 1500Gi")
    return f"{int(match.group(1)) * factor}{match.group(2)}"


def data_cache_values(job: JobConfig, bucket_uri: pulumi.Input[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(train values, chart values): the data set comes from `<bucket>/<job.data_prefix>/` through the
    node-local cache, unless `job.train.data` points somewhere else."""
    cache_mount = chart_default_values()["storage"]["cache"]["mountPath"]
    train = {"data": cache_mount, **job.train}
    if train["data"] != cache_mount:
        return train, {}
    source = pulumi.Output.concat(bucket_uri, f"/{job.data_prefix}/")
    return train, {"storage": {"cache": {"enabled": True, "sourceUri": source}}}


def with_snapshots(train: dict[str, Any], job: JobConfig, bucket_uri: pulumi.Input[str]) -> dict[str, Any]:
    """Checkpoints and the export also go to `<bucket>/runs/<job>/` as they are written (the trainer's
    --snapshot-uri), unless `job.train` names another place: the bucket outlives the cluster."""
    extra = list(train.get("extraArgs", []))
    if any(str(word).split("=", 1)[0] == "--snapshot-uri" for word in extra):
        return train
    return {**train, "extraArgs": [*extra, "--snapshot-uri", pulumi.Output.concat(bucket_uri, f"/runs/{job.name}")]}


class TrainingPlatform(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    claim_name: pulumi.Output[str] | None
    job: TrainingJob | None
    outputs: dict[str, pulumi.Input[Any]]  # for the stack's exports (camelCase)

    def __init__(self, name: str, args: TrainingPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate(f"TrainingPlatform {name!r}")
        super().__init__("trainstack:index:TrainingPlatform", name, None, opts)
        job = args.job

        namespace: pulumi.Input[str] = job.namespace
        namespace_objects: list[pulumi.Resource] = []
        if job.namespace != "default":
            job_namespace = k8s.core.v1.Namespace(
                f"{name}-job-namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=job.namespace),
                opts=child_options(self, args.provider, opts))
            namespace = job_namespace.metadata.name
            namespace_objects.append(job_namespace)

        self.claim_name = None
        if args.storage is not None:
            claim = k8s.core.v1.PersistentVolumeClaim(
                f"{name}-shared-claim",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=shared_claim_name(job), namespace=namespace),
                spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                    access_modes=["ReadWriteMany"],  # every training pod mounts the same run directory
                    storage_class_name=args.storage.storage_class_name,
                    volume_name=args.storage.volume_name,
                    resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": args.storage.size}),
                ),
                opts=child_options(self, args.provider, opts,
                                   depends_on=[*args.storage.ready, *namespace_objects]),
            )
            self.claim_name = claim.metadata.name

        job_ready: list[pulumi.Resource] = list(args.gpu.ready)
        if args.install_device_plugin:
            job_ready.append(NvidiaDevicePlugin(f"{name}-nvidia-device-plugin", NvidiaDevicePluginArgs(
                provider=args.provider, tolerations=args.gpu.tolerations, node_selector=args.gpu.node_selector),
                opts=child_options(self, None, opts, depends_on=args.gpu.ready)))

        resources = deep_merge(chart_default_values()["resources"], args.gpu.pod_resources)
        queue_name = None
        if job.queue:
            kueue = Kueue(f"{name}-kueue", KueueArgs(
                provider=args.provider,
                namespace=namespace,
                # Room for the whole job at its largest, and nothing more.
                gpu_quota=job.nodes_max * job.gpus_per_node,
                cpu_quota=scaled_quantity(resources["requests"]["cpu"], job.nodes_max),
                memory_quota=scaled_quantity(resources["requests"]["memory"], job.nodes_max),
                queue_name=job.queue_name,
                node_labels=args.gpu.node_selector,
                tolerations=args.gpu.tolerations,
            ), opts=child_options(self, None, opts, depends_on=namespace_objects))
            queue_name = kueue.local_queue_name

        self.namespace = pulumi.Output.from_input(namespace)
        self.job = None
        train, cache_values = data_cache_values(job, args.bucket.uri)
        extra_values = deep_merge(deep_merge(cache_values, {"resources": dict(args.gpu.pod_resources)}), args.job_values)
        # What `trainstack submit` needs to run more jobs like this one (infra/job_submission.py).
        self.outputs = {"jobSubmission": submission_output(
            job=job, namespace=self.namespace, bucket=args.bucket, gpu=args.gpu, identity=args.identity,
            values=shared_job_values(image_ref=args.image_ref, gpu=args.gpu, claim_name=self.claim_name,
                                     queue_name=queue_name, secret_env=job.secret_env, tensorboard=job.tensorboard,
                                     extra_values=extra_values))}
        if job.enabled:
            train = with_snapshots(train, job, args.bucket.uri)
            self.job = TrainingJob(job.name, TrainingJobArgs(
                provider=args.provider,
                image_ref=args.image_ref,
                namespace=namespace,
                nodes_min=job.nodes_min,
                nodes_max=job.nodes_max,
                procs_per_node=job.procs_per_node,
                gpus_per_node=job.gpus_per_node,
                pvc_name=self.claim_name,
                queue_name=queue_name,
                service_account_annotations=args.identity.service_account_annotations,
                node_selector=args.gpu.node_selector,
                tolerations=args.gpu.tolerations,
                train=train,
                secret_env=job.secret_env,
                tensorboard=job.tensorboard,
                extra_values=extra_values,
            ), opts=child_options(self, None, opts, depends_on=job_ready))
            self.outputs.update({"jobName": self.job.job_name, "jobNamespace": self.job.namespace})
        self.register_outputs({"namespace": self.namespace, **self.outputs})

