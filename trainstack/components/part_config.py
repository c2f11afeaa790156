"""A hosted part's errors in the part's input terms.

The parts (GkeCluster, GkeGpuNodePool, FilestoreShare, GcsSnapshotBucket, EksCluster, EfsStorage,
S3SnapshotBucket) take a few of a stack's settings, as that stack's typed Args resolved by its resolver
(resolve_gcp, resolve_aws), so one set of rules and defaults holds for a stack and for its parts, and a bad
value is refused with the same line, except that it names the part's input (`pool.max`), not a stack file's key.
"""

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pulumi

from trainstack.components.stack_config import InputError, as_input_terms
from trainstack.infra.config.errors import ConfigError

T = TypeVar("T")


@contextlib.contextmanager
def errors_as_part_inputs(provider_keys: Mapping[str, str], renames: Mapping[str, str]) -> Iterator[None]:
    """A ConfigError of the stack's loader or resolver (in a stack file's terms) raised as an InputError in the
    part's terms (part_terms)."""
    try:
        yield
    except ConfigError as error:
        raise InputError(part_terms(str(error), provider_keys, renames)) from None


def part_terms(message: str, provider_keys: Mapping[str, str], renames: Mapping[str, str]) -> str:
    """A stack's error `message` (config keys, `pulumi config set`) in the part's input terms (see errors_as_part_inputs)."""
    message = as_input_terms(message, provider_keys)
    for path, name in sorted(renames.items(), key=lambda item: -len(item[0])):
        message = re.sub(rf"(?<![\w.]){re.escape(path)}(?![\w])", name, message)
    return message


def checked_as_inputs(check: Callable[..., T], provider_keys: Mapping[str, str],
                      renames: Mapping[str, str]) -> Callable[..., T]:
    """`check` (a stack preflight check, raising a one-line pulumi.RunError) raising in the part's terms instead."""
    def checked(*args: Any) -> T:
        try:
            return check(*args)
        except pulumi.RunError as error:
            raise InputError(part_terms(str(error), provider_keys, renames)) from None
    return checked


def shared_settings(args: Any, stack_args_type: type) -> dict[str, Any]:
    """The part's inputs that are also the stack's settings (the same field name), to pass on as they are: a new
    shared input cannot be left out by hand. The caller overrides those the part resolves itself (its region)."""
    stack_fields = {f.name for f in dataclasses.fields(stack_args_type)}
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name in stack_fields}
