"""`list` for each state Kueue and the kubelet can leave a job in (issue 29 items 1, 9, 11): the Jobs are the
chart's own, the Workloads valid against Kueue v0.19.2's CRD, the pods as the kubelet reports them."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from tests.workloads.chart import one, render

from .kueue_schema import validate_workload, workload_for


def _at(hours_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cond(kind: str, reason: str, message: str, *, status: str = "True", hours_ago: float = 1) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": _at(hours_ago)}


def _pod(job: dict, index: int, *, node: str | None, waiting: tuple[str, str] | None = None, ready: bool = False) -> dict:
    state = {"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting else {"running": {"startedAt": _at(1)}}
    return {"metadata": {"name": f"{job['metadata']['name']}-{index}-abcde",
                         "labels": {"app.kubernetes.io/name": "training-job",
                                    "batch.kubernetes.io/job-name": job["metadata"]["name"],
                                    "batch.kubernetes.io/controller-uid": job["metadata"]["uid"]}},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": "Running" if ready else "Pending",
                       "containerStatuses": [{"name": "trainer", "ready": ready, "state": state}]}}


PULL = ("ImagePullBackOff", 'Back-off pulling image "ghcr.io/me/img:v2-typo"')


@pytest.fixture
def listed(cluster, cli, outputs_file):
    """Submit one job per case through the CLI, give each the status a real cluster would, then `list`."""
    path = outputs_file("aws")  # queue on; g4dn.xlarge, 1 GPU per node, $0.3761 per node-hour

    def run(cases: dict[str, dict]) -> dict[str, str]:
        jobs, workloads, pods = [], [], []
        for name, case in cases.items():
            assert cli("submit", name, "--outputs", path, "--pods", "2")[0] == 0
            values = json.loads([c["stdin"] for c in cluster.calls if c["argv"][:2] == ["install", name]][0])
            job = one(render(values, release=name, namespace="default"), "Job")
            job["metadata"].update(creationTimestamp=_at(3), uid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)))
            job["spec"]["suspend"] = case.get("suspend", False)
            job["status"] = case.get("job_status", {})
            workload = workload_for(job, conditions=case.get("conditions", []))
            if "active" in case:
                workload["spec"]["active"] = case["active"]
            if "past_s" in case:
                workload["status"]["accumulatedPastExecutionTimeSeconds"] = case["past_s"]
            validate_workload(workload)
            jobs.append(job)
            workloads.append(workload)
            pods.extend(case.get("pods", lambda j: [])(job))
        cluster.set_state({**cluster.state, "jobs": jobs, "workloads": workloads, "pods": pods})
        code, out, err = cli("list", "--outputs", path)
        assert code == 0, err
        return {line.split()[0]: line for line in out.splitlines()[1:-1]}

    return run


def test_pods_that_cannot_pull_their_image_are_not_running(listed):
    """M1: admitted, both pods on a node, the image missing: `not starting`, not `running`."""
    rows = listed({"imagepull": {"job_status": {"active": 2, "ready": 0, "startTime": _at(1)},
                                 "conditions": [_cond("Admitted", "Admitted", "The workload is admitted")],
                                 "pods": lambda job: [_pod(job, i, node=f"n{i}", waiting=PULL) for i in range(2)]}})
    line = rows["imagepull"]
    assert line.split()[1] == "starting"
    assert f"not starting: ImagePullBackOff: {PULL[1]}" in line
    assert line.split()[4] == "$0.77"  # its two nodes are billed: 2 nodes x 1 h (160 GB disks included)


def test_pods_without_a_node_cost_nothing(listed):
    """m2: a spot stockout: the pods are Pending with no node, nothing is billed."""
    rows = listed({"nonode": {"job_status": {"active": 2, "ready": 0, "startTime": _at(1)},
                              "conditions": [_cond("Admitted", "Admitted", "The workload is admitted")],
                              "pods": lambda job: [_pod(job, i, node=None) for i in range(2)]}})
    assert rows["nonode"].split()[1:5] == ["starting", "2", "3h", "$0.00"]
    assert "waiting for a GPU node" in rows["nonode"]


def test_a_running_job_is_billed_for_its_pods_on_nodes(listed):
    rows = listed({"fine": {"job_status": {"active": 2, "ready": 2, "startTime": _at(1)},
                            "conditions": [_cond("Admitted", "Admitted", "The workload is admitted")],
                            "pods": lambda job: [_pod(job, i, node=f"n{i}", ready=True) for i in range(2)]}})
    assert rows["fine"].split()[1:5] == ["running", "2", "3h", "$0.77"]


def test_evicted_preempted_and_deactivated_show_kueues_reason(listed):
    waiting = _cond("QuotaReserved", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
                    "quota for nvidia.com/gpu in flavor training-nodes, 2 more needed", status="False")
    rows = listed({
        "evicted": {"suspend": True, "past_s": 7200, "conditions": [
            _cond("Evicted", "PodsReadyTimeout", "Exceeded the PodsReady timeout default/evicted"), waiting]},
        "preempted": {"suspend": True, "conditions": [
            _cond("Evicted", "Preempted", "Preempted to accommodate a workload (UID: 1) due to prioritization in "
                  "the ClusterQueue"), waiting]},
        # A topology pool's lost node (kueue v0.19.2 pkg/scheduler/scheduler.go evictWorkloadAfterFailedTASReplacement).
        "tasloss": {"suspend": True, "conditions": [
            _cond("Evicted", "NodeFailures", "Workload was evicted as there was no replacement for unhealthy "
                  "node(s): gke-a3-pool-1-abcd"), waiting]},
        "gaveup": {"suspend": True, "active": False, "conditions": [
            _cond("Evicted", "Deactivated", "The workload is deactivated due to exceeding the maximum number of "
                  "re-queuing retries")]},
    })
    assert rows["evicted"].split()[1] == "evicted"
    assert "evicted: PodsReadyTimeout: Exceeded the PodsReady timeout" in rows["evicted"]
    assert rows["evicted"].split()[4] == "$1.53"  # 2 h admitted before the eviction x 2 nodes, not reset to $0.00
    assert rows["preempted"].split()[1] == "preempted" and "Preempted to accommodate" in rows["preempted"]
    assert rows["tasloss"].split()[1] == "evicted"
    assert "evicted: NodeFailures: Workload was evicted as there was no replacement" in rows["tasloss"]
    assert rows["gaveup"].split()[1] == "deactivated"
    assert "deactivated: Deactivated: The workload is deactivated due to exceeding" in rows["gaveup"]
    assert "it will not run again by itself" in rows["gaveup"]
    # Reactivate, not cancel and submit again (the workload keeps its Job; Kueue resets its requeue count).
    assert ("kubectl -n default patch workload job-gaveup-00000 --type=merge -p '{\"spec\":{\"active\":true}}'"
            in rows["gaveup"])


def test_a_release_stuck_in_pending_install_says_so(cluster, cli, outputs_file):
    old = "2026-01-01 00:00:00.000000 +0000 UTC"
    cluster.set_state({"releases": [{"name": "stuck", "status": "pending-install", "updated": old,
                                     "chart": "training-job-0.1.0", "revision": "1"},
                                    {"name": "fresh", "status": "pending-install", "chart": "training-job-0.1.0",
                                     "updated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC"),
                                     "revision": "1"}]})
    code, out, _ = cli("list", "--outputs", outputs_file("aws"))
    rows = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert code == 0
    assert rows["stuck"].split()[1] == "stuck" and "trainstack cancel stuck" in rows["stuck"]
    assert rows["fresh"].split()[1] == "submitting"


def test_a_job_a_limit_range_keeps_inadmissible_shows_kueues_reason(listed):
    """Item 11, for a LimitRange added after submit: the scheduler's ValidateAdmissibility error becomes the
    QuotaReserved=False message, reason Misconfigured (kueue v0.19.2 pkg/scheduler/scheduler.go:683-690,
    pkg/workload/resources.go:50 ErrLimitRangeConstraintsUnsatisfiedResources)."""
    message = ("resources didn't satisfy LimitRange constraints: podSets[0].template.spec.containers[0]: Invalid "
               "value: [\"memory\"]: requests must not be above the limitRange max")
    rows = listed({"limited": {"suspend": True,
                               "conditions": [_cond("QuotaReserved", "Misconfigured", message, status="False")]}})
    assert rows["limited"].split()[1] == "queued"
    assert "waiting: resources didn't satisfy LimitRange constraints" in rows["limited"]
