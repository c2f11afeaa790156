"""Spot interruptions on EKS: the stack relies on the managed node group's own handling (Capacity
Rebalancing; drain at the rebalance recommendation or the two-minute notice), so docs/aws.md must state
what that bounds: under two minutes for the SIGTERM checkpoint, whatever the chart's grace period, and at
most `checkpointEvery` steps lost when it does not finish."""

from __future__ import annotations

import re

from tests.aws.stack_runs import NODE_GROUP, RELEASE, REPO, run_main
from trainstack.infra.kubernetes.training_job import chart_default_values

DOCS = REPO / "docs" / "aws.md"


def _spot_paragraph() -> str:
    text = DOCS.read_text()
    start = text.index("**Spot interruptions.**")
    return " ".join(text[start:text.index("\n\n", start)].split())


def test_no_interruption_handler_is_installed_so_the_node_group_is_the_one():
    up = run_main()
    gpu = next(g for g in up.by_type(NODE_GROUP) if g.name == "trainstack-eks-gpu")
    assert gpu.inputs["capacityType"] == "SPOT"
    charts = {r.inputs["chart"] for r in up.by_type(RELEASE)}
    assert not any("termination-handler" in chart for chart in charts), charts


def test_the_docs_state_the_bound_the_two_minute_notice_sets():
    paragraph = _spot_paragraph()
    values = chart_default_values()
    grace = values["job"]["terminationGracePeriodSeconds"]
    every = values["train"]["checkpointEvery"]
    assert "two-minute interruption notice" in paragraph
    assert "under two minutes" in paragraph  # the bound on the SIGTERM checkpoint
    assert re.search(rf"\b{grace} s grace period does not extend", paragraph), paragraph  # not the chart's grace
    assert f"`checkpointEvery` steps ({every} by default)" in paragraph  # what a missed save loses
    minutes = values["train"]["checkpointEveryMinutes"]
    assert f"`checkpointEveryMinutes` of training ({minutes:g} by default)" in paragraph  # or the time bound
    assert "Capacity Rebalancing" in paragraph
