"""End of life and scheduling: the Job ends and cleans up, tolerates preemption, fails fast on
configuration errors, waits for Kueue when queued, and asks for the GPUs it uses."""

from __future__ import annotations

import pytest

from .chart import TRAINING_SETS, deep_merge, load_values, one, render, trainer

GPU_VALUES = load_values("gpu-4x8-queue-pvc")


def job_spec(objects):
    return one(objects, "Job")["spec"]


@pytest.mark.parametrize("value_set", TRAINING_SETS)
def test_job_ends_and_cleans_up(rendered, value_set):
    spec = job_spec(rendered[value_set])
    assert spec["ttlSecondsAfterFinished"] == 86400
    assert spec["backoffLimit"] == 6
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    assert "activeDeadlineSeconds" not in spec


def test_lifecycle_values_are_passed_through():
    spec = job_spec(render(deep_merge(GPU_VALUES, {"job": {
        "ttlSecondsAfterFinished": 600, "backoffLimit": 2, "terminationGracePeriodSeconds": 900,
        "activeDeadlineSeconds": 172800}})))
    assert (spec["ttlSecondsAfterFinished"], spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (600, 2, 172800)
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 900


def test_pod_failure_policy_is_tuned_for_elastic_restarts(rendered):
    rules = job_spec(rendered["gpu-4x8-queue-pvc"])["podFailurePolicy"]["rules"]
    by_action = {}
    for rule in rules:
        by_action.setdefault(rule["action"], []).append(rule)

    # Preemption, eviction and spot reclaim never count against backoffLimit.
    assert {"type": "DisruptionTarget", "status": "True"} in [
        c for rule in by_action["Ignore"] for c in rule.get("onPodConditions", [])]
    exit_codes = {action: {code for rule in rs if "onExitCodes" in rule for code in rule["onExitCodes"]["values"]}
                  for action, rs in by_action.items()}
    assert 75 in exit_codes["Ignore"]      # "peer preempted, restart me"
    assert 2 in exit_codes["FailJob"]      # usage error: retrying cannot help
    for rule in rules:
        if "onExitCodes" in rule:
            assert rule["onExitCodes"]["containerName"] == "trainer"
            assert rule["onExitCodes"]["operator"] == "In"


def test_success_is_decided_by_node_0(rendered):
    assert job_spec(rendered["gpu-4x8-queue-pvc"])["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}


def test_queued_job_carries_the_queue_label_and_leaves_suspend_to_kueue(rendered):
    # Kueue's webhook suspends it on create (v0.19.2 jobframework/defaults.go ApplyDefaultForSuspend). A
    # rendered `suspend: true` would be patched back onto the running Job by every helm upgrade
    # (three-way merge against the live object): Kueue would then restart it (review finding 3).
    job = one(rendered["gpu-4x8-queue-pvc"], "Job")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == GPU_VALUES["kueue"]["queueName"]
    assert "suspend" not in job["spec"]


def test_an_in_place_change_of_a_queued_job_leaves_its_job_alone():
    # TensorBoard and the TTL upgrade in place (trainstack/infra/kubernetes/training_job.py REPLACE_ON_CHANGES): the Job's
    # rendered object must not change, or helm upgrade would patch a running, admitted Job.
    base = load_values("gpu-4x8-queue-pvc")
    job = one(render(base), "Job")
    for change in ({"tensorboard": {"enabled": not base.get("tensorboard", {}).get("enabled", False)}},):
        assert one(render(deep_merge(base, change)), "Job") == job, change


def test_unqueued_job_starts_at_once(rendered):
    job = one(rendered["cpu-single-node"], "Job")
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    assert not job["spec"].get("suspend", False)


def test_gpu_limits_and_processes_per_node(rendered):
    container = trainer(rendered["gpu-4x8-queue-pvc"])
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 8
    assert container["resources"]["limits"]["memory"] == "1000Gi"
    assert container["resources"]["requests"]["cpu"] == "90"


def test_cpu_job_asks_for_no_gpu(rendered):
    resources = trainer(rendered["cpu-single-node"])["resources"]
    assert "nvidia.com/gpu" not in resources["limits"] and "nvidia.com/gpu" not in resources["requests"]


def test_gpu_pool_placement(rendered):
    pod = job_spec(rendered["gpu-4x8-queue-pvc"])["template"]["spec"]
    assert pod["nodeSelector"] == GPU_VALUES["nodeSelector"]
    assert pod["tolerations"] == GPU_VALUES["tolerations"]
