"""TrainingJob, hosted: the training-job Helm chart on a cluster given by kubeconfig (trainstack.infra.kubernetes.training_job)."""

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
from trainstack.components.job_args import SecretEnv
from trainstack.components.kubernetes_args import Toleration
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.loader import config_value, from_inputs, setting
from trainstack.infra.kubernetes.training_job import SecretEnv as InfraSecretEnv
from trainstack.infra.kubernetes.training_job import TrainingJob as InfraTrainingJob
from trainstack.infra.kubernetes.training_job import TrainingJobArgs as InfraTrainingJobArgs


@dataclass(kw_only=True)
class TrainingJobArgs:
    """A multi-node torchrun job from the training-job chart; unset inputs keep the chart's defaults."""

    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text); every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    image_ref: pulumi.Input[str]
    """The training image, <repository>@sha256:<digest> or <repository>:<tag>."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes."""
    namespace: pulumi.Input[str] | None = None
    """The job's namespace (default: default)."""
    create_namespace: bool | None = None
    """Create the namespace with the release (default false)."""
    release_name: str | None = None
    """The Helm release; names the Job and the run directory (default: the component's name)."""
    pods_min: int | None = None
    """Pods the job needs to run (default 1)."""
    pods_max: int | None = None
    """Pods the job runs at most (default 1)."""
    pods_replicas: int | None = None
    """Pods running now, within [podsMin, podsMax] (default podsMax)."""
    gpus_per_pod: int | None = None
    """GPUs each pod takes (default 0: CPU pods)."""
    procs_per_pod: int | None = None
    """Training processes per pod; must equal gpusPerPod on GPU nodes (default: one per GPU, 1 on CPU)."""
    pvc_name: pulumi.Input[str] | None = None
    """A ReadWriteMany claim for the run directory; required with podsMax > 1 or TensorBoard."""
    queue_name: pulumi.Input[str] | None = None
    """A Kueue LocalQueue to submit through (all pods admitted together)."""
    service_account_annotations: dict[str, pulumi.Input[str]] | None = None
    """Annotations of the job's service account (IRSA role ARN, GKE Workload Identity)."""
    node_selector: dict[str, str] | None = None
    """Labels of the nodes the pods run on."""
    tolerations: list[Toleration] | None = None
    """Tolerations for those nodes' taints."""
    train: dict[str, Any] | None = None
    """The chart's `train` values: the trainer's flags in camelCase, plus extraArgs."""
    secret_env: list[SecretEnv] | None = None
    """Environment variables read from Kubernetes Secrets (the values never pass through Pulumi)."""
    env: dict[str, pulumi.Input[str]] | None = None
    """Plain, non-secret environment variables."""
    tensorboard: bool | None = None
    """Run TensorBoard beside the job (default false; needs pvcName)."""
    cpu_request: str | None = None
    """CPU request per pod (default: the chart's)."""
    memory_request: str | None = None
    """Memory request per pod (default: the chart's)."""
    memory_limit: str | None = None
    """Memory limit per pod (default: the chart's)."""
    shm_size: str | None = None
    """Size of /dev/shm per pod (default: the chart's)."""
    timeout_seconds: int | None = None
    """How long Helm waits for the release's Deployments (default 600)."""
    extra_values: dict[str, Any] | None = None
    """Chart values deep-merged last."""
    nodes_min: int | None = setting(renamed_to="pods_min")
    """Deprecated: the old name of podsMin (a pod of the job was once called a node); use podsMin."""
    nodes_max: int | None = setting(renamed_to="pods_max")
    """Deprecated: the old name of podsMax; use podsMax."""
    nodes_replicas: int | None = setting(renamed_to="pods_replicas")
    """Deprecated: the old name of podsReplicas; use podsReplicas."""
    gpus_per_node: int | None = setting(renamed_to="gpus_per_pod")
    """Deprecated: the old name of gpusPerPod (GPUs per pod, not per node); use gpusPerPod."""
    procs_per_node: int | None = setting(renamed_to="procs_per_pod")
    """Deprecated: the old name of procsPerPod; use procsPerPod."""


class TrainingJob(pulumi.ComponentResource):
    """A multi-node torchrun job (Indexed Job + headless Service) from the training-job chart, on a cluster given by
    kubeconfig."""

    release_name: pulumi.Output[str]
    """The Helm release."""
    job_name: pulumi.Output[str]
    """The Kubernetes Job."""
    namespace: pulumi.Output[str]
    """The job's namespace."""
    service_account_name: pulumi.Output[str]
    """The pods' service account."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # The inputs from before the pod/node rename move to their names now, one warning each (loader.setting).
        args = from_inputs(TrainingJobArgs, args, component=f"TrainingJob {name!r}")
        job_args = InfraTrainingJobArgs(provider=stand_in_provider(), image_ref=args.image_ref, **given(
            namespace=args.namespace, create_namespace=args.create_namespace, release_name=args.release_name,
            pods_min=args.pods_min, pods_max=args.pods_max, pods_replicas=args.pods_replicas,
            gpus_per_pod=args.gpus_per_pod, procs_per_pod=args.procs_per_pod, pvc_name=args.pvc_name,
            queue_name=args.queue_name, service_account_annotations=args.service_account_annotations,
            node_selector=args.node_selector,
            tolerations=tuple(config_value(t) for t in args.tolerations) if args.tolerations is not None else None,
            train=args.train,
            secret_env=tuple(InfraSecretEnv(name=s.name, secret_name=s.secret_name, key=s.key) for s in args.secret_env)
            if args.secret_env is not None else None,
            env=args.env, tensorboard=args.tensorboard, cpu_request=args.cpu_request,
            memory_request=args.memory_request, memory_limit=args.memory_limit, shm_size=args.shm_size,
            timeout_seconds=args.timeout_seconds, extra_values=args.extra_values,
        ))
        job_args.validate(f"TrainingJob {name!r}", args.release_name if args.release_name is not None else name)
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("TrainingJob"), name, None, moved_from_index("TrainingJob", opts))
        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        job = InfraTrainingJob(name, dataclasses.replace(job_args, provider=provider),
                               opts=pulumi.ResourceOptions(parent=self))
        self.release_name = job.release_name
        self.job_name = job.job_name
        self.namespace = job.namespace
        self.service_account_name = job.service_account_name
        self.register_outputs({"releaseName": self.release_name, "jobName": self.job_name,
                               "namespace": self.namespace, "serviceAccountName": self.service_account_name})
