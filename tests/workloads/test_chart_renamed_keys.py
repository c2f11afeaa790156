"""The keys renamed when "pod" and "node" got one meaning each (job.nodes.* -> job.pods.*,
job.procsPerNode -> job.procsPerPod, resources.gpusPerNode -> resources.gpusPerPod) still work: the
same manifests, one deprecation line per old key in NOTES.txt, and both names at once fail in one line."""

from __future__ import annotations

import copy
from typing import Any

import helm_python as helm
import pytest

from .chart import VALUE_SETS, deep_merge, load_values, render, render_templates

OLD_NAMES = {("job", "pods"): ("job", "nodes"), ("job", "procsPerPod"): ("job", "procsPerNode"),
             ("resources", "gpusPerPod"): ("resources", "gpusPerNode")}
DEPRECATION = "DEPRECATED: "


def with_old_names(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The values with every renamed key under its old name, and the old keys that now carry a value."""
    old = copy.deepcopy(values)
    used = []
    for (section, new_key), (_, old_key) in OLD_NAMES.items():
        if new_key in old.get(section, {}):
            value = old[section].pop(new_key)
            old[section][old_key] = value
            used += ([f"{section}.{old_key}.{k}" for k in value] if isinstance(value, dict)
                     else [f"{section}.{old_key}"])
    return old, used


def notes(values: dict[str, Any]) -> str:
    return next(text for path, text in render_templates(values).items() if path.endswith("NOTES.txt"))


# Every value set that sets a renamed key (a training job, an NCCL check, an elastic queued job...).
RENAMED_SETS = [name for name in VALUE_SETS if with_old_names(load_values(name))[1]]


def test_the_value_sets_cover_every_renamed_key():
    used = {key for name in RENAMED_SETS for key in with_old_names(load_values(name))[1]}
    assert {"job.nodes.min", "job.nodes.max", "job.procsPerNode", "resources.gpusPerNode"} <= used


@pytest.mark.parametrize("value_set", RENAMED_SETS)
def test_old_keys_render_the_same_manifests_with_one_deprecation_line_each(value_set):
    values = load_values(value_set)
    old, used = with_old_names(values)
    assert render(old) == render(values)
    lines = [line for line in notes(old).splitlines() if line.startswith(DEPRECATION)]
    assert [line.split()[1] for line in lines] == used
    assert DEPRECATION not in notes(values)


def test_replicas_under_its_old_name_scales_the_job_the_same():
    values = deep_merge(load_values("gpu-4x8-queue-pvc"), {"job": {"pods": {"replicas": 3}}})
    old, used = with_old_names(values)
    assert "job.nodes.replicas" in used
    assert render(old) == render(values)


@pytest.mark.parametrize(("both", "expected"), [
    ({"job": {"nodes": {"max": 4}}}, "job.pods.max and job.nodes.max are both set"),
    ({"job": {"procsPerNode": 8}}, "job.procsPerPod and job.procsPerNode are both set"),
    ({"resources": {"gpusPerNode": 8}}, "resources.gpusPerPod and resources.gpusPerNode are both set"),
])
def test_a_key_under_both_names_fails_the_render_in_one_line(both, expected):
    with pytest.raises(helm.HelmError) as caught:
        render(deep_merge(load_values("gpu-4x8-queue-pvc"), both))
    assert expected in str(caught.value)
    assert len(str(caught.value).strip().splitlines()) == 1
