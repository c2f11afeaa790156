"""Run by tests/library/test_install.py: TrainingPlatform composed with neither cloud's SDK importable.

What `pip install 'trainstack[kubernetes]'` gives: pulumi and pulumi-kubernetes only. The cloud SDKs that
this environment happens to hold are made unimportable first, as if absent; then the platform is built under
Pulumi's mocks, and a cloud part is asked for to show the error that names the missing extra.
"""

import importlib.abc
import sys

ABSENT = ("pulumi_aws", "pulumi_gcp", "pulumi_eks", "pulumi_docker_build")


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Absent())

import pulumi  # noqa: E402


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", args.inputs

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="byo", stack="dev", preview=False)

from trainstack.components import (  # noqa: E402
    Bucket,
    GpuNodes,
    Job,
    SharedStorage,
    TrainingPlatform,
    TrainingPlatformArgs,
)

platform = TrainingPlatform("byo", TrainingPlatformArgs(
    kubeconfig="apiVersion: v1\nkind: Config\n", gpu=GpuNodes(gpus_per_node=1), bucket=Bucket(uri="s3://data"),
    image_ref="registry.example.com/trainstack:v1", shared_storage=SharedStorage(storage_class_name="efs", size="100Gi"),
    job=Job(enabled=True, pods_max=1)))


@pulumi.runtime.test
def composed():
    return pulumi.Output.all(platform.namespace, platform.job_name).apply(lambda v: print("composed", *v))


composed()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ABSENT)
print("cloud modules", loaded or "none")
try:
    from trainstack.components import EksCluster  # noqa: F401
except ModuleNotFoundError as error:
    print("asked for EksCluster:", error)
