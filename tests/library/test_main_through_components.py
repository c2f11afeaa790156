"""__main__.py builds each stack through the hosted stack component (the library's first user), and an existing
stack sees no replacement: every URN the program registered before maps, through the aliases, to one it
registers now.

The engine aliases a child through its parent's aliases (pulumi/pulumi pkg/resource/deploy/step_generator.go,
generateAliases and inheritedChildAlias: the child's type appended to the parent alias's qualified type, the
name kept); `engine_aliases` applies that rule to what the mocks recorded. The old program is the one of
16d57a6: the infra stack component at the stack's root.
"""

import os

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.pulumi_harness import ProgramResult, run_program
from tests.stack_runs import REPO


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


def engine_aliases(result: ProgramResult) -> dict[str, set[str]]:
    """Each URN's aliases as the engine computes them from the recorded alias specs."""
    by_urn = {r.urn: r for r in result.registrations}
    stack_prefix = next(iter(by_urn)).rsplit("::", 2)[0]
    computed: dict[str, set[str]] = {}

    # The mock monitor writes a URN's type as <parent's type>$<type> (the stack's type at the root), where the
    # engine writes the parent's whole chain; the rule below is the engine's, on the mock's URNs.
    root_type = "pulumi:pulumi:Stack"

    def type_of(urn: str) -> str:
        return urn.split("::")[-2].rsplit("$", 1)[-1]

    def urn_under(parent_urn: str | None, type_: str, name: str) -> str:
        return f"{stack_prefix}::{type_of(parent_urn) if parent_urn in by_urn else root_type}${type_}::{name}"

    def own(registration) -> list[tuple[str, str, str | None]]:
        """(type, name, parent URN or None for the root) of each alias spec (collapseAliasToUrn)."""
        found = []
        for spec in registration.aliases:
            fields = dict(part.split("=", 1) for part in spec.split(","))
            parent = fields["parent"]
            found.append((fields.get("type", registration.type), fields.get("name", registration.name),
                          None if parent == "root" else registration.parent if parent == "same" else parent))
        return found

    def aliases_of(urn: str) -> set[str]:
        if urn in computed:
            return computed[urn]
        registration = by_urn[urn]
        mine = own(registration)
        found = {urn_under(parent, type_, name) for type_, name, parent in mine}
        if registration.parent in by_urn:  # each alias of the parent, for the child and for each of its own
            for parent_alias in aliases_of(registration.parent):
                for type_, name in [(registration.type, registration.name), *((t, n) for t, n, _ in mine)]:
                    found.add(f"{stack_prefix}::{type_of(parent_alias)}${type_}::{name}")
        computed[urn] = found
        return found

    for urn in by_urn:
        aliases_of(urn)
    return computed


CLOUDS = {"aws": (aws_runs, "aws"), "gcp": (gcp_runs, "gcp")}


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_every_resource_of_the_old_program_is_aliased_by_the_new_one(cloud):
    runs, stack = CLOUDS[cloud]
    config = runs.config_with(runs.JOB_ENABLED)
    new = runs.run_main(config)
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        old = run_program(old_program(cloud), config=config, stack=stack, project="trainstack",
                          outputs=runs.provider_outputs, calls=runs.provider_calls)
    finally:
        os.chdir(cwd)
    aliases = engine_aliases(new)
    facade = new.one(f"trainstack:index:{cloud.capitalize()}Stack")
    moved = {r.urn: r for r in new.registrations if r.urn != facade.urn}
    # Same resources: each old URN is exactly one new resource's alias, and nothing else was added but the façade.
    mapped = {alias: urn for urn in moved for alias in aliases[urn]}
    old_urns = {r.urn for r in old.registrations}
    assert old_urns <= set(mapped), sorted(old_urns - set(mapped))[:5]
    assert len(moved) == len(old_urns)
    # And the same inputs: the move changes nothing but the parent chain.
    old_inputs = {r.urn: r.inputs for r in old.registrations}
    assert all(moved[mapped[urn]].inputs == old_inputs[urn] for urn in old_urns)
    assert new.exports == old.exports
