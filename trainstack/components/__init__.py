"""trainstack's hosted components: what `pulumi package add` offers every Pulumi language, and Python imports.

Each is a typed façade over a component in trainstack/infra/ (the one this repository's own stacks build): its
Args are plain types, lists, dicts and nested Args dataclasses, so Pulumi's schema inference can read
them (no `from __future__ import annotations` here: the analyzer reads annotations unevaluated), and
handles between components are outputs (cluster name, kubeconfig, image ref), never Python objects.

- TrainingPlatform: the training platform alone, on a cluster you already have (by kubeconfig).
- NvidiaDevicePlugin, Kueue, TrainingJob: its parts, each on a cluster given by kubeconfig.
- GpuDirectNetworks, GpuDirect: GPUDirect networking on GKE A3 (the VPCs; the in-cluster half).
- GcpStack / AwsStack: the whole stack of Pulumi.gcp.yaml / Pulumi.aws.yaml, from the same settings.
- GkeCluster, GkeGpuNodePool, FilestoreShare, GcsSnapshotBucket: the GKE stack's parts, each on the outputs of
  the one before.
- EksCluster, EfsStorage, S3SnapshotBucket: the EKS stack's parts (the cluster with its node groups; the shared
  filesystem; the bucket).

Each one's type token, in the schema module of its cloud or of Kubernetes, is in tokens.py.
"""

from typing import TYPE_CHECKING

from trainstack.components.device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from trainstack.components.job_args import Job, SecretEnv
from trainstack.components.kubernetes_args import Toleration
from trainstack.components.kueue import Kueue, KueueArgs
from trainstack.components.platform import (
    Bucket,
    GpuNodes,
    SharedStorage,
    TrainingPlatform,
    TrainingPlatformArgs,
)
from trainstack.components.training_job import TrainingJob, TrainingJobArgs

if TYPE_CHECKING:  # what __getattr__ below returns, for mypy and pyright (py.typed)
    from trainstack.components.aws import (
        AwsExistingNetwork,
        AwsStack,
        AwsStackArgs,
        EksGpuNodes,
        EksSystemNodes,
    )
    from trainstack.components.efs_storage import EfsStorage, EfsStorageArgs
    from trainstack.components.eks_cluster import EksCluster, EksClusterArgs
    from trainstack.components.filestore_share import FilestoreShare, FilestoreShareArgs
    from trainstack.components.gcp import (
        Filestore,
        GcpExistingNetwork,
        GcpStack,
        GcpStackArgs,
        GkeGpuPool,
        GkeNetwork,
        GkeSystemNodes,
    )
    from trainstack.components.gcs_snapshot_bucket import GcsSnapshotBucket, GcsSnapshotBucketArgs
    from trainstack.components.gke_cluster import GkeCluster, GkeClusterArgs
    from trainstack.components.gke_node_pool import GkeGpuNodePool, GkeGpuNodePoolArgs
    from trainstack.components.gpu_direct import (
        GpuDirect,
        GpuDirectArgs,
        GpuDirectNetworks,
        GpuDirectNetworksArgs,
    )
    from trainstack.components.s3_snapshot_bucket import S3SnapshotBucket, S3SnapshotBucketArgs

    HOSTED: list[type]

# The cloud parts import their cloud's SDK, which only that cloud's extra installs ([aws], [gcp]): each is
# imported on first use, so `pip install 'trainstack[kubernetes]'` is enough for TrainingPlatform and its parts.
_CLOUD_MODULES = {
    "trainstack.components.aws": ("AwsExistingNetwork", "AwsStack", "AwsStackArgs", "EksGpuNodes", "EksSystemNodes"),
    "trainstack.components.efs_storage": ("EfsStorage", "EfsStorageArgs"),
    "trainstack.components.eks_cluster": ("EksCluster", "EksClusterArgs"),
    "trainstack.components.filestore_share": ("FilestoreShare", "FilestoreShareArgs"),
    "trainstack.components.gcp": ("Filestore", "GcpExistingNetwork", "GcpStack", "GcpStackArgs", "GkeGpuPool",
                                  "GkeNetwork", "GkeSystemNodes"),
    "trainstack.components.gcs_snapshot_bucket": ("GcsSnapshotBucket", "GcsSnapshotBucketArgs"),
    "trainstack.components.gke_cluster": ("GkeCluster", "GkeClusterArgs"),
    "trainstack.components.gke_node_pool": ("GkeGpuNodePool", "GkeGpuNodePoolArgs"),
    "trainstack.components.gpu_direct": ("GpuDirect", "GpuDirectArgs", "GpuDirectNetworks", "GpuDirectNetworksArgs"),
    "trainstack.components.s3_snapshot_bucket": ("S3SnapshotBucket", "S3SnapshotBucketArgs"),
}
_CLOUD_MODULE_OF = {name: module for module, names in _CLOUD_MODULES.items() for name in names}
# The components the provider hosts, in schema order.
_HOSTED_NAMES = ("TrainingPlatform", "NvidiaDevicePlugin", "Kueue", "TrainingJob", "GpuDirectNetworks", "GpuDirect",
                 "GcpStack", "AwsStack", "GkeCluster", "GkeGpuNodePool", "FilestoreShare", "GcsSnapshotBucket",
                 "EksCluster", "EfsStorage", "S3SnapshotBucket")


def _lazy_attribute(name: str):
    if name == "HOSTED":
        return [globals()[n] if n in globals() else _lazy_attribute(n) for n in _HOSTED_NAMES]
    if name in _CLOUD_MODULE_OF:
        import importlib

        module = _CLOUD_MODULE_OF[name]
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as missing:
            if not (missing.name or "").startswith("pulumi_"):
                raise
            raise ModuleNotFoundError(
                f"{name} needs {missing.name}, which this environment lacks. Fix: install trainstack with the extra "
                f"of its cloud ([aws], [gcp] or [infra] for both; docs/library.md, Install)", name=missing.name) from None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not TYPE_CHECKING:  # a module __getattr__ would tell mypy that any name exists
    __getattr__ = _lazy_attribute


__all__ = [
    "AwsExistingNetwork", "AwsStack", "AwsStackArgs", "Bucket", "EksGpuNodes", "EksSystemNodes",
    "Filestore", "GcpExistingNetwork", "GcpStack", "GcpStackArgs", "GkeGpuPool", "GkeNetwork",
    "GkeSystemNodes", "GpuNodes", "HOSTED", "Job", "SecretEnv", "SharedStorage",
    "Toleration", "TrainingPlatform", "TrainingPlatformArgs", "NvidiaDevicePlugin", "NvidiaDevicePluginArgs",
    "Kueue", "KueueArgs", "TrainingJob", "TrainingJobArgs", "GpuDirect", "GpuDirectArgs", "GpuDirectNetworks",
    "GpuDirectNetworksArgs", "GkeCluster", "GkeClusterArgs", "GkeGpuNodePool", "GkeGpuNodePoolArgs", "FilestoreShare",
    "FilestoreShareArgs", "EksCluster", "EksClusterArgs", "EfsStorage", "EfsStorageArgs", "GcsSnapshotBucket",
    "GcsSnapshotBucketArgs", "S3SnapshotBucket", "S3SnapshotBucketArgs",
]
