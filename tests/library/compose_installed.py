"""Run by tests/library/test_install.py with an installed trainstack, outside the checkout (python -I).

Composes the hosted TrainingPlatform on a cluster given by kubeconfig, under Pulumi's mocks, with the chart
the wheel installed as package data (trainstack/charts) and no torch anywhere.
"""

import importlib.util
import sys
from pathlib import Path

import pulumi

assert importlib.util.find_spec("torch") is None, "torch is installed"


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", args.inputs

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="byo", stack="dev", preview=False)

import trainstack  # noqa: E402
import trainstack.infra.core.paths  # noqa: E402
from trainstack.components import (  # noqa: E402
    Bucket,
    GpuNodes,
    Job,
    SharedStorage,
    TrainingPlatform,
    TrainingPlatformArgs,
)

# The installed copies, not the checkout's: the package and the chart both under the venv's prefix.
for path in (trainstack.__file__, trainstack.infra.core.paths.__file__, trainstack.infra.core.paths.TRAINING_JOB_CHART_DIR):
    assert Path(path).resolve().is_relative_to(Path(sys.prefix).resolve()), path
platform = TrainingPlatform("byo", TrainingPlatformArgs(
    kubeconfig="apiVersion: v1\nkind: Config\n", gpu=GpuNodes(gpus_per_node=1), bucket=Bucket(uri="s3://data"),
    image_ref="registry.example.com/trainstack:v1", shared_storage=SharedStorage(storage_class_name="efs", size="100Gi"),
    job=Job(enabled=True, pods_max=1, queue=True)))


@pulumi.runtime.test
def composed():
    return pulumi.Output.all(platform.namespace, platform.job_name).apply(lambda v: print("composed", *v))


composed()
