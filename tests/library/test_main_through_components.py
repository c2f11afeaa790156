"""__main__.py builds each stack through the hosted stack component (the library's first user), and an existing
stack sees no replacement: every URN the program registered before maps, through the aliases, to one it
registers now, with the same inputs and the same provider.

The mock monitor writes a URN's type as <parent's type>$<type> (pulumi/runtime/mocks.py make_urn), where the
engine writes the parent's whole chain of types: on the mock's URNs a grandchild under a moved parent looks
the same before and after. `engine_urns` rebuilds the engine's URNs, and `engine_matches` applies the
engine's alias rule to them in registration order (pulumi/pulumi pkg/resource/deploy/step_generator.go:
generateAliases takes the resource's own aliases, then, when its parent was found through an alias,
inheritedChildAlias of that one alias (sg.aliases) for the resource and for each of its own aliases: the
child's type under the alias's qualified type, the parent's name prefix of the child's name replaced by
the alias's name). The old program is the one of 16d57a6: the infra stack component at the stack's root.
"""

import os

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.pulumi_harness import ProgramResult, run_program
from tests.stack_runs import REPO
from trainstack.components.tokens import token


def old_program(cloud: str):
    """__main__.py before the façades: the parsed config straight into the infra stack, at the root."""
    def program() -> None:
        import pulumi

        from trainstack.infra.config import raw_config
        if cloud == "aws":
            from trainstack.infra.aws import AwsStack, AwsStackArgs, parse_aws_config
            outputs = AwsStack("trainstack", AwsStackArgs(config=parse_aws_config(raw_config()))).outputs
        else:
            from trainstack.infra.gcp import GcpStack, GcpStackArgs, parse_gcp_config
            outputs = GcpStack("trainstack", GcpStackArgs(config=parse_gcp_config(raw_config()))).outputs
        for key, value in outputs.items():
            pulumi.export(key, value)
    return program


def engine_urns(result: ProgramResult) -> dict[str, str]:
    """Each mock URN -> the URN the engine writes: the parent's whole chain of types (a top-level resource,
    whose parent is the stack, has its own type only)."""
    by_urn = {r.urn: r for r in result.registrations}
    stack_prefix = next(iter(by_urn)).rsplit("::", 2)[0]
    qualified: dict[str, str] = {}

    def qualified_type(urn: str) -> str:
        if urn not in qualified:
            registration = by_urn[urn]
            parent = registration.parent
            qualified[urn] = (f"{qualified_type(parent)}${registration.type}" if parent in by_urn
                              else registration.type)
        return qualified[urn]

    return {urn: f"{stack_prefix}::{qualified_type(urn)}::{by_urn[urn].name}" for urn in by_urn}


def parents_first(result: ProgramResult) -> list:
    """The registrations in the order recorded, each moved after its parent: the engine registers a child only
    once its parent's URN is known (the mock records a component when its registration completes)."""
    by_urn = {r.urn: r for r in result.registrations}
    ordered: dict[str, object] = {}

    def visit(registration) -> None:
        if registration.urn in ordered:
            return
        if registration.parent in by_urn:
            visit(by_urn[registration.parent])
        ordered[registration.urn] = registration

    for registration in result.registrations:
        visit(registration)
    return list(ordered.values())


def inherited_name(name: str, parent_name: str, parent_alias: str) -> str:
    """The child's name under its parent's alias: the parent's name prefix replaced by the alias's name."""
    return parent_alias.rsplit("::", 1)[1] + name[len(parent_name):] if name.startswith(parent_name) else name


