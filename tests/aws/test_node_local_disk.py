"""Local disk on the EKS GPU group: the autoscaler's template node must offer what the job's pod
requests, and a pool too small for the pod is refused (review finding 1)."""

from __future__ import annotations

import pytest

from tests.aws.stack_runs import (
    JOB_ENABLED,
    NODE_GROUP,
    RELEASE,
    config_with,
    run_main,
    run_main_expecting_error,
)
from trainstack.infra.aws.node_disk import NODE_TEMPLATE_RESOURCE_TAG, eks_allocatable_ephemeral_storage
from trainstack.infra.kubernetes.pod_requests import parse_quantity, pod_requests
from trainstack.infra.kubernetes.training_job import chart_default_values, deep_merge, pod_resources

TAG = f"{NODE_TEMPLATE_RESOURCE_TAG}ephemeral-storage"
GIB = 2**30


def test_the_estimate_follows_nodeadm_on_the_filesystem_not_the_volume():
    # 100 GiB root volume: a 98 GiB filesystem (2% margin for partitions and XFS metadata), 1 GiB
    # kubeReserved, 9.8 GiB below the nodefs.available eviction threshold: 87.2 GiB, rounded down.
    # Before the margin the template said 89Gi, more than a real node's allocatable.
    assert eks_allocatable_ephemeral_storage(100) == "87Gi"
    assert eks_allocatable_ephemeral_storage(200) == "175Gi"


def test_the_gpu_group_tells_the_autoscaler_its_local_disk_and_the_job_fits_it():
    up = run_main(config_with(JOB_ENABLED))
    tags = up.one(NODE_GROUP, "trainstack-eks-gpu").inputs["tags"]
    assert tags[TAG] == "140Gi"  # Pulumi.aws.yaml: diskSizeGb 160
    job = up.one(RELEASE, "train").inputs["values"]
    request = pod_requests(pod_resources(deep_merge(chart_default_values(), job)))["ephemeral-storage"]
    assert request <= parse_quantity(tags[TAG])
    # The system group scales from its minimum, never from 0: no template needed there.
    assert TAG not in up.one(NODE_GROUP, "trainstack-eks-system").inputs["tags"]


@pytest.mark.parametrize("job", [JOB_ENABLED, {}])  # the queue is sized for the pod even with no job
def test_a_gpu_disk_too_small_for_the_pod_is_refused(job):
    stop, _, _ = run_main_expecting_error(config_with({**job, "trainstack:gpuNodes": {"diskSizeGb": 20}}))
    assert "local disk" in str(stop) and "diskSizeGb" in str(stop), stop


def test_the_shipped_stack_does_not_warn_against_itself(monkeypatch):
    """Issue 30.18: Pulumi.aws.yaml as shipped (160 GB) holds the trainer's /tmp and the data cache's cap."""
    import pulumi
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_main(config_with(JOB_ENABLED))
    assert not [w for w in warnings if "storage.cache.sizeLimit" in w], warnings
    warnings.clear()
    run_main(config_with({**JOB_ENABLED, "trainstack:gpuNodes": {"diskSizeGb": 100}}))  # the old default did
    assert [w for w in warnings if "storage.cache.sizeLimit 100Gi" in w], warnings
