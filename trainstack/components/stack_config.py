"""A hosted stack's Args as the stack config the Pulumi CLI would hand `__main__.py`.

The stack façades (GcpStack, AwsStack) take the same settings as `Pulumi.<stack>.yaml`, typed, and turn
them back into `trainstack:<key>` config so that the stack's own parser checks them: one set of rules
and one set of error messages for a stack file and for a library caller.
"""

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pulumi.provider.experimental.util import camel_case

from infra.config import NAMESPACE


def config_value(value: Any) -> Any:
    """Dataclasses as camelCase dicts without unset (None) fields; dict keys (pool names) kept as given."""
    if dataclasses.is_dataclass(value):
        return {camel_case(f.name): config_value(getattr(value, f.name))
                for f in dataclasses.fields(value) if getattr(value, f.name) is not None}
    if isinstance(value, Mapping):
        return {key: config_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [config_value(item) for item in value]
    return value


def stack_config(args: Any, provider_keys: Mapping[str, str]) -> dict[str, str]:
    """`args` as raw stack config: `<cloud>:<key>` for the fields in provider_keys, `trainstack:<key>` else.

    Values are strings as the CLI passes them (objects and lists as JSON text).
    """
    raw: dict[str, str] = {}
    for key, value in config_value(args).items():
        if value is None:
            continue
        python_name = next(f.name for f in dataclasses.fields(args) if camel_case(f.name) == key)
        full_key = provider_keys.get(python_name, f"{NAMESPACE}:{key}")
        raw[full_key] = value if isinstance(value, str) else json.dumps(value)
    return raw
