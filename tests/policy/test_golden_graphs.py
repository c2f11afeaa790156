"""Every rule of the policy pack over every stack's golden graph: no mandatory violation.

Picks up any tests/<cloud>/golden/*.json, so the GCP stack's graph is checked as soon as it lands.
The graph records inputs as the program registers them; children of multi-language components
(pulumi-eks) and objects inside Helm releases appear only in a real `pulumi preview --policy-pack policy`.
"""

from __future__ import annotations

import pytest

from policy.rules import MANDATORY, RULES

from .graphs import GOLDEN_GRAPHS, load, stack_name

STACK_CONFIG_RULES = {"budget-present"}  # read Pulumi.<stack>.yaml, not the graph: checked below


def findings(graph) -> list[tuple[str, str, str, str]]:
    """(rule, level, resource, message) for every violation in the graph."""
    resources, stack = load(graph)
    found = []
    for rule in RULES:
        if rule.name in STACK_CONFIG_RULES:
            continue
        if rule.scope == "stack":
            found += [(rule.name, rule.level, r.name if r else "(stack)", m) for r, m in rule.check(resources, stack)]
        else:
            found += [(rule.name, rule.level, r.name, m) for r in resources for m in rule.check(r, stack)]
    return found


def test_there_is_a_golden_graph():
    assert [stack_name(g) for g in GOLDEN_GRAPHS if stack_name(g) == "aws"]


@pytest.mark.parametrize("graph", GOLDEN_GRAPHS, ids=[g.name for g in GOLDEN_GRAPHS])
def test_no_mandatory_violation(graph):
    mandatory = [f for f in findings(graph) if f[1] == MANDATORY]
    assert not mandatory, "\n".join(f"{rule} on {name}: {message}" for rule, _, name, message in mandatory)


def test_aws_graph_advisories_are_the_known_trade_offs():
    """The AWS stack's deliberate choices show up as advisories (this also proves the rules read the
    graph's real shapes): mutable ECR tags (the job runs by digest) and no KMS key for Secrets."""
    (graph,) = [g for g in GOLDEN_GRAPHS if stack_name(g) == "aws"]
    advisories = {(rule, name) for rule, level, name, _ in findings(graph) if level != MANDATORY}
    assert advisories == {
        ("registry-immutable-tags", "trainstack-registry"),
        ("kubernetes-secrets-encryption", "trainstack-eks"),
    }


@pytest.mark.parametrize("graph", GOLDEN_GRAPHS, ids=[g.name for g in GOLDEN_GRAPHS])
def test_stack_config_sets_a_budget(graph):
    resources, stack = load(graph)
    (rule,) = [r for r in RULES if r.name == "budget-present"]
    assert rule.check(resources, stack) == []
