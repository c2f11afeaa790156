"""`trainstack submit --pool NAME` on a stack with several GPU pools: the pool's placement, queue and size.

The stack is gcp with two pools of different machines (t4: n1 nodes with 2 T4, at most 2; l4:
g2-standard-48 nodes with 4 L4, at most 3), the stack's job on t4.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import kubernetes_validate
import pytest

from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3, test_a4
from tests.workloads.chart import KUBERNETES_VERSION, one, render
from trainstack.infra.gcp.node_pools import POOL_LABEL

from .kueue_schema import validate_workload, workload_for

POOLS = {"t4": {}, "l4": {"machineType": "g2-standard-48", "max": 3}}
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


@pytest.fixture(scope="module")
def two_pools():
    result = gcp_runs.run_main(gcp_runs.config_with({"trainstack:gpuPools": POOLS, "trainstack:jobPool": "t4"}))
    return result, json.loads(json.dumps(result.exports))


@pytest.fixture
def outputs(tmp_path, two_pools):
    def write(edit=None) -> str:
        exports = json.loads(json.dumps(two_pools[1]))
        if edit is not None:
            edit(exports)
        path = tmp_path / "outputs.json"
        path.write_text(json.dumps(exports))
        return str(path)
    return write


def _install(cluster) -> tuple[list[str], dict]:
    [install] = [c for c in cluster.calls if c["tool"] == "helm" and c["argv"][0] == "install"]
    return install["argv"], json.loads(install["stdin"])


def test_every_pool_is_exported_with_its_own_placement_and_queue(two_pools):
    result, exports = two_pools
    submission = exports["jobSubmission"]
    pools = submission["pools"]
    assert sorted(pools) == ["l4", "t4"]
    # The job's pool is the top-level fields, unchanged: outputs without --pool read as before.
    assert pools["t4"]["values"] == submission["values"]
    assert (pools["t4"]["queueName"], pools["t4"]["gpusPerNode"]) == (submission["queueName"], submission["gpusPerNode"])
    assert (pools["l4"]["nodeType"], pools["l4"]["gpusPerNode"], pools["l4"]["maxNodes"]) == ("nvidia-l4", 4, 3)
    local_queues = {q.inputs["metadata"]["name"] for q in result.by_type(LOCAL_QUEUE)}
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in result.by_type(FLAVOR)}
    cluster_queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in result.by_type(CLUSTER_QUEUE)}
    for name, pool in pools.items():
        values = pool["values"]
        assert values["nodeSelector"][POOL_LABEL] == name
        assert values["kueue"]["queueName"] == pool["queueName"] and pool["queueName"] in local_queues
        assert pool["queueName"] in submission["queues"]
        # The pool's queue admits onto that pool's nodes: its flavor has the labels and tolerations the job gets.
        flavor = flavors[cluster_queues[pool["queueName"]]["resourceGroups"][0]["flavors"][0]["name"]]
        assert flavor["nodeLabels"] == values["nodeSelector"] and flavor["tolerations"] == values["tolerations"]
        # What every job on the stack shares stays: the owner destroy deletes, the data cache, the image.
        for key in ("owner", "image", "storage", "serviceAccount"):
            assert values.get(key) == submission["values"].get(key), key


def test_submit_pool_sends_that_pools_placement_queue_and_gpus(cluster, cli, outputs, two_pools):
    submission = two_pools[1]["jobSubmission"]
    code, out, err = cli("submit", "on-l4", "--outputs", outputs(), "--pool", "l4", "--pods", "1:3",
                         "--", "--max-steps", "50")
    assert (code, err) == (0, ""), err
    argv, values = _install(cluster)
    objects = render(values, release="on-l4", namespace=submission["namespace"])
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    job = one(objects, "Job")
    validate_workload(workload_for(job))
    pod = job["spec"]["template"]["spec"]
    l4 = submission["pools"]["l4"]["values"]
    assert pod["nodeSelector"] == l4["nodeSelector"] and pod["tolerations"] == l4["tolerations"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training-l4"
    [trainer] = [c for c in pod["containers"] if c["name"] == "trainer"]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == 4  # an L4 node's four, not a T4 node's two
    assert job["spec"]["parallelism"] == 3
    assert "submitted on-l4 to queue training-l4" in out


def test_submit_without_pool_stays_on_the_jobs_pool(cluster, cli, outputs, two_pools):
    code, _, err = cli("submit", "on-t4", "--outputs", outputs(), "--", "--max-steps", "50")
    assert code == 0, err
    _, values = _install(cluster)
    assert values["nodeSelector"][POOL_LABEL] == "t4" and values["kueue"]["queueName"] == "training"
    assert values["resources"]["gpusPerPod"] == 2


@pytest.mark.parametrize(("argv", "says"), [
    (["--pool", "a100"], "--pool a100: no such GPU pool on this stack (pools: l4, t4)"),
    # The pod range against that pool's maximum (3 L4 nodes), not the job's pool's (2).
    (["--pool", "l4", "--pods", "4"], "4 pods need 4 GPU nodes (nvidia-l4), but the stack's GPU pool has at most 3"),
    (["--pool", "t4", "--pods", "3"], "3 pods need 3 GPU nodes (nvidia-tesla-t4), but the stack's GPU pool has at most 2"),
])
def test_a_bad_pool_or_a_range_over_its_size_is_one_line_and_no_call(cluster, cli, outputs, argv, says):
    code, out, err = cli("submit", "exp", "--outputs", outputs(), *argv, "--", "--max-steps", "50")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert says in err, err
    assert cluster.calls == []


def test_outputs_without_pools_still_submit_and_refuse_pool_in_one_line(cluster, cli, outputs):
    old = outputs(lambda exports: exports["jobSubmission"].pop("pools"))
    code, out, err = cli("submit", "exp", "--outputs", old, "--pool", "l4", "--", "--max-steps", "50")
    assert code == 2 and "this stack's outputs list no GPU pools" in err and err.count("\n") == 1, err
    assert cluster.calls == []
    code, _, err = cli("submit", "exp", "--outputs", old, "--", "--max-steps", "50")
    assert code == 0, err
    _, values = _install(cluster)
    assert values["nodeSelector"][POOL_LABEL] == "t4"


@pytest.mark.parametrize("job_pool", ["a3", "t4"])
def test_gpu_networking_belongs_to_its_pool(tmp_path, cluster, cli, job_pool):
    config = test_a3.a3_config({"trainstack:gpuPools": {"t4": {}}, "trainstack:jobPool": job_pool})
    exports = json.loads(json.dumps(test_a3.run(config).exports))
    pools = exports["jobSubmission"]["pools"]
    # The T4 pool never gets the A3 pool's GPUDirect networking, whichever pool the stack's job uses.
    assert pools["t4"]["values"].get("gpuNetworking", {}).get("mode", "none") == "none"
    assert "unavailable" not in pools["t4"]
    if job_pool == "a3":
        assert pools["a3"]["values"]["gpuNetworking"]["mode"] in ("tcpx", "tcpxo") and "unavailable" not in pools["a3"]
        return
    # Its networks exist only for the job's pool: an A3 job elsewhere is refused before any call.
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(exports))
    code, _, err = cli("submit", "exp", "--outputs", str(path), "--pool", "a3", "--", "--max-steps", "50")
    assert code == 2 and "--pool a3: its GPU networking" in err and err.count("\n") == 1, err
    assert cluster.calls == []


def test_list_counts_a_job_on_another_pool_with_that_pools_nodes(cluster, cli, outputs):
    path = outputs()
    for name, pool in (("on-t4", "t4"), ("on-l4", "l4")):
        assert cli("submit", name, "--outputs", path, "--pool", pool, "--pods", "2", "--", "--max-steps", "50")[0] == 0
    started = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs = []
    for call in cluster.calls:
        if call["tool"] == "helm" and call["argv"][0] == "install":
            job = one(render(json.loads(call["stdin"]), release=call["argv"][1]), "Job")
            job["metadata"].update(creationTimestamp=started, uid=call["argv"][1])
            job["spec"]["suspend"] = False
            job["status"] = {"active": 2, "startTime": started,
                             "conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": started}]}
            jobs.append(job)
    cluster.set_state({**cluster.state, "jobs": jobs})
    code, out, err = cli("list", "--outputs", path)
    assert code == 0, err
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    # GPUs from the pods themselves: two L4 pods of 4 GPUs, two T4 pods of 2.
    assert (lines["on-l4"][1], lines["on-l4"][2]) == ("running", "8")
    assert (lines["on-t4"][1], lines["on-t4"][2]) == ("running", "4")
    # The stack prices the job's pool only: the T4 job costs 2 nodes at that price, the L4 job is unknown.
    assert lines["on-l4"][-1] == "?" and lines["on-t4"][-1].startswith("$")


def test_a_job_sent_to_another_topology_pool_prefers_its_tightest_domain(two_pools):
    # Kueue's topology flavor on a further RDMA pool: without the value, a multi-node job there would get
    # Kueue's implied TAS, which places pods anywhere in the topology.
    # On reservations: the capacity that gets Kueue's topology by default (trainstack/infra/gcp/pool_capacity.py).
    reserved = test_a4.RESERVED
    result = test_a4.run(test_a4.a4_config({"trainstack:gpuPools": {
        "a4": reserved, "a3u": {"machineType": "a3-ultragpu-8g", "max": 2, **reserved, "reservation": "h200-block"}},
        "trainstack:jobPool": "a4"}))
    pools = json.loads(json.dumps(result.exports))["jobSubmission"]["pools"]
    for name in ("a4", "a3u"):
        assert pools[name]["values"]["kueue"]["preferredTopology"] == "kubernetes.io/hostname", name
    # Pools without a Kueue topology get none.
    assert all("preferredTopology" not in pool["values"]["kueue"] for pool in two_pools[1]["jobSubmission"]["pools"].values())
