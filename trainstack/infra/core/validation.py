"""Eager checks of component arguments: fail before anything is registered, with a one-line message."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# Kubernetes resource.Quantity: a decimal number with an optional binary/decimal SI suffix or exponent.
_QUANTITY = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TOLERATION_OPERATORS = frozenset({"Exists", "Equal"})
_TAINT_EFFECTS = frozenset({"", "NoSchedule", "PreferNoSchedule", "NoExecute"})


class InvalidArgsError(ValueError):
    """A component argument is out of range; raised before the component registers anything."""


def fail(component: str, message: str) -> None:
    raise InvalidArgsError(f"{component}: {message}")


def check_int(component: str, field: str, value: Any, *, minimum: int) -> None:
    # bool is an int in Python; `pods_max=True` is a bug, not 1.
    if not isinstance(value, int) or isinstance(value, bool):
        fail(component, f"{field} must be an integer, got {value!r}")
    if value < minimum:
        fail(component, f"{field} must be >= {minimum}, got {value}")


def check_quantity(component: str, field: str, value: Any) -> None:
    if not isinstance(value, str) or not _QUANTITY.match(value):
        fail(component, f"{field} must be a Kubernetes quantity such as '64' or '256Gi', got {value!r}")


def check_dns_label(component: str, field: str, value: Any, *, max_length: int = 63) -> None:
    if not isinstance(value, str) or len(value) > max_length or not _DNS_LABEL.match(value):
        fail(
            component,
            f"{field} must be a DNS label (lowercase letters, digits, '-', at most {max_length} "
            f"characters), got {value!r}",
        )


def check_string_map(component: str, field: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        fail(component, f"{field} must map non-empty strings to strings, got {value!r}")


def check_tolerations(component: str, field: str, value: Any) -> None:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        fail(component, f"{field} must be a list of tolerations, got {value!r}")
    for i, toleration in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(toleration, Mapping):
            fail(component, f"{where} must be a mapping, got {toleration!r}")
        unknown = sorted(set(toleration) - _TOLERATION_KEYS)
        if unknown:
            fail(component, f"{where} has unknown keys {unknown} (allowed: {sorted(_TOLERATION_KEYS)})")
        operator = toleration.get("operator", "Equal")
        if operator not in _TOLERATION_OPERATORS:
            fail(component, f"{where}.operator must be Exists or Equal, got {operator!r}")
        if operator == "Exists" and toleration.get("value"):
            fail(component, f"{where}.value must be empty when operator is Exists")
        if toleration.get("effect", "") not in _TAINT_EFFECTS:
            fail(
                component,
                f"{where}.effect must be one of {sorted(_TAINT_EFFECTS)}, got {toleration['effect']!r}",
            )
