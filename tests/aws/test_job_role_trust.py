"""The job role's trust through the upgrade to one shared job ServiceAccount (review finding 4)."""

from __future__ import annotations

import json

from tests.aws.stack_runs import config_with, run_main
from trainstack.infra.aws.irsa import trust_policy


def test_the_stack_jobs_previous_account_stays_trusted():
    # Before every job shared trainstack-jobs, the stack job (and CLI jobs that borrowed its account) ran
    # as the account named like the job: a trust that dropped it would cut their bucket access mid-run.
    up = run_main(config_with({"trainstack:job": {"enabled": True, "name": "exp", "namespace": "training"}}))
    policy = json.loads(up.one("aws:iam/role:Role", "trainstack-job-role").inputs["assumeRolePolicy"])
    (condition,) = [s["Condition"]["StringEquals"] for s in policy["Statement"]]
    subjects = next(value for key, value in condition.items() if key.endswith(":sub"))
    assert subjects == ["system:serviceaccount:training:trainstack-jobs", "system:serviceaccount:training:exp"]


def test_one_account_keeps_a_single_subject():
    policy = json.loads(trust_policy("arn", "issuer", "ns", "sa", also_trusted=["sa"]))
    assert policy["Statement"][0]["Condition"]["StringEquals"]["issuer:sub"] == "system:serviceaccount:ns:sa"
