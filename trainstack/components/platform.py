"""TrainingPlatform, hosted: the training platform on a cluster you already have (EKS, GKE or any other).

A façade over trainstack.infra.kubernetes.platform.TrainingPlatform with schema-friendly Args: the cluster arrives as a
kubeconfig (text), the GPU nodes, shared filesystem, bucket and identity as plain typed fields instead
of the handles the stacks pass between Python objects. It makes one Kubernetes provider from the
kubeconfig and then the very same resources the stacks make (namespace, shared-volume claim, NVIDIA
device plugin, Kueue, training job), as children of the infra component.

On a cluster you bring, nothing cluster-wide is installed unless asked: Kueue only with job.queue (default
false) and installKueue (default true then; false uses the Kueue the cluster already runs, through its
LocalQueue job.queueName). The GPU values may be EksCluster's or GkeGpuNodePool's outputs in Python
(trainstack/components/known_outputs.py); any other output there is refused, since the queue and the job are
sized from them while the program runs.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

import pulumi

from trainstack.components.cluster_access import check_cluster_access, cluster_provider, stand_in_provider
from trainstack.components.job_args import Job
from trainstack.components.kubernetes_args import Toleration
from trainstack.components.stack_config import stack_errors_as_inputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.job import KEY as JOB_KEY
from trainstack.infra.config.job import resolve_job
from trainstack.infra.config.loader import config_value, from_inputs
from trainstack.infra.core import validation
from trainstack.infra.core.contracts import GpuPlacement, ObjectStore, WorkloadIdentity
from trainstack.infra.core.contracts import SharedStorage as InfraSharedStorage
from trainstack.infra.core.namespaces import platform_namespaces
from trainstack.infra.kubernetes.platform import TrainingPlatform as InfraTrainingPlatform
from trainstack.infra.kubernetes.platform import TrainingPlatformArgs as InfraTrainingPlatformArgs


@dataclass(kw_only=True)
class GpuNodes:
    """Where the cluster's GPU nodes are and what a pod finds on one."""

    gpus_per_node: int
    """GPUs on each GPU node (the NVIDIA device plugin's nvidia.com/gpu)."""
    node_selector: dict[str, str] | None = None
    """Labels every GPU node carries, e.g. {"nvidia.com/gpu.present": "true"}."""
    tolerations: list[Toleration] | None = None
    """Tolerations for the GPU nodes' taints."""
    accelerator: str | None = None
    """The GPU or instance type, for humans and outputs (e.g. nvidia-tesla-t4, g5.xlarge)."""
    pod_resources: dict[str, Any] | None = None
    """The chart's `resources` for a pod that takes a whole node (requests, limits, shmSize), when the node type calls for more than the chart's defaults."""


@dataclass(kw_only=True)
class SharedStorage:
    """A ReadWriteMany filesystem the job's pods share (checkpoints, the export, TensorBoard's events)."""

    size: str
    """The claim's request, e.g. 1Ti; a static volume binds only if its capacity covers it."""
    storage_class_name: pulumi.Input[str] | None = None
    """A StorageClass that provisions ReadWriteMany volumes (EFS, Filestore, NFS); "" with volumeName."""
    volume_name: pulumi.Input[str] | None = None
    """A PersistentVolume made for this job to bind to, instead of a StorageClass."""


@dataclass(kw_only=True)
class Bucket:
    """The object store that holds the prepared data set and the results to keep."""

    uri: pulumi.Input[str]
    """s3://<bucket> or gs://<bucket>, no trailing slash."""
    name: pulumi.Input[str] | None = None
    """The bucket's name (default: the URI)."""


@dataclass(kw_only=True)
class TrainingPlatformArgs:
    """The training platform's inputs on an existing cluster."""

    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text): from `aws eks update-kubeconfig`, `gcloud container clusters get-credentials`, or another stack's output. Every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    gpu: GpuNodes
    """The cluster's GPU nodes."""
    bucket: Bucket
    """The bucket the job reads its data set from and copies its checkpoints and export to."""
    image_ref: pulumi.Input[str]
    """The training image, <repository>@sha256:<digest> or <repository>:<tag>."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes, not when the kubeconfig's text does."""
    job: Job | None = None
    """The training job (default: none yet, only the platform)."""
    shared_storage: SharedStorage | None = None
    """The shared filesystem; without one there can be no job."""
    service_account_annotations: dict[str, pulumi.Input[str]] | None = None
    """Annotations of the job's service account that give it the bucket (IRSA role ARN, GKE Workload Identity service account)."""
    install_device_plugin: bool | None = None
    """Install the NVIDIA device plugin (default true; false on GKE, which runs its own)."""
    job_values: dict[str, Any] | None = None
    """Chart values merged over what the job gets from the inputs above."""
    install_kueue: bool | None = None
    """With job.queue: install Kueue and the job's queues (default true); false when the cluster already runs Kueue: the jobs then go to its LocalQueue job.queueName in the job's namespace, which you create."""


