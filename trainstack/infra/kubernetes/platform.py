"""TrainingPlatform: the in-cluster half every cloud shares.

A cloud builds the cluster, its GPU nodes, a shared filesystem, a bucket and an identity, and hands
them over as handles (trainstack.infra.core.contracts). From those this component makes, on the cluster's provider:

    namespace -> shared-volume claim, jobs' ServiceAccount -> [NVIDIA device plugin]
              -> [Kueue + a queue per GPU pool] -> jobs' owner -> [training job]

The device plugin is optional because GKE installs its own on GPU nodes; the queues follow
`trainstack:job.queue` (on by default), the job `trainstack:job.enabled`. The ServiceAccount and the
queues exist either way: `trainstack submit` jobs use them too. The job's data set is copied from the bucket to the node-local cache before
torchrun starts, unless `job.train.data` points elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.config import JobConfig
from trainstack.infra.core import validation
from trainstack.infra.core.contracts import (
    GPU_RESOURCE,
    GpuPlacement,
    ObjectStore,
    SharedStorage,
    WorkloadIdentity,
)
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.kubernetes.job_owner import job_owner, owner_values
from trainstack.infra.kubernetes.job_service_account import JOB_SERVICE_ACCOUNT
from trainstack.infra.kubernetes.job_submission import (
    POOL_VALUE_KEYS,
    pool_entry,
    shared_job_values,
    submission_output,
)
from trainstack.infra.kubernetes.kueue import Kueue, KueueArgs, PoolQueue
from trainstack.infra.kubernetes.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from trainstack.infra.kubernetes.pod_requests import (
    format_quantity,
    parse_quantity,
    pod_requests,
    queue_quota,
)
from trainstack.infra.kubernetes.training_job import (
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
    # The cluster's other GPU pools, by name: each gets its own queue (`<job.queue_name>-<name>`) too.
    other_gpu_pools: Mapping[str, GpuPlacement] = field(default_factory=dict)
    # Chart values that shape the pods of a job on one of those pools (e.g. its GPU networking, whose
    # sidecar the pool's queue must count), by pool name.
    other_pool_values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The job's pool's name among the cluster's GPU pools (`trainstack submit --pool NAME`).
    gpu_pool_name: str = "gpu"
    # One node of the job's pool: its allocatable ephemeral-storage (the cloud's estimate), when known.
    # The job's pods must fit it, or the scheduler never places them and the queue holds their quota.
    gpu_local_disk: str | None = None
    # Values for the Kueue chart itself (e.g. a pod annotation that restarts its controller when the
    # cluster starts serving an API Kueue looks for only at start).
    kueue_values: Mapping[str, Any] = field(default_factory=dict)
    # False: the cluster already runs Kueue; with job.queue the jobs go to its LocalQueue job.queue_name (in the
    # job's namespace), and nothing of Kueue is installed or created here.
    install_kueue: bool = True

    def validate(self, component: str) -> None:
        if not isinstance(self.provider, k8s.Provider):
            validation.fail(component, f"provider must be an explicit kubernetes.Provider, got {self.provider!r}")
        if self.job.enabled and self.storage is None:
            validation.fail(component, "the job needs a shared filesystem: its checkpoints and export would "
                            "otherwise live only inside the pod")
        if self.job.gpus_per_pod > self.gpu.gpus_per_node:
            validation.fail(component, f"the job asks {self.job.gpus_per_pod} GPUs per pod, the GPU nodes have "
                            f"{self.gpu.gpus_per_node}")


def shared_claim_name(job: JobConfig) -> str:
    """The job's shared-volume claim: a cloud that pre-makes the volume reserves it for this name."""
    return f"{job.name}-shared"


def queue_args_for(job_values: Mapping[str, Any], pods: int) -> dict[str, Any]:
    """KueueArgs quota fields that admit `pods` pods of the pod the chart renders for these values,
    counted as Kueue counts them (trainstack/infra/kubernetes/pod_requests.py)."""
    quota = pool_queue_quota(job_values, pods)
    return {
        "gpu_quota": int(parse_quantity(quota.pop(GPU_RESOURCE, "0"))),
        "cpu_quota": quota.pop("cpu", "0"),
        "memory_quota": quota.pop("memory", "0"),
        "other_quota": quota,
    }


