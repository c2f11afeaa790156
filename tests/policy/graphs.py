"""The committed golden graphs (tests/<cloud>/golden/*.json) as the policy rules see resources, and the
stack config of the matching Pulumi.<stack>.yaml as the Pulumi CLI hands it to a policy pack."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from policy.rules.common import Resource, Stack, provider_setting

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN_GRAPHS = sorted(REPO_ROOT.glob("tests/*/golden/*.json"))


def stack_name(graph: Path) -> str:
    return graph.stem.removesuffix("-stack")  # aws-stack.json -> aws


def stack_config(name: str) -> dict[str, str]:
    """Pulumi.<name>.yaml's config: scalars as strings, objects and lists as JSON (PULUMI_CONFIG's form)."""
    path = REPO_ROOT / f"Pulumi.{name}.yaml"
    raw = (yaml.safe_load(path.read_text()) or {}).get("config", {}) if path.exists() else {}

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value) if isinstance(value, (Mapping, list)) else str(value)
    return {key: text(value) for key, value in raw.items()}


def load(graph: Path) -> tuple[list[Resource], Stack]:
    entries = json.loads(graph.read_text())
    inputs = {entry["resource"]: entry["inputs"] for entry in entries}

    def provider_labels(entry) -> Mapping[str, Any]:
        provider = inputs.get(entry.get("provider") or "", {})
        tags = provider_setting(provider.get("defaultTags")) or {}
        return tags.get("tags") or provider_setting(provider.get("defaultLabels")) or {}

    resources = []
    for entry in entries:
        type_, name = entry["resource"].split("::", 1)
        resources.append(Resource(type=type_, name=name, props=entry["inputs"], options=entry.get("options", {}),
                                  dependencies=tuple(entry.get("dependsOn", ())),
                                  provider_labels=provider_labels(entry)))
    name = stack_name(graph)
    return resources, Stack(name=name, config=stack_config(name))
