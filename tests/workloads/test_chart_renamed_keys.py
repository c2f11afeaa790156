"""The keys renamed when "pod" and "node" got one meaning each (job.nodes.* -> job.pods.*,
job.procsPerNode -> job.procsPerPod, resources.gpusPerNode -> resources.gpusPerPod) still work: the
same manifests, one deprecation line per old key in NOTES.txt; both names at once are one value when equal, else\none line naming both values and how to keep the user's."""

from __future__ import annotations

import copy
from typing import Any

import helm_python as helm
import pytest

from .chart import VALUE_SETS, deep_merge, load_profile, load_values, render, render_templates

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


@pytest.mark.parametrize("both", [
    {"job": {"nodes": {"min": 2, "max": 4}}},
    {"job": {"procsPerNode": 8}},
    {"resources": {"gpusPerNode": 8}},
])
def test_a_key_under_both_names_with_the_same_value_is_one_value(both):
    # An override under the old name over values (or a profile) under the new one, saying the same.
    values = load_values("gpu-4x8-queue-pvc")
    assert render(deep_merge(values, both)) == render(values)


@pytest.mark.parametrize(("both", "expected"), [
    ({"job": {"nodes": {"max": 3}}},
     "job.pods.max is 4 but its old name job.nodes.max is 3: put your value under the new name only "
     "(set job.pods.max=3 instead of job.nodes.max=3; "),
    ({"job": {"procsPerNode": 4}},
     "job.procsPerPod is 8 but its old name job.procsPerNode is 4: put your value under the new name only "
     "(set job.procsPerPod=4 instead of job.procsPerNode=4; "),
    ({"resources": {"gpusPerNode": 4}},
     "resources.gpusPerPod is 8 but its old name resources.gpusPerNode is 4: put your value under the new name "
     "only (set resources.gpusPerPod=4 instead of resources.gpusPerNode=4; "),
])
def test_two_values_under_both_names_fail_in_one_line_naming_both(both, expected):
    with pytest.raises(helm.HelmError) as caught:
        render(deep_merge(load_values("gpu-4x8-queue-pvc"), both))
    assert expected in str(caught.value)
    assert "--reset-then-reuse-values, not --reuse-values" in str(caught.value)
    assert len(str(caught.value).strip().splitlines()) == 1


def test_scaling_a_shipped_profile_with_the_old_keys_says_how_to_keep_the_value():
    # The profiles use the new names: an old-name override of another size cannot be silently dropped.
    values = deep_merge(load_profile("a3-highgpu"), load_profile("nccl-check"))
    with pytest.raises(helm.HelmError) as caught:
        render(deep_merge(values, {"job": {"nodes": {"min": 4, "max": 4}}}))
    assert "set job.pods.max=4 instead of job.nodes.max=4" in str(caught.value)
    # The same size as the profile's, under the old names, is no conflict.
    same = {"job": {"procsPerNode": values["job"]["procsPerPod"]},
            "resources": {"gpusPerNode": values["resources"]["gpusPerPod"]}}
    assert render(deep_merge(values, same)) == render(values)
