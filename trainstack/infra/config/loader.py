"""One loader for every settings dataclass: a stack file's config and a component's inputs become the same Args.

The Args dataclasses (trainstack/infra/aws/settings.py, job_settings.py, ...) are the one input model: a
hosted component takes them, and the stack program loads its `trainstack:*` config into them. Each field
declares its own check (`setting(as_int, minimum=1)`: a reader of reader.py and its options), which the
loader runs with the field's full key (`trainstack:gpuNodes.min`), so a bad value is refused with the same
line wherever it came from; the resolvers (resolve_aws, resolve_job) then apply defaults and cross-field rules.

Two sources, one walk:
- a stack file (`load`, `load_stack`): the CLI's strings, objects and lists as JSON text, decoded here; an
  unknown key or a non-object is refused in the stack file's terms (reject_unknown, `write ... as a YAML mapping`);
- a component's caller (`from_inputs`): the Args instance itself, or the dict the provider's Construct hands over
  (pulumi/pulumi#18526; pulumi/provider/experimental/component.py, ComponentProvider.map_input_properties in
  pulumi 3.272) with nested types as dicts, keys in camelCase or snake_case and every number a double. An
  Output goes through untouched where the field is a `pulumi.Input`; in a plain field it is refused with the
  property's path, unless a part made it from a value it knew (known_outputs.py).
A field renamed (`setting(renamed_to="pods_min")`) is still taken under its old name, moved with one warning.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pulumi

from trainstack.infra.config.errors import NAMESPACE, ConfigError, InputError
from trainstack.infra.config.known_outputs import is_known, known
from trainstack.infra.config.reader import check_stack_keys, decoded, reject_unknown

T = TypeVar("T")
_SETTING = "trainstack.setting"


def setting(read: Callable[..., Any] | None = None, *, default: Any = None, renamed_to: str | None = None,
            stack_file: bool = True, **options: Any) -> Any:
    """A dataclass field whose value the loader checks with `read(value, key, **options)` (reader.py), or, with
    `renamed_to`, a deprecated field whose value moves to that field. `stack_file=False`: a component's input only
    (another resource's output, say), never a stack file's key."""
    return dataclasses.field(default=default, metadata={_SETTING: (read, options, renamed_to), "stack_file": stack_file})


def _in_stack_files(f: dataclasses.Field) -> bool:
    return f.metadata.get("stack_file", True)


def or_default(value: Any, default: Any) -> Any:
    """A loaded setting, or the resolver's default when it is unset (None; false and 0 are values)."""
    return default if value is None else value


def camel_case(name: str) -> str:
    """A Python field name as the schema and the stack file spell it (`gpus_per_node` -> `gpusPerNode`): the rule
    of pulumi.provider.experimental.util.camel_case (pulumi 3.272), which the schema inference uses."""
    first, *rest = name.split("_")
    return first + "".join(word[:1].upper() + word[1:] for word in rest)


def config_value(value: Any) -> Any:
    """`value` as a stack file writes it: dataclasses as camelCase dicts without unset (None) fields; dict keys
    (pool names) kept as given."""
    if dataclasses.is_dataclass(value):
        return {camel_case(f.name): config_value(getattr(value, f.name))
                for f in dataclasses.fields(value) if getattr(value, f.name) is not None}
    if isinstance(value, Mapping):
        return {key: config_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [config_value(item) for item in value]
    return value


def keys_of(args_type: type) -> tuple[str, ...]:
    """The keys a settings dataclass takes, as a stack file spells them, renamed ones left out."""
    return tuple(camel_case(f.name) for f in dataclasses.fields(args_type) if _renamed_to(f) is None and _in_stack_files(f))


def renamed_keys(args_type: type) -> dict[str, str]:
    """Old key -> new key, for the fields a settings dataclass still takes under an old name."""
    return {camel_case(f.name): camel_case(_renamed_to(f)) for f in dataclasses.fields(args_type) if _renamed_to(f)}


class InputTypeError(InputError, TypeError):
    """An input of the wrong shape: a TypeError to a Python caller, and to the provider an InputError, which it
    reports as a property error (trainstack/provider.py) rather than a traceback."""


# --- a stack file ------------------------------------------------------------------------------------------

def load(args_type: type[T], value: Any, key: str) -> T:
    """`value` (a stack file's object: a mapping, JSON text, or None for unset) as `args_type`, every field checked."""
    value = {} if value is None else decoded(value)
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"expected an object with keys {', '.join(keys_of(args_type))}, got {value!r}",
                          f"write {key} as a YAML mapping in Pulumi.<stack>.yaml")
    # An old name is taken (and moved by _built), never offered: "did you mean" names the new keys only.
    reject_unknown(key + ".", (name for name in value if name not in renamed_keys(args_type)), keys_of(args_type))
    fields = {camel_case(f.name): f.name for f in dataclasses.fields(args_type)}
    return _built(args_type, {fields[name]: item for name, item in value.items()}, key, stack_file=True)


def load_stack(args_type: type[T], raw: Mapping[str, str], cloud: str, provider_fields: Mapping[str, str],
               provider_fix: str = "", also_allowed: tuple[str, ...] = ("cloud",)) -> T:
    """A whole stack file's config (`raw`: every key as the CLI hands it) as `args_type`.

    `provider_fields` maps a field to the provider key it is read from (region: aws:region); every other field
    is `trainstack:<camelName>`. Keys nobody reads are refused, another cloud's are named in a warning."""
    stack_fields = [f for f in dataclasses.fields(args_type) if f.name not in provider_fields and _in_stack_files(f)]
    check_stack_keys(raw, (*also_allowed, *(camel_case(f.name) for f in stack_fields)), cloud,
                     tuple(full_key.split(":", 1)[1] for full_key in provider_fields.values()), provider_fix)
    values = {name: raw.get(full_key) or None for name, full_key in provider_fields.items()}
    values.update({f.name: raw[f"{NAMESPACE}:{camel_case(f.name)}"] for f in stack_fields
                   if f"{NAMESPACE}:{camel_case(f.name)}" in raw})
    return _built(args_type, values, NAMESPACE, full_keys=provider_fields, stack_file=True)


# --- a component's caller ------------------------------------------------------------------------------------

def from_inputs(args_type: type[T], value: Any, path: str = "", *, key: str | None = None,
                component: str | None = None) -> T:
    """`value` (an `args_type` instance, or a dict of its fields) as an `args_type` instance, nested Args built.

    `path` is where `value` sits in the component's inputs (schema names), for shape errors. With `key` (the stack
    file's key of the same settings, e.g. `trainstack`), every field's declared check runs in the stack file's terms
    (the component turns them into its own: stack_errors_as_inputs); with `component` (a label such as
    `TrainingJob 'x'`), renamed inputs are moved in the component's terms."""
    if isinstance(value, args_type):
        # A Python caller's own Args: shaped and checked as a dict would be (an Output in a plain field).
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(args_type)}
    elif not isinstance(value, Mapping):
        where = f"{path}: " if path else ""
        raise InputTypeError(f"{where}expected {args_type.__name__} or a dict of its fields, got {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(args_type)}
    # A dict may spell a field as the schema does (nodeSelector) or as Python does (node_selector).
    schema_names = {camel_case(name): name for name in fields}
    value = {name if name in fields else schema_names.get(name, name): item for name, item in value.items()}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        where = _joined(path, unknown[0]) if path else unknown[0]
        raise InputTypeError(f"{where}: {args_type.__name__} has no such field. Fix: use one of "
                             f"{', '.join(sorted(fields))}")
    # The annotations as written (objects: these modules do not postpone them); get_type_hints would try
    # to resolve pulumi.Input's own forward reference to Output and fail.
    shaped = {name: _shaped(fields[name].type, item, _joined(path, camel_case(name)))
              for name, item in value.items()}
    if key is None and component is None:
        return args_type(**shaped)  # a required input left out is Python's TypeError (the engine's, over the wire)
    return _built(args_type, shaped, key, component=component)


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def takes_outputs(annotation: Any) -> bool:
    """Whether `annotation` is a pulumi.Input[...] (optional or not): a union with Awaitable[...] in it."""
    return any(typing.get_origin(member) is collections.abc.Awaitable for member in typing.get_args(annotation))


def _shaped(annotation: Any, value: Any, path: str) -> Any:
    """`value` shaped by `annotation`: nested dataclasses built, in lists and dict values too."""
    if value is None:
        return None
    if isinstance(value, pulumi.Output) and not takes_outputs(annotation) and is_known(value):
        value = known(value)  # a part's output whose value it knew (EksCluster.gpusPerNode in Python)
    if isinstance(value, NOT_PLAIN) and not takes_outputs(annotation):
        # YAML and other consumers can pass an output (or a secret) where the schema says plain; the
        # component needs the value itself to check it and to build its configuration.
        raise InputTypeError(f"{path}: takes a plain value, not an output or a secret. Fix: pass the value itself "
                             "(a literal or stack config), not another resource's output")
    annotation = _plain_type(annotation)  # `X | None`: shaped by X
    origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        return from_inputs(annotation, value, path)
    if annotation is int:
        return _whole(value)
    if annotation is Any:
        return _whole_numbers(value)
    if origin is list and isinstance(value, (list, tuple)):
        (item,) = typing.get_args(annotation)
        return [_shaped(item, element, f"{path}[{i}]") for i, element in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(annotation)
        return {name: _shaped(item, element, _joined(path, name)) for name, element in value.items()}
    return value


def _whole(value: Any) -> Any:
    """A whole float as an int: the wire carries every number as a double (google.protobuf.Value), and the
    SDK's Construct passes integer properties on unconverted (pulumi 3.272,
    pulumi/provider/experimental/component.py, ComponentProvider.map_input_properties)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _whole_numbers(value: Any) -> Any:
    """`_whole` through an untyped value (chart values, the trainer's settings): 2.0 there meant 2."""
    if isinstance(value, Mapping):
        return {name: _whole_numbers(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return _whole(value)


# --- both: renames, then each field's check ------------------------------------------------------------------

def _renamed_to(f: dataclasses.Field) -> str | None:
    return f.metadata.get(_SETTING, (None, {}, None))[2]


def _built(args_type: type[T], values: dict[str, Any], key: str | None, *, component: str | None = None,
           full_keys: Mapping[str, str] | None = None, stack_file: bool = False) -> T:
    """`values` (field name -> value) with old names moved and, with a `key`, every declared check run, as an
    `args_type`; without one (a component's own input, named by `component`), renames only."""
    values, written = _moved(args_type, values, key, component)
    try:
        for f in dataclasses.fields(args_type):
            item = values.get(f.name)
            if item is None or key is None:
                continue
            full_key = (full_keys or {}).get(f.name) or f"{key}{':' if key == NAMESPACE else '.'}{camel_case(f.name)}"
            if dataclasses.is_dataclass(_plain_type(f.type)) and not dataclasses.is_dataclass(item):
                values[f.name] = load(_plain_type(f.type), item, full_key)  # a stack file's nested object
            elif dataclasses.is_dataclass(item):  # a component's nested Args, shaped by from_inputs
                values[f.name] = _built(type(item), {g.name: getattr(item, g.name) for g in dataclasses.fields(item)},
                                        full_key, stack_file=True)
            else:
                values[f.name] = _checked(f, item, full_key)
    except ConfigError as error:
        raise as_written(error, written, key) from None
    if stack_file:  # a required key left out is None: its resolver says what is missing, in the stack file's terms
        values = {**{f.name: None for f in dataclasses.fields(args_type) if f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING}, **values}
    instance = args_type(**values)
    if written:
        # Errors of the resolver on a renamed key name it as the user wrote it (renamed_from, as_written).
        object.__setattr__(instance, "_written_as", written)
    return instance


def _plain_type(annotation: Any) -> Any:
    """`X` of `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        return members[0] if len(members) == 1 else annotation
    return annotation


# What a value not known while the program runs arrives as: an Output, or, decoded from the wire without its
# dependencies, the SDK's raw Unknown (rpc.deserialize_properties(keep_unknowns=True), pulumi 3.272).
NOT_PLAIN = (pulumi.Output, pulumi.output.Unknown)


def _has_output(value: Any) -> bool:
    if isinstance(value, NOT_PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_output(item) for item in value)
    if isinstance(value, Mapping):
        return any(_has_output(item) for item in value.values())
    return False


def _checked(f: dataclasses.Field, value: Any, key: str) -> Any:
    """The field's declared check on `value`; a value with outputs in it goes through untouched (its resolver
    checks what it can of a plain string, the cloud the rest)."""
    read, options, _ = f.metadata.get(_SETTING, (None, {}, None))
    if read is None:
        return value
    if isinstance(value, (list, tuple)) and _has_output(value):
        # The plain items of a list beside outputs are still checked (a subnet listed twice, a stray space), and
        # the outputs put back where they were.
        plain = [item for item in value if not _has_output(item)]
        checked = list(read(plain, key, **options)) if plain else []
        if len(checked) != len(plain):
            return value
        items = iter(checked)
        return [item if _has_output(item) else next(items) for item in value]
    if _has_output(value):
        return value
    return read(list(value) if isinstance(value, tuple) else value, key, **options)


def _moved(args_type: type, values: dict[str, Any], key: str | None, component: str | None
           ) -> tuple[dict[str, Any], dict[str, str]]:
    """`values` with each renamed field's value under its new name, one warning each; both set is an error. Also the
    renames made, new key -> old key, so that an error names the key the user wrote (as_written)."""
    values = dict(values)
    written: dict[str, str] = {}
    for f in dataclasses.fields(args_type):
        new = _renamed_to(f)
        if new is None or values.get(f.name) is None:
            continue
        old_name, new_name = camel_case(f.name), camel_case(new)
        if key is None:  # a component's input (trainstack/components/training_job.py)
            if values.get(new) is not None:
                raise InputError(f"{component}: both {old_name} and {new_name} are set ({new_name} replaces "
                                 f"{old_name}). Fix: remove the input {old_name}")
            pulumi.log.warn(f"{component}: the input {old_name} is deprecated: rename it to {new_name} (same meaning: "
                            "per pod of the job)")
        else:
            if values.get(new) is not None:
                raise ConfigError(f"{key}.{old_name}", f"both {old_name} and {new_name} are set ({new_name} replaces "
                                  f"{old_name})", f"pulumi config rm --path '{key}.{old_name}'")
            pulumi.log.warn(f"{key}.{old_name} is deprecated: rename it to {key}.{new_name} (same meaning: per pod "
                            "of the job)")
        values[new] = values.pop(f.name)
        written[new_name] = old_name
    return values, written


def renamed_from(args: Any) -> dict[str, str]:
    """New key -> the old key the user wrote it under, for the fields the loader moved in `args`."""
    return getattr(args, "_written_as", {})


def as_written(error: ConfigError, written: Mapping[str, str], key: str | None) -> ConfigError:
    """An error on a key the user wrote under its old name, in that name, with the hint to rename it:
    the hint alone would set the new key beside the old one, which is refused as both set."""
    if not written or key is None:
        return error
    name = error.key.removeprefix(f"{key}.")
    problem, _, fix = str(error)[len(error.key) + 2:].rpartition(". Fix: ")
    for new, old in written.items():
        problem = re.sub(rf"\b{new}\b", old, problem)
    if name not in written:
        return ConfigError(error.key, problem, fix)
    old = written[name]
    return ConfigError(f"{key}.{old}", problem, f"rename {old} to {name}: pulumi config rm --path '{key}.{old}' "
                       f"&& {fix}")