def pool_pods(gpu: GpuPlacement, gpus_per_pod: int, fallback: int) -> int:
    """How many pods of `gpus_per_pod` GPUs the pool holds at its maximum (`fallback` when it is unknown)."""
    if gpu.max_nodes is None:
        return fallback
    per_node = gpu.gpus_per_node // gpus_per_pod if gpus_per_pod else 1
    return gpu.max_nodes * max(per_node, 1)


def pool_queue_quota(values: Mapping[str, Any], pods: int) -> dict[str, str]:
    """The ClusterQueue quota, as Kubernetes quantities, that admits `pods` pods rendered from `values`."""
    return queue_quota([(pod_resources(values), pods)])


def data_cache_values(job: JobConfig, bucket_uri: pulumi.Input[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(train values, chart values): the data set comes from `<bucket>/<job.data_prefix>/` through the
    node-local cache, unless `job.train.data` points somewhere else."""
    cache_mount = chart_default_values()["storage"]["cache"]["mountPath"]
    train = {"data": cache_mount, **job.train}
    if train["data"] != cache_mount:
        return train, {}
    source = pulumi.Output.concat(bucket_uri, f"/{job.data_prefix}/")
    return train, {"storage": {"cache": {"enabled": True, "sourceUri": source}}}


def topology_values(job: JobConfig, gpu: GpuPlacement) -> dict[str, Any]:
    """Chart values that let a multi-node job's pods prefer the pool's tightest topology domain (its
    lowest level), where the pool's queue flavor has a Kueue Topology (kueue.py)."""
    if not job.queue or gpu.topology is None:
        return {}
    return {"kueue": {"preferredTopology": gpu.topology.levels[-1]}}


def with_snapshots(train: dict[str, Any], job: JobConfig, bucket_uri: pulumi.Input[str]) -> dict[str, Any]:
    """Checkpoints and the export also go to `<bucket>/runs/<job>/` as they are written (the trainer's
    --snapshot-uri), unless `job.train` names another place: the bucket outlives the cluster."""
    extra = list(train.get("extraArgs", []))
    if any(str(word).split("=", 1)[0] == "--snapshot-uri" for word in extra):
        return train
    return {**train, "extraArgs": [*extra, "--snapshot-uri", pulumi.Output.concat(bucket_uri, f"/runs/{job.name}")]}


def check_local_disk(component: str, job_values: Mapping[str, Any], args: TrainingPlatformArgs) -> None:
    """Refuse a job whose pods on one node request more local disk than that node offers."""
    if args.gpu_local_disk is None or not (args.job.enabled or args.job.queue):
        return
    per_pod = pod_requests(pod_resources(job_values)).get("ephemeral-storage", Fraction(0))
    pods_per_node = max(args.gpu.gpus_per_node // args.job.gpus_per_pod, 1) if args.job.gpus_per_pod else 1
    if per_pod * pods_per_node > parse_quantity(args.gpu_local_disk):
        validation.fail(component, f"the job's pods request {format_quantity(per_pod * pods_per_node)} of local "
                        f"disk per node (resources.tmpSize + the data cache request), a GPU node offers about "
                        f"{args.gpu_local_disk}: lower resources.tmpSize or storage.cache.request, or give the GPU nodes "
                        "a larger disk (diskSizeGb, or local SSDs on GKE)")
    warn_if_cache_outgrows_node(component, job_values, parse_quantity(args.gpu_local_disk) / pods_per_node - per_pod)


def warn_if_cache_outgrows_node(component: str, job_values: Mapping[str, Any], room: Fraction) -> None:
    """The data cache is an emptyDir capped by storage.cache.sizeLimit but requests nothing unless
    storage.cache.request is set: a data set larger than the node's free disk then puts the node under
    disk pressure, and the kubelet evicts the trainer (a disruption the Job ignores, so the copy starts
    over on the next pod, again and again). Say so before the first copy."""
    cache = {**chart_default_values()["storage"]["cache"], **job_values.get("storage", {}).get("cache", {})}
    if cache.get("enabled") is not True or cache.get("request"):
        return
    if parse_quantity(cache["sizeLimit"]) > room:
        pulumi.log.warn(f"{component}: the data cache may fill up to storage.cache.sizeLimit {cache['sizeLimit']}, "
                        f"but a GPU node has about {format_quantity(max(room, Fraction(0)))} of local disk left "
                        "beyond the pods' requests; a data set larger than that gets the trainer evicted and "
                        "restarted again and again. Give the GPU nodes a larger disk (diskSizeGb, or local SSDs "
                        "on GKE) than the data set needs, or keep the data set below that")


class TrainingPlatform(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    claim_name: pulumi.Output[str] | None
    service_account_name: pulumi.Output[str]  # every job's (trainstack/infra/kubernetes/job_service_account.py)
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

        # The identity every job runs as, Pulumi's and not any release's (trainstack/infra/kubernetes/job_service_account.py).
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-job-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=JOB_SERVICE_ACCOUNT, namespace=namespace,
                                                annotations=dict(args.identity.service_account_annotations)),
            opts=child_options(self, args.provider, opts, depends_on=namespace_objects))
        self.service_account_name = service_account.metadata.name

        job_ready: list[pulumi.Resource] = list(args.gpu.ready)
        if args.install_device_plugin:
            job_ready.append(NvidiaDevicePlugin(f"{name}-nvidia-device-plugin", NvidiaDevicePluginArgs(
                provider=args.provider, tolerations=args.gpu.tolerations, node_selector=args.gpu.node_selector),
                opts=child_options(self, None, opts, depends_on=args.gpu.ready)))

        train, cache_values = data_cache_values(job, args.bucket.uri)
        extra_values = deep_merge(deep_merge(deep_merge(cache_values, {"resources": dict(args.gpu.pod_resources)}),
                                             topology_values(job, args.gpu)), args.job_values)
        job_args = TrainingJobArgs(
            provider=args.provider,
            image_ref=args.image_ref,
            namespace=namespace,
            pods_min=job.pods_min,
            pods_max=job.pods_max,
            procs_per_pod=job.procs_per_pod,
            gpus_per_pod=job.gpus_per_pod,
            pvc_name=self.claim_name,
            service_account_name=self.service_account_name,
            node_selector=args.gpu.node_selector,
            tolerations=args.gpu.tolerations,
            train=with_snapshots(train, job, args.bucket.uri),
            secret_env=job.secret_env,
            tensorboard=job.tensorboard,
            extra_values=extra_values,
        )
        check_local_disk(f"TrainingPlatform {name!r}", chart_values(job_args, job.name), args)
        queues: dict[str, Any] = {}
        installs_kueue = job.queue and args.install_kueue
        if job.queue and not args.install_kueue:
            job_args = replace(job_args, queue_name=job.queue_name)  # the cluster's own LocalQueue
        if installs_kueue:
            # One queue per GPU pool, each as large as its pool at its maximum and no larger: the pods
            # the chart renders there (trainer, RxDM and any other sidecar, init containers, local disk),
            # as Kueue counts them. Admitted jobs then always fit the pool once the autoscaler has grown it.
            job_pool_values = chart_values(job_args, job.name)
            job_pods = pool_pods(args.gpu, job.gpus_per_pod, job.pods_max)
            queues[job.queue_name] = self._queue_summary(args.gpu, pool_queue_quota(job_pool_values, job_pods))
            more = []
            for pool_name, pool in sorted(args.other_gpu_pools.items()):
                pool_values = deep_merge(deep_merge(cache_values, {"resources": {**pool.pod_resources,
                                                                                 "gpusPerPod": pool.gpus_per_node}}),
                                         args.other_pool_values.get(pool_name, {}))
                queue_name = f"{job.queue_name}-{pool_name}"
                more.append(PoolQueue(queue_name=queue_name, flavor_name=f"{pool_name}-nodes",
                                      node_labels=pool.node_selector, tolerations=pool.tolerations,
                                      topology=pool.topology,
                                      provisioning_class=pool.provisioning_class,
                                      **queue_args_for(pool_values, pool_pods(pool, pool.gpus_per_node, 1))))
                queues[queue_name] = self._queue_summary(pool, pool_queue_quota(
                    pool_values, pool_pods(pool, pool.gpus_per_node, 1)))
            kueue = Kueue(f"{name}-kueue", KueueArgs(
                provider=args.provider,
                namespace=namespace,
                **queue_args_for(job_pool_values, job_pods),
                queue_name=job.queue_name,
                node_labels=args.gpu.node_selector,
                tolerations=args.gpu.tolerations,
                topology=args.gpu.topology,
                provisioning_class=args.gpu.provisioning_class,
                more_queues=more,
                chart_values=args.kueue_values,
            ), opts=child_options(self, None, opts, depends_on=namespace_objects))
            job_args = replace(job_args, queue_name=kueue.local_queue_name)

        # Every job names this ConfigMap as its owner: pulumi destroy deletes it first, and with it every
        # job, CLI-submitted ones included, while what the jobs use still exists (job_owner.py).
        owner = job_owner(f"{name}-job-owner", namespace=namespace, opts=child_options(
            self, args.provider, opts, depends_on=[
                *namespace_objects, *([claim] if args.storage is not None else []), service_account,
                *([kueue] if installs_kueue else []), *job_ready,
                *(resource for pool in args.other_gpu_pools.values() for resource in pool.ready)]))
        extra_values = deep_merge(extra_values, owner_values(owner))
        # For a job installed outside Pulumi's state by the stack's own commands (the A3 NCCL check).
        self.owner_uid = owner.metadata.uid
        job_args = replace(job_args, extra_values=extra_values)

        self.namespace = pulumi.Output.from_input(namespace)
        self.job = None

        def values_on(gpu: GpuPlacement, queue_name: pulumi.Input[str] | None, pool_values: Mapping[str, Any]
                      ) -> dict[str, Any]:
            return shared_job_values(image_ref=args.image_ref, gpu=gpu, claim_name=self.claim_name,
                                     queue_name=queue_name, secret_env=job.secret_env, tensorboard=job.tensorboard,
                                     extra_values=pool_values)

        # `trainstack submit --pool P`: a job on another GPU pool gets that pool's placement, pod resources,
        # GPU networking and queue; what the stack sets for every job (the cache, the TensorBoard image,
        # the owner) stays. The job's own pool is listed too.
        values = values_on(args.gpu, job_args.queue_name, extra_values)
        pools = {args.gpu_pool_name: pool_entry(args.gpu, job_args.queue_name, values)}
        shared = {key: value for key, value in args.job_values.items() if key not in POOL_VALUE_KEYS}
        for pool_name, pool in sorted(args.other_gpu_pools.items()):
            # The pool's own preferred topology, as the job's pool gets it: without it a multi-node job there
            # would get Kueue's implied, unconstrained TAS placement.
            pool_values = deep_merge(deep_merge(deep_merge(deep_merge(deep_merge(
                cache_values, {"resources": {**pool.pod_resources, "gpusPerPod": pool.gpus_per_node}}),
                topology_values(job, pool)), shared), args.other_pool_values.get(pool_name, {})), owner_values(owner))
            queue = kueue.local_queue_names[f"{job.queue_name}-{pool_name}"] if installs_kueue else None
            pools[pool_name] = pool_entry(pool, queue, values_on(pool, queue, pool_values))
        # What `trainstack submit` needs to run more jobs like this one (trainstack/infra/kubernetes/job_submission.py).
        self.outputs = {"jobSubmission": submission_output(
            job=job, namespace=self.namespace, bucket=args.bucket, gpu=args.gpu, identity=args.identity,
            service_account=self.service_account_name, queues=queues, values=values, pools=pools)}
        if job.enabled:
            self.job = TrainingJob(job.name, job_args, opts=child_options(self, None, opts, depends_on=job_ready))
            self.outputs.update({"jobName": self.job.job_name, "jobNamespace": self.job.namespace})
        self.register_outputs({"namespace": self.namespace, **self.outputs})

    @staticmethod
    def _queue_summary(gpu: GpuPlacement, quota: Mapping[str, str]) -> dict[str, Any]:
        """A queue as `trainstack submit` checks it: its pool and its quota (jobSubmission.queues)."""
        return {"nodeType": gpu.accelerator, "gpusPerNode": gpu.gpus_per_node, "maxNodes": gpu.max_nodes,
                "quota": dict(quota)}

