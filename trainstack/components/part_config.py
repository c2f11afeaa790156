"""What the hosted parts share: a preflight check raising in the part's input terms, and the inputs a part shares with its stack.

The parts (GkeCluster, GkeGpuNodePool, FilestoreShare, GcsSnapshotBucket, EksCluster, EfsStorage,
S3SnapshotBucket) take a few of a stack's settings, as that stack's typed Args resolved by its resolver
(resolve_gcp, resolve_aws), so one set of rules and defaults holds for a stack and for its parts, and a bad
value is refused with the same line, except that it names the part's input (`pool.max`), not a stack file's key.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pulumi

from trainstack.components.stack_config import InputError, as_input_terms

T = TypeVar("T")


def checked_as_inputs(check: Callable[..., T], provider_keys: Mapping[str, str],
                      renames: Mapping[str, str]) -> Callable[..., T]:
    """`check` (a stack preflight check, raising a one-line pulumi.RunError) raising in the part's terms instead."""
    def checked(*args: Any) -> T:
        try:
            return check(*args)
        except pulumi.RunError as error:
            raise InputError(as_input_terms(str(error), provider_keys, renames)) from None
    return checked


def shared_settings(args: Any, stack_args_type: type) -> dict[str, Any]:
    """The part's inputs that are also the stack's settings (the same field name), to pass on as they are: a new
    shared input cannot be left out by hand. The caller overrides those the part resolves itself (its region)."""
    stack_fields = {f.name for f in dataclasses.fields(stack_args_type)}
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name in stack_fields}
