"""`pulumi preview` of a fresh GCP stack: nothing exists yet, so names, addresses, the kubeconfig and the
image digest are unknown. The program must still register the whole graph, and it asks the account
only what it must (zones, GKE versions) plus the access token the registry login needs.
"""

from __future__ import annotations

import pytest

from tests.gcp.stack_runs import (
    CLUSTER,
    GET_CLIENT_CONFIG,
    GET_CLUSTER,
    GET_ENGINE_VERSIONS,
    GET_MACHINE_TYPES,
    GET_PROJECT_SERVICE,
    GET_ZONES,
    JOB_ENABLED,
    K8S_PROVIDER,
    PV,
    RELEASE,
    config_with,
    run_main,
)
from tests.pulumi_harness import UNKNOWN


@pytest.fixture(scope="module")
def preview():
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
    assert preview.exports["clusterName"] == "trainstack-gcp"  # from config
    assert preview.exports["logsCommand"].startswith("kubectl logs -f -n default")
    assert preview.one(K8S_PROVIDER).inputs["kubeconfig"] is UNKNOWN
    assert preview.one(PV).inputs["spec"]["csi"]["volumeAttributes"]["ip"] is UNKNOWN
    values = preview.one(RELEASE, "train").inputs["values"]
    assert values["image"] is UNKNOWN


def test_preview_asks_the_account_for_zones_and_versions(preview):
    tokens = sorted(token for token, _ in preview.invokes)
    # The two APIs the checks need (compute, container), whether the cluster exists, then the checks.
    assert tokens == sorted([GET_PROJECT_SERVICE, GET_PROJECT_SERVICE, GET_CLUSTER, GET_ZONES, GET_ENGINE_VERSIONS,
                             GET_CLIENT_CONFIG, GET_MACHINE_TYPES])
    # The checked answers reach the resources: the preview already shows the version it will create.
    assert preview.one(CLUSTER).inputs["minMasterVersion"] == "1.34.4-gke.1100000"
