"""A queued elastic job (pods.min < pods.max) may be admitted with fewer pods: Kueue's partial
admission annotations (kueue v0.19.2 pkg/controller/jobs/job/job_controller.go, job_webhook.go)."""

from __future__ import annotations

from .chart import deep_merge, load_values, one, render

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"
QUEUED_ELASTIC = load_values("gpu-4x8-queue-pvc")  # pods 2:4, queue set


def job(values):
    return one(render(values), "Job")


def test_a_queued_elastic_job_may_be_admitted_down_to_pods_min():
    rendered = job(QUEUED_ELASTIC)
    assert QUEUED_ELASTIC["job"]["pods"]["min"] < QUEUED_ELASTIC["job"]["pods"]["max"]
    annotations = rendered["metadata"]["annotations"]
    assert annotations[MIN_PARALLELISM] == str(QUEUED_ELASTIC["job"]["pods"]["min"])
    assert annotations[COMPLETIONS_EQUAL] == "true"
    # What Kueue's webhook checks: min below the pod count, Indexed, completions == parallelism.
    spec = rendered["spec"]
    assert 0 < int(annotations[MIN_PARALLELISM]) < spec["parallelism"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]


def test_no_partial_admission_without_a_queue_or_without_room_to_shrink():
    no_queue = deep_merge(QUEUED_ELASTIC, {"kueue": {"queueName": ""}})
    fixed = deep_merge(QUEUED_ELASTIC, {"job": {"pods": {"min": 4, "max": 4}}})
    at_min = deep_merge(QUEUED_ELASTIC, {"job": {"pods": {"replicas": 2}}})  # the webhook refuses min >= pods
    for values in (no_queue, fixed, at_min):
        assert MIN_PARALLELISM not in (job(values)["metadata"].get("annotations") or {})
