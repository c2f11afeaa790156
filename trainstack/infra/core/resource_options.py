"""Options shared by every child a component creates."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def child_options(
    parent: pulumi.Resource,
    provider: pulumi.ProviderResource | None,
    component_opts: pulumi.ResourceOptions | None,
    *,
    depends_on: Sequence[pulumi.Resource] = (),
    **extra: object,
) -> pulumi.ResourceOptions:
    """parent=the component, the explicit provider, and the component's own `depends_on` plus `depends_on`.

    Children do not inherit a component's depends_on (the engine waits only for the parent's
    registration), so "deploy the job after X" would otherwise not hold for the resources inside it.
    A depends_on that is an Output (the stacks' preflight gate, which resolves to a list once the
    account's answers are in) is combined as an Output.
    """
    inherited = component_opts.depends_on if component_opts is not None else None
    if inherited is None:
        inherited = []
    elif isinstance(inherited, pulumi.Resource):
        inherited = [inherited]
    elif isinstance(inherited, pulumi.Output):
        combined_later = inherited.apply(lambda resolved: [*resolved, *depends_on])
        return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=combined_later, **extra)
    elif not isinstance(inherited, Sequence):
        raise TypeError(f"depends_on of a component must be a resource or a list of them, got {inherited!r}")
    combined = [*inherited, *depends_on]
    return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=combined or None, **extra)
