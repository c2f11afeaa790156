"""Turn what a caller hands a hosted component into its Args dataclass, nested Args included.

A Python program passes the Args class itself. The component provider does not: its Construct hands
the component a plain dict of the schema's inputs under their Python names (pulumi/pulumi#18526;
pulumi/provider/experimental/component.py, ComponentProvider.map_input_properties in pulumi 3.272),
with nested types as dicts and lists of dicts too. Either way the component body then sees the Args
class, so attribute access, defaults and the dataclass's own checks hold for every caller.
"""

import collections.abc
import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import pulumi

from trainstack.components.known_outputs import is_known, known
from trainstack.components.spelling import camel_case
from trainstack.components.stack_config import InputError

T = TypeVar("T")


class InputTypeError(InputError, TypeError):
    """An input of the wrong shape: a TypeError to a Python caller, and to the provider an InputError, which it
    reports as a property error (trainstack/provider.py) rather than a traceback."""


def args_from_inputs(args_type: type[T], value: Any, path: str = "") -> T:
    """`value` as an instance of the dataclass `args_type` (a dict becomes one, key by key).

    `path` is where `value` sits in the component's inputs (schema names), for error messages.
    """
    if isinstance(value, args_type):
        # A Python caller's own Args: shaped and checked as a dict would be (an Output in a plain field).
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(args_type)}
    elif not isinstance(value, Mapping):
        where = f"{path}: " if path else ""
        raise InputTypeError(f"{where}expected {args_type.__name__} or a dict of its fields, got {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(args_type)}
    # A dict may spell a field as the schema does (nodeSelector) or as Python does (node_selector).
    schema_names = {camel_case(name): name for name in fields}
    value = {key if key in fields else schema_names.get(key, key): item for key, item in value.items()}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        where = _joined(path, unknown[0]) if path else unknown[0]
        raise InputTypeError(f"{where}: {args_type.__name__} has no such field. Fix: use one of "
                             f"{', '.join(sorted(fields))}")
    # The annotations as written (objects: these modules do not postpone them); get_type_hints would try
    # to resolve pulumi.Input's own forward reference to Output and fail.
    return args_type(**{name: _converted(fields[name].type, item, _joined(path, camel_case(name)))
                        for name, item in value.items()})


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _takes_outputs(annotation: Any) -> bool:
    """Whether `annotation` is a pulumi.Input[...] (optional or not): a union with Awaitable[...] in it."""
    return any(typing.get_origin(member) is collections.abc.Awaitable for member in typing.get_args(annotation))


def _converted(annotation: Any, value: Any, path: str) -> Any:
    """`value` shaped by `annotation`: nested dataclasses built, in lists and dict values too."""
    if value is None:
        return None
    if isinstance(value, pulumi.Output) and not _takes_outputs(annotation) and is_known(value):
        value = known(value)  # a part's output whose value it knew (EksCluster.gpusPerNode in Python)
    if isinstance(value, pulumi.Output) and not _takes_outputs(annotation):
        # YAML and other consumers can pass an output (or a secret) where the schema says plain; the
        # component needs the value itself to check it and to build its configuration.
        raise InputTypeError(f"{path}: takes a plain value, not an output or a secret. Fix: pass the value itself "
                             "(a literal or stack config), not another resource's output")
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # `X | None`: shaped by X
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        return _converted(members[0], value, path) if len(members) == 1 else value
    if dataclasses.is_dataclass(annotation):
        return args_from_inputs(annotation, value, path)
    if annotation is int:
        return _whole(value)
    if annotation is Any:
        return _whole_numbers(value)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(annotation)
        return [_converted(item, element, f"{path}[{i}]") for i, element in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(annotation)
        return {key: _converted(item, element, _joined(path, key)) for key, element in value.items()}
    return value


def _whole(value: Any) -> Any:
    """A whole float as an int: the wire carries every number as a double (google.protobuf.Value), and the
    SDK's Construct passes integer properties on unconverted (pulumi 3.272,
    pulumi/provider/experimental/component.py, ComponentProvider.map_input_properties)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _whole_numbers(value: Any) -> Any:
    """`_whole` through an untyped value (chart values, the trainer's settings): 2.0 there meant 2."""
    if isinstance(value, Mapping):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return _whole(value)
