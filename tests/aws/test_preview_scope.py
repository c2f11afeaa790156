"""The preview role's namespace scope does not follow the config (review finding 12): the EKS access
policy association's access_scope is ForceNew, and a replacement keyed like the old association ends
with it deleted (create, then delete of the same key)."""

from __future__ import annotations

import pytest

from tests.aws.stack_runs import EKS_CLUSTER, config_with, run_main

PREVIEW_ROLE = "arn:aws:iam::123456789012:role/github-preview"


def _scope(overrides):
    result = run_main(config_with({"trainstack:previewRoleArn": PREVIEW_ROLE, **overrides}))
    [entry] = result.one(EKS_CLUSTER).inputs["accessEntries"].values()
    return entry["accessPolicies"]["release-state"]["accessScope"]


@pytest.mark.parametrize("change", [
    {"trainstack:job": {"queue": False}},
    {"trainstack:clusterAutoscaler": False, "trainstack:gpuNodes": {"desired": 0}},
])
def test_turning_kueue_or_the_autoscaler_off_keeps_the_scope(change):
    assert _scope(change) == _scope({})
