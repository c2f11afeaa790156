"""Ordering through values: a consumer of the value waits for (and on destroy goes before) the resources."""

from __future__ import annotations

from typing import TypeVar

import pulumi

T = TypeVar("T")


def available_after(value: pulumi.Output[T], *resources: pulumi.CustomResource) -> pulumi.Output[T]:
    """`value`, resolved only once every one of `resources` exists.

    E.g. a role's ARN after its policy attachments: whatever uses the role never runs without them.
    """
    return pulumi.Output.all(value, *[resource.id for resource in resources]).apply(lambda values: values[0])