class TrainingPlatform(pulumi.ComponentResource):
    """The training platform (namespace, shared-volume claim, NVIDIA device plugin, Kueue, training job) on a cluster you already have."""

    namespace: pulumi.Output[str]
    """The job's namespace."""
    claim_name: pulumi.Output[str] | None
    """The shared-volume claim, when there is shared storage."""
    job_name: pulumi.Output[str] | None
    """The training Job, when the job is enabled."""
    service_account_name: pulumi.Output[str]
    """The Kubernetes service account every job runs as (in `namespace`): the subject of your IRSA role's or Workload Identity binding's trust."""
    local_queue_name: pulumi.Output[str] | None
    """The Kueue LocalQueue the jobs are submitted to, when job.queue is on."""

    def __init__(self, name: str, args: TrainingPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(TrainingPlatformArgs, args)
        component = f"TrainingPlatform {name!r}"
        gpu = args.gpu
        # Everything checked before anything is registered: the job by the same rules as trainstack:job in a
        # stack file, the GPU nodes' labels and tolerations as the device plugin, Kueue and the job check them,
        # the whole by the infra component's own validate().
        # On a cluster you bring, the queue is off unless asked (the stack files' default is on: their
        # clusters are made for training and get a queue per GPU pool).
        job_args = args.job or Job()
        job_args = dataclasses.replace(job_args, queue=bool(job_args.queue))
        with stack_errors_as_inputs({}):
            job = resolve_job(from_inputs(Job, job_args, key=JOB_KEY), gpu.gpus_per_node, "GPU node",
                              platform_namespaces(device_plugin=args.install_device_plugin is not False))
        placement = GpuPlacement(node_selector=dict(gpu.node_selector or {}),
                                 tolerations=tuple(config_value(t) for t in gpu.tolerations or ()),
                                 gpus_per_node=gpu.gpus_per_node, accelerator=gpu.accelerator or "",
                                 pod_resources=dict(gpu.pod_resources or {}))
        validation.check_string_map(component, "gpu.node_selector", placement.node_selector)
        validation.check_tolerations(component, "gpu.tolerations", placement.tolerations)
        storage = None
        if args.shared_storage is not None:
            storage = InfraSharedStorage(storage_class_name=args.shared_storage.storage_class_name or "",
                                    size=args.shared_storage.size, volume_name=args.shared_storage.volume_name)
        platform_args = InfraTrainingPlatformArgs(
            provider=stand_in_provider(),
            job=job,
            gpu=placement,
            storage=storage,
            bucket=ObjectStore(uri=args.bucket.uri,
                               name=args.bucket.name if args.bucket.name is not None else args.bucket.uri),
            identity=WorkloadIdentity(service_account_annotations=dict(args.service_account_annotations or {})),
            image_ref=args.image_ref,
            install_device_plugin=args.install_device_plugin is not False,
            job_values=dict(args.job_values or {}),
            install_kueue=args.install_kueue is not False,
        )
        platform_args.validate(component)
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("TrainingPlatform"), name, None, moved_from_index("TrainingPlatform", opts))

        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        platform = InfraTrainingPlatform(name, dataclasses.replace(platform_args, provider=provider),
                                         opts=pulumi.ResourceOptions(parent=self))
        self.namespace = platform.namespace
        self.claim_name = platform.claim_name
        self.job_name = platform.job.job_name if platform.job is not None else None
        self.service_account_name = platform.service_account_name
        self.local_queue_name = pulumi.Output.from_input(job.queue_name) if job.queue else None
        self.register_outputs({"namespace": self.namespace, "claimName": self.claim_name, "jobName": self.job_name,
                               "serviceAccountName": self.service_account_name,
                               "localQueueName": self.local_queue_name})
