"""TrainingPlatform: the in-cluster half every cloud shares.

A cloud builds the cluster, its GPU nodes, a shared filesystem, a bucket and an identity, and hands
them over as handles (infra.contracts). From those this component makes, on the cluster's provider:

    namespace -> shared-volume claim -> [NVIDIA device plugin] -> [Kueue + queue] -> training job

The device plugin is optional because GKE installs its own on GPU nodes; the queue and the job follow
`trainstack:job`. The job's data set is copied from the bucket to the node-local cache before
torchrun starts, unless `job.train.data` points elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import validation
from infra.config import JobConfig
from infra.contracts import GPU_RESOURCE, GpuPlacement, ObjectStore, SharedStorage, WorkloadIdentity
from infra.job_submission import shared_job_values, submission_output
from infra.kueue import Kueue, KueueArgs
from infra.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from infra.pod_requests import parse_quantity, queue_quota
from infra.resource_options import child_options
from infra.training_job import (
    TrainingJob,
    TrainingJobArgs,
    chart_default_values,
    chart_values,
    deep_merge,
    pod_resources,
)


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


def queue_args_for(job_values: Mapping[str, Any], pods: int) -> dict[str, Any]:
    """KueueArgs quota fields that admit `pods` pods of the pod the chart renders for these values,
    counted as Kueue counts them (infra/pod_requests.py)."""
    quota = queue_quota([(pod_resources(job_values), pods)])
    return {
        "gpu_quota": int(parse_quantity(quota.pop(GPU_RESOURCE, "0"))),
        "cpu_quota": quota.pop("cpu", "0"),
        "memory_quota": quota.pop("memory", "0"),
        "other_quota": quota,
    }


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

        train, cache_values = data_cache_values(job, args.bucket.uri)
        extra_values = deep_merge(deep_merge(cache_values, {"resources": dict(args.gpu.pod_resources)}), args.job_values)
        job_args = TrainingJobArgs(
            provider=args.provider,
            image_ref=args.image_ref,
            namespace=namespace,
            nodes_min=job.nodes_min,
            nodes_max=job.nodes_max,
            procs_per_node=job.procs_per_node,
            gpus_per_node=job.gpus_per_node,
            pvc_name=self.claim_name,
            service_account_annotations=args.identity.service_account_annotations,
            node_selector=args.gpu.node_selector,
            tolerations=args.gpu.tolerations,
            train=with_snapshots(train, job, args.bucket.uri),
            secret_env=job.secret_env,
            tensorboard=job.tensorboard,
            extra_values=extra_values,
        )
        if job.queue:
            kueue = Kueue(f"{name}-kueue", KueueArgs(
                provider=args.provider,
                namespace=namespace,
                # Room for the whole job at its largest, and nothing more: the pod the chart renders
                # for this job (trainer, RxDM and any other sidecar, init containers), as Kueue counts it.
                **queue_args_for(chart_values(job_args, job.name), job.nodes_max),
                queue_name=job.queue_name,
                node_labels=args.gpu.node_selector,
                tolerations=args.gpu.tolerations,
            ), opts=child_options(self, None, opts, depends_on=namespace_objects))
            job_args = replace(job_args, queue_name=kueue.local_queue_name)

        self.namespace = pulumi.Output.from_input(namespace)
        self.job = None
        # What `trainstack submit` needs to run more jobs like this one (infra/job_submission.py).
        self.outputs = {"jobSubmission": submission_output(
            job=job, namespace=self.namespace, bucket=args.bucket, gpu=args.gpu, identity=args.identity,
            values=shared_job_values(image_ref=args.image_ref, gpu=args.gpu, claim_name=self.claim_name,
                                     queue_name=job_args.queue_name, secret_env=job.secret_env,
                                     tensorboard=job.tensorboard, extra_values=extra_values))}
        if job.enabled:
            self.job = TrainingJob(job.name, job_args, opts=child_options(self, None, opts, depends_on=job_ready))
            self.outputs.update({"jobName": self.job.job_name, "jobNamespace": self.job.namespace})
        self.register_outputs({"namespace": self.namespace, **self.outputs})

