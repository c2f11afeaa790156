"""`pulumi preview` of a fresh stack: nothing exists yet, so IDs, ARNs, the kubeconfig and the image digest
are unknown. The program must still register the whole graph without failing (pitfall: code inside an
`apply` never runs on unknowns, so everything checked at program time must not depend on them).
"""

from __future__ import annotations

import pytest

from tests.aws.stack_runs import (
    EKS_CLUSTER,
    GET_ADDON_VERSION,
    GET_AVAILABILITY_ZONES,
    GET_CALLER_IDENTITY,
    GET_CLUSTER_VERSIONS,
    GET_INSTANCE_TYPE_OFFERINGS,
    GET_LOG_GROUPS,
    JOB_ENABLED,
    K8S_PROVIDER,
    RELEASE,
    config_with,
    filter_values,
    run_main,
)
from tests.pulumi_harness import UNKNOWN


@pytest.fixture(scope="module")
def preview():
    # No provider-computed outputs: a preview knows none of them.
    return run_main(config_with(JOB_ENABLED), preview=True, outputs=None)


@pytest.fixture(scope="module")
def up():
    return run_main(config_with(JOB_ENABLED))


def test_preview_registers_the_same_graph_as_up(preview, up):
    assert [(r.type, r.name, r.parent) for r in preview.registrations] == [
        (r.type, r.name, r.parent) for r in up.registrations]


def test_preview_leaves_what_it_cannot_know_unknown(preview):
    assert preview.exports["kubeconfig"] is UNKNOWN
    assert preview.exports["imageRef"] is UNKNOWN
    assert preview.exports["bucketName"] is UNKNOWN
    # Known from config alone: the cluster's name and the commands to follow the job.
    assert preview.exports["clusterName"] == "trainstack-aws"
    assert preview.exports["logsCommand"].startswith("kubectl logs -f -n default")
    assert preview.one(K8S_PROVIDER).inputs["kubeconfig"] is UNKNOWN
    assert preview.one(EKS_CLUSTER).inputs["vpcId"] is UNKNOWN
    values = preview.one(RELEASE, "train").inputs["values"]
    assert values["image"] is UNKNOWN
    assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] is UNKNOWN


def test_preview_asks_the_account_only_what_it_must(preview):
    # No token for a registry that does not exist yet: only preflight.py's questions, who is running it (the
    # cluster's account and partition), and whether EKS left its control-plane log group behind (adopted).
    assert sorted(token for token, _ in preview.invokes) == sorted(
        [GET_CLUSTER_VERSIONS, GET_ADDON_VERSION, GET_INSTANCE_TYPE_OFFERINGS, GET_CALLER_IDENTITY, GET_LOG_GROUPS,
         GET_AVAILABILITY_ZONES])
    offerings = next(args for token, args in preview.invokes if token == GET_INSTANCE_TYPE_OFFERINGS)
    assert offerings["locationType"] == "availability-zone"
    assert filter_values(offerings, "instance-type") == ["g4dn.xlarge", "g5.xlarge", "g6.xlarge", "t3.medium"]
    assert filter_values(offerings, "location") == ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
