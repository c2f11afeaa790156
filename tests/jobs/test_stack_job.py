"""The stack's own job (trainstack:job) and CLI jobs share one rendering of the cluster-side values."""

from __future__ import annotations

import json

import pytest

from infra.job_submission import PER_JOB_KEYS
from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3

RELEASE = "kubernetes:helm.sh/v3:Release"
RUNS = {
    "aws": lambda: aws_runs.run_main(aws_runs.config_with({"trainstack:job": {"enabled": True, "queue": True}})),
    "gcp": lambda: gcp_runs.run_main(gcp_runs.config_with(gcp_runs.JOB_ENABLED)),
    "gcp-a3": lambda: test_a3.run(),
}


@pytest.mark.parametrize("stack", RUNS)
def test_the_stacks_job_has_the_values_a_cli_job_gets(stack):
    result = RUNS[stack]()
    submission = result.exports["jobSubmission"]
    job_name = result.exports["jobName"]
    assert submission["stackJob"] == job_name
    [release] = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == job_name]
    values = json.loads(json.dumps(release.inputs["values"]))
    shared = {key: value for key, value in values.items() if key not in PER_JOB_KEYS}
    assert shared == submission["values"]
    assert values["serviceAccount"]["annotations"] == submission["serviceAccountAnnotations"]
