"""The pod the chart renders, counted the way Kueue counts it, and the queue quota the platform gives it.

trainstack/infra/kubernetes/training_job.py pod_resources models the rendered pod's containers (the Pulumi program cannot
render the chart); these tests hold that model to the chart for every gpuNetworking mode, the NCCL
check, the data cache and a sidecar of the user's own, and size the queue from the rendered pod.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from trainstack.infra.kubernetes.platform import queue_args_for
from trainstack.infra.kubernetes.pod_requests import parse_quantity, pod_requests, queue_quota
from trainstack.infra.kubernetes.training_job import pod_resources

from .chart import VALUE_SETS, deep_merge, load_values, one, render

USER_SIDECAR = {"name": "log-shipper", "image": "registry.example.com/shipper:1.0",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}}


def job_pod(values: dict[str, Any]) -> dict[str, Any]:
    return one(render(values), "Job")["spec"]["template"]["spec"]


def resource_view(pod_spec: dict[str, Any]) -> dict[str, list[tuple]]:
    """Each container's name, restartPolicy and resources (quantities parsed: "1024Mi" == "1Gi")."""
    def parsed(resources: dict[str, Any]) -> dict[str, dict[str, Fraction]]:
        return {kind: {name: parse_quantity(q) for name, q in (resources.get(kind) or {}).items()}
                for kind in ("requests", "limits")}

    return {kind: [(c["name"], c.get("restartPolicy"), parsed(c.get("resources") or {}))
                   for c in pod_spec.get(kind) or []]
            for kind in ("initContainers", "containers")}


VARIANTS = {
    **{name: load_values(name) for name in VALUE_SETS},
    "a3-tcpx with a user sidecar": deep_merge(load_values("a3-tcpx"), {"sidecars": [USER_SIDECAR]}),
    "a3-tcpxo with a user sidecar and the cache": deep_merge(load_values("a3-tcpxo"), {
        "sidecars": [USER_SIDECAR],
        "storage": {"cache": {"enabled": True, "sourceUri": "gs://bucket/data/", "sizeLimit": "3Ti"}}}),
    "cpu with a user sidecar": deep_merge(load_values("cpu-single-node"), {"sidecars": [USER_SIDECAR]}),
    "explicit ephemeral-storage": deep_merge(load_values("gpu-4x8-queue-pvc"),
                                             {"resources": {"requests": {"ephemeral-storage": "50Gi"}}}),
}


@pytest.mark.parametrize("values", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_model_of_the_pod_is_the_pod_the_chart_renders(values):
    rendered = job_pod(values)
    model = pod_resources(values)
    assert resource_view(model) == resource_view(rendered)
    assert pod_requests(model) == pod_requests(rendered)


def test_kueue_counts_the_rxdm_sidecar_with_the_trainer():
    # The seed 002 job: two a3-highgpu-8g pods. Sidecars add to the containers (Kueue, via
    # component-helpers PodRequests); the trainer's requests alone left the job suspended forever.
    values = load_values("a3-tcpx")
    requests = pod_requests(job_pod(values))
    assert requests["cpu"] == parse_quantity("180") + parse_quantity("1")
    assert requests["memory"] == parse_quantity("1500Gi") + parse_quantity("1Gi")
    assert requests["nvidia.com/gpu"] == 8
    quota = queue_args_for(values, 2)
    assert quota["gpu_quota"] == 16
    assert parse_quantity(quota["cpu_quota"]) == 362
    assert parse_quantity(quota["memory_quota"]) == parse_quantity("3002Gi")


def test_a_user_sidecar_raises_the_quota():
    plain = queue_args_for(load_values("a3-tcpxo"), 2)
    with_sidecar = queue_args_for(deep_merge(load_values("a3-tcpxo"), {"sidecars": [USER_SIDECAR]}), 2)
    assert parse_quantity(with_sidecar["cpu_quota"]) - parse_quantity(plain["cpu_quota"]) == 1  # 2 x 500m
    assert parse_quantity(with_sidecar["memory_quota"]) - parse_quantity(plain["memory_quota"]) == 2 * 256 * 2**20


def test_the_quota_admits_the_rendered_job_at_its_largest_and_nothing_more():
    for name in ("a3-tcpx", "a3-tcpxo", "gpu-4x8-queue-pvc", "a3-nccl-check"):
        values = load_values(name)
        pods = values["job"]["pods"]["max"]
        args = queue_args_for(values, pods)
        quota = {"cpu": args["cpu_quota"], "memory": args["memory_quota"], "nvidia.com/gpu": str(args["gpu_quota"]),
                 **args["other_quota"]}
        needed = {k: v * pods for k, v in pod_requests(job_pod(values)).items()}
        assert {k: parse_quantity(v) for k, v in quota.items()} == needed, name


def test_init_containers_count_at_their_peak_not_added_to_the_trainer():
    pod = {"initContainers": [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        {"name": "fetch", "resources": {"requests": {"cpu": "30", "memory": "1Gi"}}},
    ], "containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}}]}
    # containers + sidecars = 5 cpu, 9Gi (a limit stands in for a missing request); fetch + the
    # sidecar started before it = 31 cpu, 2Gi: the larger of each.
    assert pod_requests(pod) == {"cpu": 31, "memory": 9 * 2**30}
    assert queue_quota([(pod, 2)]) == {"cpu": "62", "memory": "18Gi"}


def test_pod_level_requests_and_overhead():
    pod = {"resources": {"requests": {"cpu": "8"}}, "overhead": {"cpu": "250m"},
           "containers": [{"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    assert pod_requests(pod) == {"cpu": Fraction(33, 4), "memory": 2**30}
    assert queue_quota([(pod, 1)])["cpu"] == "8250m"


def test_the_trainer_requests_local_disk_for_tmp_and_the_cache():
    tcpx = job_pod(load_values("a3-tcpx"))  # tmpSize 32Gi, cache request 2Ti
    trainer = next(c for c in tcpx["containers"] if c["name"] == "trainer")
    assert parse_quantity(trainer["resources"]["requests"]["ephemeral-storage"]) == parse_quantity("2080Gi")
    assert "ephemeral-storage" not in trainer["resources"].get("limits", {})  # a limit would evict
    cpu = job_pod(load_values("cpu-single-node"))["containers"][0]
    assert parse_quantity(cpu["resources"]["requests"]["ephemeral-storage"]) == parse_quantity("32Gi")
