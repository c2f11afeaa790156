"""Pulumi programs and constants the component tests share (run them with tests.pulumi_harness)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from tests.pulumi_harness import unknown_output
from trainstack.infra import (
    Kueue,
    KueueArgs,
    NvidiaDevicePlugin,
    NvidiaDevicePluginArgs,
    SecretEnv,
    TrainingImage,
    TrainingImageArgs,
    TrainingJob,
    TrainingJobArgs,
)

# Resource types as the engine sees them.
PROVIDER = "pulumi:providers:kubernetes"
RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = "docker-build:index:Image"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
TRAINING_IMAGE = "trainstack:index:TrainingImage"
TRAINING_JOB = "trainstack:index:TrainingJob"
KUEUE = "trainstack:index:Kueue"
DEVICE_PLUGIN = "trainstack:index:NvidiaDevicePlugin"
COMPONENTS = (TRAINING_IMAGE, TRAINING_JOB, KUEUE, DEVICE_PLUGIN)

REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
REPOSITORY = f"{REGISTRY}/trainstack"
DIGEST = "sha256:" + "0123456789abcdef" * 4
PASSWORD = "registry-password-that-must-stay-secret"
IRSA_ROLE_ARN = "arn:aws:iam::123456789012:role/trainstack-job"
GPU_NODE_LABELS = {"trainstack.dev/pool": "gpu"}
GPU_TOLERATIONS = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)


def provider_outputs(type_: str, name: str, inputs: dict) -> dict:
    """What docker-build reports after a push (a preview with build_on_preview=False reports nothing)."""
    if type_ == IMAGE:
        return {"digest": DIGEST, "ref": f"{inputs['tags'][0]}@{DIGEST}"}
    return {}


def make_provider(*, unknown_kubeconfig: bool = False) -> k8s.Provider:
    # A fresh stack's preview does not know the cluster's kubeconfig yet.
    kubeconfig = unknown_output() if unknown_kubeconfig else pulumi.Output.secret('{"apiVersion": "v1"}')
    return k8s.Provider("k8s", kubeconfig=kubeconfig)


def image_args(**overrides: Any) -> TrainingImageArgs:
    args = TrainingImageArgs(
        repository_url=REPOSITORY,
        registry_server=REGISTRY,
        registry_username="AWS",
        registry_password=PASSWORD,
    )
    return replace(args, **overrides)


def job_args(provider: k8s.Provider, /, **overrides: Any) -> TrainingJobArgs:
    """4 nodes x 8 GPUs on a queue with a PVC, IRSA and a W&B key: the job the AWS stack deploys."""
    args = TrainingJobArgs(
        provider=provider,
        image_ref=f"{REPOSITORY}@{DIGEST}",
        namespace="training",
        pods_min=2,
        pods_max=4,
        gpus_per_pod=8,
        pvc_name="shared-efs",
        queue_name="training",
        service_account_annotations={"eks.amazonaws.com/role-arn": IRSA_ROLE_ARN},
        node_selector=dict(GPU_NODE_LABELS),
        tolerations=GPU_TOLERATIONS,
        train={"preset": "gpt2-medium", "maxSteps": 5000},
        secret_env=(SecretEnv(name="WANDB_API_KEY", secret_name="wandb", key="api-key"),),
        tensorboard=True,
    )
    return replace(args, **overrides)


@dataclass
class Stack:
    provider: k8s.Provider
    image: TrainingImage
    kueue: Kueue
    device_plugin: NvidiaDevicePlugin
    job: TrainingJob


def full_stack(*, unknown_kubeconfig: bool = False, **job_overrides: Any) -> Stack:
    """All four components wired the way a cloud stack wires them; exports their outputs."""
    provider = make_provider(unknown_kubeconfig=unknown_kubeconfig)
    image = TrainingImage("image", image_args())
    kueue = Kueue(
        "kueue",
        KueueArgs(
            provider=provider,
            namespace="training",
            gpu_quota=32,
            cpu_quota="384",
            memory_quota="1536Gi",
            node_labels=dict(GPU_NODE_LABELS),
            tolerations=GPU_TOLERATIONS,
        ),
    )
    device_plugin = NvidiaDevicePlugin(
        "nvidia", NvidiaDevicePluginArgs(provider=provider, node_selector=dict(GPU_NODE_LABELS))
    )
    overrides = {"image_ref": image.ref, "queue_name": kueue.local_queue_name, **job_overrides}
    job = TrainingJob("gpt2", job_args(provider, **overrides))
    pulumi.export("imageRef", image.ref)
    pulumi.export("queue", kueue.local_queue_name)
    pulumi.export("clusterQueue", kueue.cluster_queue_name)
    pulumi.export("jobName", job.job_name)
    pulumi.export("releaseName", job.release_name)
    pulumi.export("namespace", job.namespace)
    pulumi.export("serviceAccount", job.service_account_name)
    return Stack(provider, image, kueue, device_plugin, job)


def walk(value: Any, path: str = ""):
    """(path, leaf) for every leaf of a decoded input tree, paths as Registration.secret_paths spells them."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")
    else:
        yield path, value
