"""The components moved from trainstack:index to their schema modules (trainstack/components/tokens.py), and
nothing an existing stack holds is replaced: each registers an alias from its index token, and the engine maps
the old URNs of the component and of everything under it to the new ones.

The stacks' graphs before the move are tests/library/fixtures/urns-before-modules.json (the goldens of d7c6ba9,
as the engine writes their URNs: tests/library/golden_urns.py). The engine's rule is applied as
test_main_through_components.py applies it (pulumi/pulumi pkg/resource/deploy/step_generator.go,
getOldResource: the URN, then each alias; generateAliases: a child of a resource found through an alias also
gets inheritedChildAlias of that alias).
"""

import json
import os
from pathlib import Path

import pulumi
import pytest

from tests.library.test_facades import construct
from tests.library.test_main_through_components import engine_matches, engine_urns
from tests.pulumi_harness import run_program
from tests.stack_runs import REPO
from trainstack.components.tokens import TOKENS, index_token, moved_from_index, token

BEFORE = json.loads((Path(__file__).parent / "fixtures" / "urns-before-modules.json").read_text())


def run_stack(stack: str):
    """The stack's graph as its golden test builds it (tests/golden_graphs.py)."""
    if stack == "aws":
        from tests.aws.stack_runs import JOB_ENABLED, config_with, run_main
        return run_main(config_with(JOB_ENABLED))
    if stack == "aws-p5":
        from tests.aws.p5_runs import JOB_ENABLED, p5_config, run_p5
        return run_p5(p5_config(JOB_ENABLED))
    if stack == "gcp":
        from tests.gcp.stack_runs import JOB_ENABLED, config_with, run_main
        return run_main(config_with(JOB_ENABLED))
    if stack == "gcp-a3":
        from tests.gcp.test_a3 import a3_config, run
        return run(a3_config())
    from tests.gcp.test_a4 import a4_config, run
    return run(a4_config())


@pytest.mark.parametrize("stack", sorted(BEFORE))
def test_every_resource_of_a_stack_before_the_move_is_taken_over_by_exactly_one(stack):
    new = run_stack(stack)
    urns = engine_urns(new)
    prefix = next(iter(urns.values())).rsplit("::", 2)[0]
    before = {f"{prefix}::{urn}" for urn in BEFORE[stack]}
    takes, unmatched = engine_matches(new, before)
    assert unmatched == [], unmatched[:5]  # nothing new: the same resources
    assert sorted(takes.values()) == sorted(before), sorted(before - set(takes.values()))[:5]
    # The stack's component is under its module's token now, and found through its alias.
    cloud = stack.split("-")[0]
    (facade,) = [r for r in new.registrations if r.type == token(f"{cloud.capitalize()}Stack")]
    assert takes[urns[facade.urn]] == f"{prefix}::{index_token(f'{cloud.capitalize()}Stack')}::trainstack"


@pytest.mark.parametrize("type_token", [token("TrainingPlatform"), index_token("TrainingPlatform")])
def test_a_component_asked_for_by_either_token_registers_its_module_token_with_the_alias(type_token):
    inputs = {"kubeconfig": "apiVersion: v1\n", "gpu": {"gpusPerNode": 1}, "bucket": {"uri": "s3://b"},
              "imageRef": "r:1"}
    result, _ = construct(type_token, inputs, stack="byo", outputs=lambda type_, name, inputs: {},
                          calls=lambda token, args: {})
    platform = result.one(token("TrainingPlatform"), "trainstack")
    assert platform.aliases == [f"parent=same,type={index_token('TrainingPlatform')}"]
    # Nothing else at the top: the infra platform inside it keeps its own (index) token, under the component.
    assert [r.parent for r in result.by_type(index_token("TrainingPlatform"))] == [platform.urn]


def test_the_callers_aliases_are_kept_and_each_also_gets_the_index_type():
    # A caller moving a component under a new parent says Alias(parent=old): its old URN has the old type too.
    def program() -> None:
        opts = pulumi.ResourceOptions(aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE),
                                               pulumi.Alias(name="old", type_="my:index:Thing")])
        pulumi.ComponentResource(token("Kueue"), "queue", None, moved_from_index("Kueue", opts))

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_program(program, config={}, stack="dev", project="trainstack")
    finally:
        os.chdir(cwd)
    assert sorted(result.one(token("Kueue")).aliases) == sorted([
        "parent=root", "parent=same,name=old,type=my:index:Thing",  # the caller's, as given
        f"parent=same,type={index_token('Kueue')}",  # where it is
        f"parent=root,type={index_token('Kueue')}",  # beside the caller's that kept the type
    ])


def test_every_hosted_component_has_a_module_token_and_distinct_tokens():
    from trainstack.components import HOSTED

    assert sorted(c.__name__ for c in HOSTED) == sorted(TOKENS)
    assert len(set(TOKENS.values())) == len(TOKENS)
    assert not set(TOKENS.values()) & {index_token(c) for c in TOKENS}


@pytest.mark.parametrize("type_token", [token("TrainingPlatform"), index_token("TrainingPlatform")])
def test_an_index_token_is_warned_about_in_one_line_naming_its_module_token(type_token, monkeypatch):
    # pulumi-yaml resolves a deprecated schema token without showing its deprecationMessage: the provider says it.
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    inputs = {"kubeconfig": "apiVersion: v1\n", "gpu": {"gpusPerNode": 1}, "bucket": {"uri": "s3://b"},
              "imageRef": "r:1"}
    construct(type_token, inputs, stack="byo", outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})
    deprecated = [w for w in warnings if "is deprecated: use" in w]
    if type_token == index_token("TrainingPlatform"):
        assert deprecated == [f"{index_token('TrainingPlatform')} is deprecated: use {token('TrainingPlatform')} (the same inputs and "
                              "outputs; docs/library.md, Type tokens)"]
    else:
        assert deprecated == []
