"""`pulumi destroy` and CLI-submitted jobs: what the mocked graph can show.

CLI jobs are Helm releases outside Pulumi's state. What costs money in them is GPU nodes, and those
are nodes of the stack's own GPU pools (the jobs' nodeSelector and tolerations are the pool's, from
jobSubmission): destroy deletes the pools and the cluster, so nothing that bills outlives it. The
bucket, where the jobs' checkpoints are, is kept. What a mock cannot show (the API server's
ordering of a delete) is in docs/jobs.md: `trainstack cancel --all` first, so the shared claim is not
held by a job's pods while Pulumi deletes it.
"""

from __future__ import annotations

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3

RUNS = {
    "aws": lambda: aws_runs.run_main(aws_runs.config_with({"trainstack:job": {"queue": True}})),
    "gcp": lambda: gcp_runs.run_main(),
    "gcp-a3": lambda: test_a3.run(),
}
DELETED_ON_DESTROY = ("eks:index:Cluster", "eks:index:ManagedNodeGroup", "gcp:container/cluster:Cluster",
                      "gcp:container/nodePool:NodePool")
KEPT = ("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket")


def _type(registration) -> str:
    return registration.urn.split("::")[-2].rsplit("$", 1)[-1]


@pytest.mark.parametrize("stack", RUNS)
def test_destroy_removes_the_nodes_cli_jobs_run_on_and_keeps_the_bucket(stack):
    result = RUNS[stack]()
    compute = [r for r in result.registrations if _type(r) in DELETED_ON_DESTROY]
    assert {_type(r) for r in compute} & {"eks:index:ManagedNodeGroup", "gcp:container/nodePool:NodePool"}
    for registration in compute:
        assert not registration.retain_on_delete and not registration.protect, registration.urn
    [bucket] = [r for r in result.registrations if _type(r) in KEPT]
    assert bucket.retain_on_delete
    # CLI jobs land only on the stack's GPU pool: the same placement as the stack's own job.
    values = result.exports["jobSubmission"]["values"]
    assert values["nodeSelector"] and values["tolerations"]
