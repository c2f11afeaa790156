"""Kueue's admission webhooks as the pinned chart renders them from our values (review finding 2): while
Kueue is not ready, a webhook with failurePolicy Fail refuses what it selects, so those may select
only the training namespace's Jobs and Kueue's own objects, never the cluster's other Pods, Deployments
and StatefulSets (cluster-autoscaler, the device plugin, GKE's add-ons)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.infra.programs import RELEASE
from tests.infra.test_kueue import _args, make_provider
from tests.pulumi_harness import run_program
from trainstack.infra import Kueue
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.kubernetes.kueue import manager_config_yaml

# The pinned chart's own files (kubernetes-sigs/kueue v0.19.2 charts/kueue), vendored: see its README.md.
CHART_DIR = Path(__file__).parent / "kueue_chart_v0.19.2"
NAMESPACE = "training"


@functools.cache
def _chart() -> helm.Chart:
    return helm.Chart.load(CHART_DIR)


def _webhooks(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = _chart().render(values, name="kueue", namespace="kueue-system")
    text = rendered["kueue/templates/webhook/manifests.yaml"]
    return [hook for doc in yaml.safe_load_all(text) if doc for hook in doc["webhooks"]]


def _only_kueue_objects(hook: dict[str, Any]) -> bool:
    return all(group == "kueue.x-k8s.io" for rule in hook["rules"] for group in rule["apiGroups"])


def test_the_vendored_chart_is_the_pinned_one():
    assert yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["version"] == KUEUE_CHART.version


def test_the_chart_defaults_would_block_every_namespace():
    # What the stack installed before: pod, deployment and statefulset webhooks fail closed cluster-wide.
    hooks = {hook["name"]: hook for hook in _webhooks({})}
    assert hooks["mpod.kb.io"]["failurePolicy"] == "Fail"
    assert hooks["mjob.kb.io"]["namespaceSelector"]["matchExpressions"][0]["operator"] == "NotIn"


def test_fail_closed_webhooks_select_only_the_training_namespace():
    hooks = _webhooks({"managerConfig": {"controllerManagerConfigYaml": manager_config_yaml(NAMESPACE)}})
    assert hooks
    for hook in hooks:
        if hook["name"].removeprefix("m").removeprefix("v").split(".")[0] in ("pod", "deployment", "statefulset"):
            assert hook["failurePolicy"] == "Ignore", hook["name"]
        elif hook["failurePolicy"] == "Fail" and not _only_kueue_objects(hook):
            assert hook["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}, \
                hook["name"]
    job_hooks = [h for h in hooks if h["name"] in ("mjob.kb.io", "vjob.kb.io")]
    assert len(job_hooks) == 2 and all(h["failurePolicy"] == "Fail" for h in job_hooks)


def test_the_stack_installs_kueue_with_that_configuration():
    def program() -> None:
        Kueue("kueue", _args(make_provider()))

    release = run_program(program).one(RELEASE)
    config = release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    assert config == manager_config_yaml(NAMESPACE)
    assert yaml.safe_load(config)["webhook"]["port"] == 9443  # the port the GKE firewall rule opens


@pytest.mark.parametrize("namespace", ["training", "ml"])
def test_the_configuration_names_the_namespace(namespace):
    assert yaml.safe_load(manager_config_yaml(namespace))["managedJobsNamespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": namespace}}


