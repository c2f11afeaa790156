"""One identity for every job: a Pulumi-owned ServiceAccount the cloud identity trusts, with or without a stack job."""

from __future__ import annotations

import json

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3
from trainstack.infra.kubernetes.job_service_account import JOB_SERVICE_ACCOUNT

SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
RELEASE = "kubernetes:helm.sh/v3:Release"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
WI_ANNOTATION = "iam.gke.io/gcp-service-account"


def _run(stack: str, enabled: bool):
    job = {"trainstack:job": {"enabled": enabled}}
    if stack == "aws":
        return aws_runs.run_main(aws_runs.config_with(job))
    if stack == "gcp":
        return gcp_runs.run_main(gcp_runs.config_with({**gcp_runs.WITH_PROJECT, **job}))
    return test_a3.run(test_a3.a3_config(job))


def _trusted_subjects(stack: str, result) -> list[str]:
    """`<namespace>/<ServiceAccount>`s the cloud lets act as the job: IRSA's subs, or the WI members."""
    if stack == "aws":
        [role] = [r for r in result.by_type(aws_runs.IAM_ROLE) if "IRSA" in str(r.inputs.get("description"))
                  and r.name.endswith("-job-role")]
        policy = json.loads(role.inputs["assumeRolePolicy"])
        [statement] = policy["Statement"]
        subs = next(v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub"))
        return sorted(sub.removeprefix("system:serviceaccount:").replace(":", "/")
                      for sub in ([subs] if isinstance(subs, str) else subs))
    bindings = [r for r in result.by_type("gcp:serviceaccount/iAMMember:IAMMember")
                if r.inputs.get("role") == "roles/iam.workloadIdentityUser"]
    return sorted(binding.inputs["member"].split("[", 1)[1].rstrip("]") for binding in bindings)


@pytest.mark.parametrize("enabled", [False, True], ids=["no-stack-job", "stack-job"])
@pytest.mark.parametrize("stack", ["aws", "gcp", "gcp-a3"])
def test_every_job_runs_as_the_stacks_own_trusted_service_account(stack, enabled):
    result = _run(stack, enabled)
    submission = result.exports["jobSubmission"]
    namespace = submission["namespace"]
    [account] = result.by_type(SERVICE_ACCOUNT)
    metadata = account.inputs["metadata"]
    assert (metadata["name"], metadata["namespace"]) == (JOB_SERVICE_ACCOUNT, namespace)
    annotation = IRSA_ANNOTATION if stack == "aws" else WI_ANNOTATION
    assert metadata["annotations"][annotation] == submission["serviceAccountAnnotations"][annotation]
    # Besides the stack job's account from before the shared one (named like the job: review finding 4).
    assert _trusted_subjects(stack, result) == sorted([f"{namespace}/{JOB_SERVICE_ACCOUNT}",
                                                       f"{namespace}/train"])  # trainstack:job.name's default
    assert submission["serviceAccount"] == JOB_SERVICE_ACCOUNT
    releases = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == result.exports.get("jobName")]
    assert len(releases) == (1 if enabled else 0)
    for release in releases:  # the stack's job neither creates nor deletes the identity
        assert release.inputs["values"]["serviceAccount"] == {"create": False, "name": JOB_SERVICE_ACCOUNT,
                                                              "annotations": {}}
