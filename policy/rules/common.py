"""What every rule works on: a resource as the policy engine sees it, the stack's facts, and readers
that tolerate the shapes the engine hands over (read-only mappings and sequences, "true" as a string).

Rules are plain functions `(Resource, Stack) -> list[str]` (one message per violation), so the tests
call them directly; policy/__main__.py adapts them to pulumi-policy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
# The tags (AWS) and labels (GCP) every billable resource carries: the orphan audit finds leftovers by them.
APP_LABEL = ("app", "trainstack")
STACK_LABEL_KEY = "pulumi-stack"


@dataclass(frozen=True)
class Resource:
    type: str  # e.g. aws:s3/bucket:Bucket
    name: str  # the logical (Pulumi) name
    props: Mapping[str, Any]  # the resource's inputs
    # Resource options where the caller has them. The policy engine passes only a few (protect, ...);
    # the golden graph also records retainOnDelete.
    options: Mapping[str, Any] = field(default_factory=dict)
    urn: str | None = None
    # What it depends on, as `key`s of other resources (stack rules match resources by them).
    dependencies: tuple[str, ...] = ()
    # Tags/labels its provider adds to everything (AWS defaultTags, GCP defaultLabels).
    provider_labels: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The URN where the engine gave one, else "type::name" (the golden graph's form)."""
        return self.urn or f"{self.type}::{self.name}"


@dataclass(frozen=True)
class Stack:
    name: str  # e.g. aws
    config: Mapping[str, str] = field(default_factory=dict)  # "trainstack:key" -> raw value (objects as JSON)

    def flag(self, key: str) -> bool:
        """A boolean stack config key (`true`/`false`), false when unset."""
        return str(self.config.get(key, "")).strip().lower() == "true"


def get(value: Any, path: str, default: Any = None) -> Any:
    """props["a"]["b"][0] written get(props, "a.b.0"); `default` where any step is missing."""
    for part in path.split("."):
        if isinstance(value, Mapping):
            if part not in value:
                return default
            value = value[part]
        elif is_list(value) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return default
        if value is None:
            return default
    return value


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if is_list(value) else [value]


def truthy(value: Any) -> bool:
    """Provider inputs carry booleans as booleans or as "true"/"false" strings (EBS block devices)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def is_false(value: Any) -> bool:
    """Explicitly false (not merely unset)."""
    if isinstance(value, str):
        return value.strip().lower() == "false"
    return value is False


def as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def json_document(value: Any) -> Any:
    """An IAM or bucket policy: a JSON string or an already parsed object; None when unreadable."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


def provider_setting(value: Any) -> Any:
    """A provider's nested setting: providers receive objects as JSON text (`defaultLabels`, `defaultTags`)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def labels_of(resource: Resource, path: str) -> dict[str, Any]:
    """The AWS tags or GCP labels at `path`, with the provider's default ones underneath."""
    found = get(resource.props, path)
    return {**resource.provider_labels, **(dict(found) if isinstance(found, Mapping) else {})}
