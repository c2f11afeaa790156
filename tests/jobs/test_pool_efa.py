"""`submit --pool NAME` for every GPU pool of the aws-p5 stack, the EFA group included (issue 29 item 15):
EFA names no network objects (its pods ask for the node's vpc.amazonaws.com/efa devices), so the pool is
as submittable as any other, on its own queue."""

from __future__ import annotations

import json

import pytest

from tests.aws.p5_runs import p5_config, run_p5
from tests.workloads.chart import one, render, trainer

EFA_RESOURCE = "vpc.amazonaws.com/efa"


@pytest.fixture(scope="module")
def p5_outputs():
    return json.loads(json.dumps(run_p5(p5_config({"trainstack:job": {"queue": True}})).exports))


def test_every_gpu_pool_of_the_p5_stack_takes_a_job_on_its_own_queue(p5_outputs, cluster, cli, tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(p5_outputs))
    pools = p5_outputs["jobSubmission"]["pools"]
    assert pools and all("unavailable" not in pool for pool in pools.values())
    for name, pool in pools.items():
        code, out, err = cli("submit", f"exp-{name}", "--outputs", str(path), "--pool", name, "--pods", "2")
        assert code == 0, err
        assert f"to queue {pool['queueName']}" in out
        install = [c for c in cluster.calls if c["argv"][:2] == ["install", f"exp-{name}"]][0]
        values = json.loads(install["stdin"])
        assert values["kueue"]["queueName"] == pool["queueName"]
        assert values["gpuNetworking"]["mode"] == pool["values"]["gpuNetworking"]["mode"] == "efa"
        limits = trainer(render(values, release=f"exp-{name}"))["resources"]["limits"]
        assert int(limits[EFA_RESOURCE]) >= 1 and int(limits["nvidia.com/gpu"]) == pool["gpusPerNode"]
        job = one(render(values, release=f"exp-{name}"), "Job")
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == pool["queueName"]