def engine_matches(new: ProgramResult, old_urns: set[str]) -> tuple[dict[str, str], list[str]]:
    """(new engine URN -> the old engine URN it takes over, new engine URNs that match none), as the engine
    decides them while the program registers (step_generator.go getOldResource: the URN itself, else the first
    alias that names an old resource)."""
    urns = engine_urns(new)
    stack_prefix = next(iter(urns.values())).rsplit("::", 2)[0]
    matched: dict[str, str] = {}  # sg.aliases: set only when a resource was found through an alias
    taken: dict[str, str] = {}
    unmatched: list[str] = []

    def urn_of(parent: str | None, type_: str, name: str) -> str:
        return f"{stack_prefix}::{parent.split('::')[2] + '$' if parent else ''}{type_}::{name}"

    for registration in parents_first(new):
        urn = urns[registration.urn]
        parent = urns.get(registration.parent)
        own = []
        for spec in registration.aliases:  # collapseAliasToUrn
            fields = dict(part.split("=", 1) for part in spec.split(","))
            assert "urn" not in fields, spec
            alias_parent = None if fields["parent"] == "root" else parent if fields["parent"] == "same" \
                else urns[fields["parent"]]
            own.append(urn_of(alias_parent, fields.get("type", registration.type),
                              fields.get("name", registration.name)))
        candidates = list(own)
        if parent in matched:  # inheritedChildAlias of the parent's one alias
            parent_alias, parent_name = matched[parent], registration.parent.rsplit("::", 1)[1]
            candidates += [urn_of(parent_alias, type_, inherited_name(name, parent_name, parent_alias))
                           for type_, name in [(registration.type, registration.name),
                                               *((a.split("::")[2].rsplit("$", 1)[-1], a.rsplit("::", 1)[1])
                                                 for a in own)]]
        hit = urn if urn in old_urns else next((c for c in candidates if c in old_urns), None)
        if hit is None:
            unmatched.append(urn)
            continue
        assert hit not in taken, f"{hit} taken over twice"
        taken[hit] = urn
        if hit != urn:
            matched[urn] = hit
    return {new_urn: old_urn for old_urn, new_urn in taken.items()}, unmatched


CLOUDS = {"aws": (aws_runs, "aws"), "gcp": (gcp_runs, "gcp")}


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
@pytest.mark.parametrize("job", [False, True], ids=["default", "job"])
def test_every_resource_of_the_old_program_is_taken_over_by_the_new_one(cloud, job):
    runs, stack = CLOUDS[cloud]
    config = runs.config_with(runs.JOB_ENABLED if job else {})
    new = runs.run_main(config)
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        old = run_program(old_program(cloud), config=config, stack=stack, project="trainstack",
                          outputs=runs.provider_outputs, calls=runs.provider_calls)
    finally:
        os.chdir(cwd)
    old_urns, new_urns = engine_urns(old), engine_urns(new)
    olds = {old_urns[r.urn]: r for r in old.registrations}
    news = {new_urns[r.urn]: r for r in new.registrations}
    takes, unmatched = engine_matches(new, set(olds))
    # Same resources: each old one taken over by exactly one new one; nothing added but the façade.
    facade = new_urns[new.one(token(f"{cloud.capitalize()}Stack")).urn]
    assert unmatched == [facade], unmatched[:5]
    assert sorted(takes.values()) == sorted(olds), sorted(set(olds) - set(takes.values()))[:5]
    # The same inputs and the same provider (a resource whose provider changes is replaced): the move
    # changes nothing but the parent chain.
    old_of = {new_urn: olds[old_urn] for new_urn, old_urn in takes.items()}
    assert all(news[urn].inputs == old.inputs for urn, old in old_of.items())

    def same_provider(new_ref: str | None, old_ref: str | None) -> bool:
        new_ref, old_ref = new_urns.get(new_ref, new_ref), old_urns.get(old_ref, old_ref)
        return new_ref == old_ref or takes.get(new_ref) == old_ref

    assert all(same_provider(news[urn].provider, old.provider) for urn, old in old_of.items())
    assert all(same_provider(ref, old.providers.get(package)) for urn, old in old_of.items()
               for package, ref in news[urn].providers.items())
    assert new.exports == old.exports
