"""A hosted part's settings through the stack file's own parser, its errors in the part's input terms.

The parts (GkeCluster, GkeGpuNodePool, FilestoreShare, EksCluster) take a few of a stack file's settings.
They hand them to parse_gcp_config / parse_aws_config as the stack config the CLI would pass, so one set
of rules and defaults holds for a stack and for its parts, and a bad value is refused with the same
line, except that it names the part's input (`pool.max`), not a stack file's key.
"""

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pulumi

from trainstack.components.stack_config import InputError, as_input_terms, config_value
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.errors import ConfigError

T = TypeVar("T")


def raw_config(provider_keys: Mapping[str, Any], **trainstack: Any) -> dict[str, str]:
    """Stack config as the CLI passes it: `<cloud>:<key>` from provider_keys, `trainstack:<key>` from the
    keywords (camelCase keys); unset (None) values left out, objects and lists as JSON text."""
    raw = {key: value for key, value in provider_keys.items() if value is not None}
    raw.update({f"{NAMESPACE}:{key}": value for key, value in trainstack.items() if value is not None})
    return {key: value if isinstance(value, str) else json.dumps(_set_only(config_value(value)))
            for key, value in raw.items()}


def _set_only(value: Any) -> Any:
    """`value` without the unset (None) entries of its objects: the parser's defaults hold for those."""
    if isinstance(value, Mapping):
        return {key: _set_only(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_set_only(item) for item in value]
    return value


def parsed_as_inputs(parse: Callable[[dict[str, str], str], T], raw: dict[str, str],
                     provider_keys: Mapping[str, str], renames: Mapping[str, str]) -> T:
    """`parse(raw, stack)`, a ConfigError raised as an InputError in the part's terms.

    `provider_keys` maps an input to the provider key it sets (project: gcp:project), as for the stack
    façades; `renames` maps a config path, as as_input_terms leaves it (`gpuPools.t4`,
    `network.masterCidr`), to the part's input that stands for it (`pool`, `masterCidr`).
    """
    with errors_as_part_inputs(provider_keys, renames):
        return parse(raw, pulumi.get_stack())


@contextlib.contextmanager
def errors_as_part_inputs(provider_keys: Mapping[str, str], renames: Mapping[str, str]) -> Iterator[None]:
    """A ConfigError of the stack's loader or resolver (in a stack file's terms) raised as an InputError in the
    part's terms (part_terms)."""
    try:
        yield
    except ConfigError as error:
        raise InputError(part_terms(str(error), provider_keys, renames)) from None


def part_terms(message: str, provider_keys: Mapping[str, str], renames: Mapping[str, str]) -> str:
    """A stack's error `message` (config keys, `pulumi config set`) in the part's input terms (see parsed_as_inputs)."""
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


def checkable_id(value: Any, kind: str, position: int = 0) -> Any:
    """An ID input as the stack parser may check it: a plain ID as given; another resource's output (not known
    while the program runs) as a well-formed stand-in, so the parser checks everything else. The part builds
    with the input itself, never with the stand-in. `position` keeps the stand-ins of a list distinct."""
    return value if isinstance(value, str) else f"{kind}-givenasanoutput{position}"
