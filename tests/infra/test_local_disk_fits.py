"""The default job of every stack asks no more local disk (ephemeral-storage) than its GPU nodes can
give: a pod that asks more stays Pending for ever, and the autoscaler never adds a node for it
("Insufficient ephemeral-storage").

Allocatable local disk is estimated as each cloud's kubelet configuration reserves it:
- GKE (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, "Local ephemeral storage
  reservation"): capacity - min(50%, 6 GiB + 35%, 100 GiB) - the 10% eviction threshold, where
  capacity is the boot disk, or the local SSDs (375 GB each) when they back ephemeral storage;
- EKS AL2023 (awslabs/amazon-eks-ami nodeadm, internal/kubelet/config.go: kubeReserved
  ephemeral-storage 1Gi, evictionHard nodefs.available 10%): capacity - 1 GiB - 10%.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.workloads.chart import render
from trainstack.infra.kubernetes.pod_requests import parse_quantity

GIB = 2**30
LOCAL_SSD_BYTES = 375 * 10**9


def gke_allocatable(capacity: int) -> Fraction:
    reserved = min(Fraction(capacity, 2), 6 * GIB + Fraction(35, 100) * capacity, Fraction(100 * GIB))
    return capacity - reserved - Fraction(capacity, 10)


def eks_allocatable(capacity: int) -> Fraction:
    return capacity - GIB - Fraction(capacity, 10)


def trainer_disk_request(values) -> Fraction:
    job = next(o for o in render(values) if o["kind"] == "Job")
    trainer = next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "trainer")
    return parse_quantity(trainer["resources"]["requests"]["ephemeral-storage"])


def test_the_estimates():
    # 100 GiB: GKE reserves min(50, 6 + 35, 100) = 41 GiB and evicts below 10 GiB free.
    assert gke_allocatable(100 * GIB) == 49 * GIB
    assert eks_allocatable(100 * GIB) == 89 * GIB


@pytest.mark.parametrize("stack", ["gcp", "gcp-a3"])
def test_gcp_jobs_fit_their_gpu_pool(stack):
    from tests import stack_runs as common
    from tests.gcp import stack_runs
    from tests.gcp.stack_runs import NODE_POOL, RELEASE

    config = common.config_with(stack_runs.REPO / f"Pulumi.{stack}.yaml", stack_runs.JOB_ENABLED)
    up = stack_runs.run_main(config, stack=stack, outputs=stack_runs.provider_outputs, calls=stack_runs.provider_calls)
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["storage"]["cache"]["enabled"] is True  # the platform's default: the data cache is on
    pools = [p for p in up.by_type(NODE_POOL) if p.inputs["nodeConfig"].get("guestAccelerators")]
    assert pools
    for pool in pools:
        node = pool.inputs["nodeConfig"]
        ssds = (node.get("ephemeralStorageLocalSsdConfig") or {}).get("localSsdCount", 0)
        capacity = ssds * LOCAL_SSD_BYTES if ssds else node["diskSizeGb"] * 10**9
        assert trainer_disk_request(values) <= gke_allocatable(capacity), pool.name


def test_aws_job_fits_its_gpu_nodes():
    from tests.aws.stack_runs import JOB_ENABLED, LAUNCH_TEMPLATE, RELEASE, config_with, run_main

    up = run_main(config_with(JOB_ENABLED))
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["storage"]["cache"]["enabled"] is True
    template = up.one(LAUNCH_TEMPLATE, "trainstack-eks-gpu")
    volume = template.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert trainer_disk_request(values) <= eks_allocatable(int(volume) * GIB)
