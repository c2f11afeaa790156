"""The firewall rule that lets the GKE control plane of a private cluster call the pods of what the stack installs.

A private cluster's control plane reaches the nodes only on 443 and 10250 unless a rule allows more
(GKE docs, "Add firewall rules for specific use cases",
cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#add_firewall_rules). An admission
webhook or an aggregated API served on another port then times out ("failed calling webhook ...
context deadline exceeded"), and every object it guards is refused. The rule allows, from the
control plane's range to the network's instances (their alias ranges hold the pods), exactly the
ports the installed charts serve such calls on, and only to the VMs that run as the stack's node
service account (target_service_accounts): without a target a rule applies to every instance of the
network, other VMs of an existing network included. With a Shared VPC the rule belongs in the host
project, which this stack does not manage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR
from trainstack.infra.core.release_chart import release_chart_path
from trainstack.infra.core.versions import KUEUE_CHART

# Every chart the GCP stack installs -> the container ports the API server calls on (webhooks, APIServices).
# Kueue v0.19.2: the manager's webhook server on 9443 (charts/kueue/values.yaml managerConfig
# `webhook.port: 9443`, webhookService targetPort 9443) and the visibility APIService (installed
# unconditionally, templates/visibility/apiservice_v1beta2.yaml) served on 8082
# (templates/visibility/service.yaml targetPort 8082), kubernetes-sigs/kueue tag v0.19.2. The
# training-job chart has no webhook and no APIService. A chart not listed here cannot be installed
# (control_plane_ports refuses it): adding one means reading its manifests first.
CONTROL_PLANE_CALLED_PORTS: Mapping[str, tuple[int, ...]] = {
    KUEUE_CHART.chart: (9443, 8082),
    "training-job": (),
}
# The chart version each entry above was read at: a bump of the pin must re-read the ports (tested).
PORTS_READ_AT_VERSION: Mapping[str, str] = {KUEUE_CHART.chart: "0.19.2"}


def chart_key(chart: str) -> str:
    """The table's key of a Release's `chart`: the OCI URL or repository name, or `training-job` for ours."""
    return "training-job" if chart in (release_chart_path(), str(TRAINING_JOB_CHART_DIR)) \
        else chart


def control_plane_ports(charts: Sequence[str]) -> list[int]:
    ports: set[int] = set()
    for chart in charts:
        key = chart_key(chart)
        if key not in CONTROL_PLANE_CALLED_PORTS:
            raise ValueError(f"chart {chart!r} is not in CONTROL_PLANE_CALLED_PORTS: list the ports its webhooks "
                             "and APIServices serve on (or none)")
        ports.update(CONTROL_PLANE_CALLED_PORTS[key])
    return sorted(ports)


@dataclass(frozen=True, kw_only=True)
class ControlPlaneFirewallArgs:
    network_name: pulumi.Input[str]
    master_cidr: str  # the private control plane's /28
    charts: Sequence[str]  # what the stack installs, as its Releases name them
    node_service_account: pulumi.Input[str]  # the email every node pool of the stack runs as


class ControlPlaneFirewall(pulumi.ComponentResource):
    """One ingress rule for the ports of `charts` (the stack creates it only when there are some)."""

    ports: list[int]
    rule: gcp.compute.Firewall | None  # None when the charts serve the control plane on no port

    def __init__(self, name: str, args: ControlPlaneFirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:ControlPlaneFirewall", name, None, opts)
        self.ports = control_plane_ports(args.charts)
        self.rule = None
        if self.ports:
            self.rule = gcp.compute.Firewall(
                name,
                network=args.network_name,
                direction="INGRESS",
                source_ranges=[args.master_cidr],
                target_service_accounts=[args.node_service_account],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in self.ports])],
                description="GKE control plane to admission webhooks and aggregated APIs of the stack's charts",
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"ports": self.ports})
