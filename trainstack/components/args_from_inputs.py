"""Turn what a caller hands a hosted component into its Args dataclass, nested Args included.

A Python program passes the Args class itself. The component provider does not: its Construct hands
the component a plain dict of the schema's inputs under their Python names (pulumi/pulumi#18526;
pulumi/provider/experimental/component.py, ComponentProvider.map_input_properties in pulumi 3.272),
with nested types as dicts and lists of dicts too. Either way the component body then sees the Args
class, so attribute access, defaults and the dataclass's own checks hold for every caller.
"""

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def args_from_inputs(args_type: type[T], value: Any) -> T:
    """`value` as an instance of the dataclass `args_type` (a dict becomes one, key by key)."""
    if isinstance(value, args_type):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"expected {args_type.__name__} or a dict of its fields, got {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(args_type)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TypeError(f"{args_type.__name__} has no field(s) {unknown} (it has: {sorted(fields)})")
    # The annotations as written (objects: these modules do not postpone them); get_type_hints would try
    # to resolve pulumi.Input's own forward reference to Output and fail.
    return args_type(**{name: _converted(fields[name].type, item) for name, item in value.items()})


def _converted(annotation: Any, value: Any) -> Any:
    """`value` shaped by `annotation`: nested dataclasses built, in lists and dict values too."""
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # `X | None`: shaped by X
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        return _converted(members[0], value) if len(members) == 1 else value
    if dataclasses.is_dataclass(annotation):
        return args_from_inputs(annotation, value)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(annotation)
        return [_converted(item, element) for element in value]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(annotation)
        return {key: _converted(item, element) for key, element in value.items()}
    return value
