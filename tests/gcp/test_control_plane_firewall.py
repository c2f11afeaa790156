"""The private GKE control plane reaches the webhooks and aggregated APIs of every chart the stack installs
(trainstack/infra/gcp/control_plane_firewall.py): a firewall rule from the control-plane range allows their ports."""

from __future__ import annotations

import pytest

from tests.gcp.stack_runs import NODE_POOL, RELEASE, REPO, provider_calls, provider_outputs, run_main
from tests.gcp.stack_runs import config_with as gcp_config_with
from tests.stack_runs import config_with
from tests.stack_runs import run_main as run_stack
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.gcp.control_plane_firewall import (
    CONTROL_PLANE_CALLED_PORTS,
    PORTS_READ_AT_VERSION,
    chart_key,
    control_plane_ports,
)

FIREWALL = "gcp:compute/firewall:Firewall"
A3 = REPO / "Pulumi.gcp-a3.yaml"


@pytest.fixture(scope="module")
def a3_up():
    config = config_with(A3, {"gcp:project": "ml-research-123", "trainstack:job": {"enabled": True}})
    return run_stack(config, stack="gcp-a3", outputs=provider_outputs, calls=provider_calls)


def test_every_chart_the_stack_installs_has_its_control_plane_ports_listed(a3_up):
    # Derived from the graph, not from a list: a chart added to the stack without an entry fails here.
    charts = {release.inputs["chart"] for release in a3_up.by_type(RELEASE)}
    assert KUEUE_CHART.chart in charts  # the A3 stack queues its job with Kueue
    assert all(chart_key(chart) in CONTROL_PLANE_CALLED_PORTS for chart in charts), charts


def test_the_control_plane_may_call_kueues_webhook_and_visibility_ports(a3_up):
    charts = [release.inputs["chart"] for release in a3_up.by_type(RELEASE)]
    rule = a3_up.one(FIREWALL, "trainstack-control-plane-calls").inputs
    assert rule["direction"] == "INGRESS"
    assert rule["sourceRanges"] == ["172.16.0.32/28"]  # trainstack:network.masterCidr's default
    assert rule["allows"] == [{"protocol": "tcp", "ports": [str(p) for p in control_plane_ports(charts)]}]
    assert {"9443", "8082"} <= set(rule["allows"][0]["ports"])
    # Only the stack's nodes (every pool runs as the node service account), not every VM of the network.
    node_accounts = {pool.inputs["nodeConfig"]["serviceAccount"] for pool in a3_up.by_type(NODE_POOL)}
    assert len(node_accounts) == 1 and rule["targetServiceAccounts"] == list(node_accounts)
    assert next(iter(node_accounts)).endswith(".iam.gserviceaccount.com")


def test_kueue_is_installed_only_after_the_rule_exists(a3_up):
    rule = a3_up.one(FIREWALL, "trainstack-control-plane-calls")
    kueue = next(r for r in a3_up.by_type(RELEASE) if r.inputs["chart"] == KUEUE_CHART.chart)
    ancestors = set()
    frontier = [kueue.urn]
    while frontier:
        reg = a3_up.by_urn(frontier.pop())
        ancestors.update(reg.dependencies)
        frontier.extend(u for u in reg.dependencies if u not in ancestors)
        if reg.parent and reg.parent.split("::")[-2] != "pulumi:pulumi:Stack":
            frontier.append(reg.parent)
    assert rule.urn in ancestors or rule.parent in ancestors


def test_the_gcp_stack_opens_kueues_ports_as_a3_does():
    up = run_main()  # Pulumi.gcp.yaml: Kueue by default, as on every stack
    [rule] = up.by_type(FIREWALL)
    assert sorted(int(p) for allow in rule.inputs["allows"] for p in allow["ports"]) == [8082, 9443]
    kueue = up.one(RELEASE, "trainstack-kueue")
    assert rule.urn in kueue.dependencies  # installed only once the control plane can call it


def test_without_a_queue_nothing_is_opened():
    up = run_main(gcp_config_with({"trainstack:job": {"queue": False}}))  # no Kueue; the chart has no webhook
    assert [r.name for r in up.by_type(FIREWALL)] == []


def test_a_chart_with_unknown_ports_is_refused():
    with pytest.raises(ValueError, match="not in CONTROL_PLANE_CALLED_PORTS"):
        control_plane_ports(["oci://example.com/charts/with-a-webhook"])


def test_the_ports_were_read_at_the_pinned_kueue_version():
    # Bumping trainstack/infra/core/versions.py's Kueue pin must come with reading its chart's webhook and visibility
    # ports again (charts/kueue/values.yaml, templates/visibility/service.yaml at the new tag).
    assert PORTS_READ_AT_VERSION[KUEUE_CHART.chart] == KUEUE_CHART.version
