"""A queue per GPU pool on every stack, as large as the pool at its maximum, counted from the pod the chart renders."""

from __future__ import annotations

import json

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3
from tests.workloads.chart import render
from trainstack.infra.kubernetes.pod_requests import parse_quantity, pod_requests

RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
JOB = {"trainstack:job": {"enabled": True}}  # the stack files' own queue setting: none on aws and gcp (default on)
RUNS = {
    "aws": lambda: aws_runs.run_main(aws_runs.config_with(JOB)),
    "gcp": lambda: gcp_runs.run_main(gcp_runs.config_with({**gcp_runs.WITH_PROJECT, **JOB})),
    "gcp-a3": lambda: test_a3.run(test_a3.a3_config(JOB)),
}


def _quotas(cluster_queue) -> dict[str, object]:
    [group] = cluster_queue.inputs["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {r["name"]: parse_quantity(r["nominalQuota"]) for r in flavor["resources"]}


@pytest.mark.parametrize("stack", RUNS)
def test_the_pools_queue_holds_the_pool_at_its_maximum_of_rendered_pods(stack):
    result = RUNS[stack]()
    submission = result.exports["jobSubmission"]
    queue_name = submission["queueName"]
    [cluster_queue] = result.by_type(CLUSTER_QUEUE)
    assert cluster_queue.inputs["metadata"]["name"] == queue_name
    assert cluster_queue.inputs["spec"]["queueingStrategy"] == "BestEffortFIFO"
    [local_queue] = result.by_type(LOCAL_QUEUE)
    assert local_queue.inputs["metadata"] == {"name": queue_name, "namespace": submission["namespace"]}
    [release] = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == result.exports["jobName"]]
    values = json.loads(json.dumps(release.inputs["values"]))
    assert values["kueue"]["queueName"] == queue_name
    pod = next(o for o in render(values) if o["kind"] == "Job")["spec"]["template"]["spec"]
    max_nodes = result.exports["estimatedHourlyUsd"]["atMax"]["nodes"]
    pods_per_node = submission["gpusPerNode"] // values["resources"]["gpusPerPod"]
    expected = {name: value * max_nodes * pods_per_node for name, value in pod_requests(pod).items()}
    assert _quotas(cluster_queue) == expected
    # What `trainstack submit` checks a job against is that same quota.
    exported = submission["queues"][queue_name]
    assert {name: parse_quantity(q) for name, q in exported["quota"].items()} == expected
    assert (exported["maxNodes"], exported["gpusPerNode"]) == (max_nodes, submission["gpusPerNode"])
    flavor = result.one(FLAVOR).inputs["spec"]
    assert flavor["nodeLabels"] == values["nodeSelector"] and flavor["tolerations"] == values["tolerations"]


def test_each_gpu_pool_gets_its_own_queue_and_flavor():
    pools = {"t4": {}, "l4": {"machineType": "g2-standard-24", "max": 3}}
    result = gcp_runs.run_main(gcp_runs.config_with({"trainstack:gpuPools": pools, "trainstack:jobPool": "t4"}))
    queues = {q.inputs["metadata"]["name"]: q for q in result.by_type(CLUSTER_QUEUE)}
    assert sorted(queues) == ["training", "training-l4"]
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in result.by_type(FLAVOR)}
    assert flavors["l4-nodes"]["nodeLabels"]["trainstack/node-pool"] == "l4"
    assert flavors["training-nodes"]["nodeLabels"]["trainstack/node-pool"] == "t4"
    assert queues["training-l4"].inputs["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "l4-nodes"
    assert _quotas(queues["training-l4"])["nvidia.com/gpu"] == 3 * 2  # 3 g2-standard-24 nodes, 2 L4 each
    assert _quotas(queues["training"])["nvidia.com/gpu"] == 2 * 2  # 2 n1 nodes, 2 T4 each
    assert sorted(q.inputs["metadata"]["name"] for q in result.by_type(LOCAL_QUEUE)) == ["training", "training-l4"]
    assert sorted(result.exports["jobSubmission"]["queues"]) == ["training", "training-l4"]


def test_queue_false_still_turns_kueue_off():
    result = gcp_runs.run_main(gcp_runs.config_with({"trainstack:job": {"queue": False}}))
    assert result.by_type(CLUSTER_QUEUE) == [] and result.exports["jobSubmission"]["queueName"] is None


def test_the_quota_follows_the_pools_maximum_not_the_stacks_job():
    # A pool of up to 5 nodes, a stack job of up to 2: CLI jobs may use the whole pool.
    result = aws_runs.run_main(aws_runs.config_with({"trainstack:gpuNodes": {"max": 5}, "trainstack:maxHourlyUsd": 3, **JOB}))
    [cluster_queue] = result.by_type(CLUSTER_QUEUE)
    assert result.one(RELEASE, "train").inputs["values"]["job"]["pods"]["max"] == 2
    assert _quotas(cluster_queue)["nvidia.com/gpu"] == 5  # 5 g4dn.xlarge, 1 GPU each


def test_every_gpudirect_pools_queue_counts_the_rxdm_sidecar():
    # Review finding 6: a second A3 pool's queue was sized without the RxDM sidecar (1 CPU / 1Gi short
    # per pod), so Kueue never admitted a job that filled that pool.
    pools = {"a3": {}, "a3b": {"machineType": "a3-highgpu-8g", "min": 0, "max": 3, "capacity": "ON_DEMAND"}}
    result = test_a3.run(test_a3.a3_config({"trainstack:gpuPools": pools, "trainstack:jobPool": "a3", **JOB}))
    queues = {q.inputs["metadata"]["name"]: q for q in result.by_type(CLUSTER_QUEUE)}
    [release] = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == result.exports["jobName"]]
    values = json.loads(json.dumps(release.inputs["values"]))
    assert values["gpuNetworking"]["mode"] == "tcpx"
    pod = next(o for o in render(values) if o["kind"] == "Job")["spec"]["template"]["spec"]
    per_pod = pod_requests(pod)
    for queue, nodes in (("a3-queue", 2), ("a3-queue-a3b", 3)):
        assert _quotas(queues[queue]) == {name: value * nodes for name, value in per_pod.items()}, queue


def test_without_the_autoscaler_the_queue_holds_the_groups_fixed_size():
    # Review finding 7: the group stays at its desired size, so a queue sized from max admitted jobs whose
    # pods then waited for nodes that never came.
    config = aws_runs.config_with({"trainstack:clusterAutoscaler": False,
                                   "trainstack:gpuNodes": {"min": 0, "desired": 1, "max": 2},
                                   "trainstack:job": {"podsMin": 1, "podsMax": 1}})
    [cluster_queue] = aws_runs.run_main(config).by_type(CLUSTER_QUEUE)
    assert _quotas(cluster_queue)["nvidia.com/gpu"] == 1  # 1 g4dn.xlarge
