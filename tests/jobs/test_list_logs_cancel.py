"""`list`, `logs`, `cancel` and `results` against the fake cluster, its Jobs made by the chart itself."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import uuid
from datetime import datetime, timedelta, timezone

from tests.jobs.conftest import without_queue
from tests.workloads.chart import one, render
from trainstack.jobs.cli import main

from .kueue_schema import validate_workload, workload_for


def _at(hours_ago: float) -> str:
    # Now, not at import: the cost column counts seconds.
    return (datetime.now(timezone.utc) - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, hours_ago: float, reason: str) -> dict:
    # metav1.Condition: type, status, reason, message and lastTransitionTime are required.
    return {"type": kind, "status": "True", "reason": reason, "message": reason, "lastTransitionTime": _at(hours_ago)}


# The scheduler's message, as kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go writes it.
WAITING = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
           "training-nodes, 1 more needed")


def _cluster_with_jobs(cluster, cli, outputs_path) -> None:
    """Submit six jobs through the CLI, then give each the status a real cluster would."""
    assert cli("submit", "queued", "--outputs", outputs_path, "--pods", "1")[0] == 0
    assert cli("submit", "admitted", "--outputs", outputs_path, "--pods", "1")[0] == 0
    assert cli("submit", "running", "--outputs", outputs_path, "--pods", "2")[0] == 0
    assert cli("submit", "done", "--outputs", outputs_path, "--pods", "1")[0] == 0
    assert cli("submit", "broke", "--outputs", outputs_path, "--pods", "1")[0] == 0
    assert cli("submit", "lrs", "--outputs", outputs_path, "--pods", "1", "--sweep", "lr=3e-4,1e-3")[0] == 0
    jobs, workloads = [], []
    for call in cluster.calls:
        if call["argv"][0] != "install":
            continue
        name = call["argv"][1]
        job = one(render(json.loads(call["stdin"]), release=name, namespace="default"), "Job")
        job["metadata"]["creationTimestamp"] = _at(3)
        job["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))  # the API server gives each Job one
        job["spec"]["suspend"] = False  # Kueue's webhook suspends it on create, Kueue unsuspends it on admission
        conditions: list[dict] = []
        status: dict = {}
        if name == "queued":
            job["spec"]["suspend"] = True
            conditions = [{**_condition("QuotaReserved", 0.2, "Pending"), "status": "False", "message": WAITING}]
        elif name == "admitted":
            conditions = [_condition("QuotaReserved", 0.1, "QuotaReserved"), _condition("Admitted", 0.1, "Admitted")]
        elif name in ("running", "lrs-lr-3e-4"):
            status = {"active": job["spec"]["parallelism"], "ready": job["spec"]["parallelism"], "startTime": _at(1)}
            conditions = [_condition("Admitted", 1, "Admitted")]
        elif name == "done":
            status = {"startTime": _at(2), "completionTime": _at(1), "succeeded": 1,
                      "conditions": [_condition("Complete", 1, "Completed")]}
            conditions = [_condition("Finished", 1, "Succeeded")]
        elif name == "broke":
            status = {"startTime": _at(1.5), "failed": 1, "conditions": [_condition("Failed", 1, "BackoffLimitExceeded")]}
            conditions = [_condition("Finished", 1, "Failed")]
        else:  # lrs-lr-1e-3 waits for quota
            job["spec"]["suspend"] = True
        job["status"] = status
        workload = workload_for(job, conditions=conditions)
        validate_workload(workload)  # the fake answers as Kueue v0.19.2 could
        jobs.append(job)
        workloads.append(workload)
    state = cluster.state
    cluster.set_state({**state, "jobs": jobs, "workloads": workloads})
    cluster.calls_file.write_text("")


def test_list_shows_state_gpus_age_cost_and_groups_sweeps(cluster, cli, outputs_file):
    path = outputs_file("aws")  # the queue is on: Kueue's Workloads decide queued vs admitted
    _cluster_with_jobs(cluster, cli, path)
    code, out, err = cli("list", "--outputs", path)
    assert code == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:-1] if not line.startswith("sweep")}
    # g4dn.xlarge: 1 GPU per node, $0.3761 per node-hour in the stack's outputs (trainstack/infra/cost/prices.yaml).
    assert rows["queued"][:4] == ["queued", "1", "3h", "$0.00"]
    # Why it waits, in Kueue's words (its Workload's QuotaReserved=False message).
    assert next(line for line in out.splitlines() if line.startswith("queued ")).endswith(f"  waiting: {WAITING}")
    assert "waiting:" not in next(line for line in out.splitlines() if line.startswith("admitted "))
    assert rows["admitted"] == ["admitted", "1", "3h", "$0.00"]
    assert rows["running"] == ["running", "2", "3h", "$0.77"]  # 2 nodes x 1 h
    assert rows["done"] == ["succeeded", "1", "3h", "$0.38"]
    assert rows["broke"] == ["failed", "1", "3h", "$0.19"]  # ended at its Failed condition, 0.5 h
    lines = out.splitlines()
    sweep = next(i for i, line in enumerate(lines) if line.startswith("sweep lrs"))
    assert lines[sweep].split()[2:5] == ["2", "jobs", "2"]  # GPUs held or asked for
    assert [line.split()[:2] for line in lines[sweep + 1:sweep + 3]] == [["lrs-lr-1e-3", "queued"],
                                                                        ["lrs-lr-3e-4", "running"]]
    assert cluster.verbs() == ["helm list", "kubectl get", "kubectl get", "kubectl get"]  # jobs, workloads, pods


def test_list_without_a_queue_asks_no_workloads(cluster, cli, outputs_file):
    code, out, _ = cli("list", "--outputs", outputs_file("gcp", without_queue))
    assert code == 0 and out.startswith("NAME")
    assert [c["argv"][:2] for c in cluster.calls] == [["list", "--all"], ["get", "jobs"], ["get", "pods"]]


def test_logs_reads_every_pod_of_the_job(cluster, cli, outputs_file):
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    cluster.set_state({**cluster.state, "logs": "[pod/exp-0-abc/trainer] step 10 loss 3.2\n"})
    code, out, _ = cli("logs", "exp", "-f", "--outputs", path)
    assert code == 0
    call = cluster.calls[-1]
    assert call["tool"] == "kubectl" and call["argv"][:3] == ["logs", "--selector", "batch.kubernetes.io/job-name=exp"]
    assert "--follow" in call["argv"] and "--prefix" in call["argv"]


def test_cancel_uninstalls_and_keeps_the_bucket(cluster, cli, outputs_file, stack_exports):
    path = outputs_file("gcp")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    code, out, _ = cli("cancel", "exp", "--outputs", path)
    assert code == 0
    assert cluster.verbs()[-2:] == ["helm list", "helm uninstall"]
    assert cluster.calls[-1]["argv"][:2] == ["uninstall", "exp"]
    assert cluster.state["releases"] == []
    bucket = stack_exports("gcp")["jobSubmission"]["bucketUri"]
    assert f"its checkpoints stay in {bucket}/runs/exp/" in out
    # The name is free again: a new job of that name resumes from the same prefix.
    assert cli("submit", "exp", "--outputs", path)[0] == 0


def test_results_names_the_prefix_and_the_fetch_command(cluster, cli, outputs_file, stack_exports):
    for stack, fetch in (("aws", "aws s3 sync"), ("gcp", "gcloud storage rsync --recursive")):
        code, out, _ = cli("results", "exp", "--outputs", outputs_file(stack))
        prefix = f"{stack_exports(stack)['jobSubmission']['bucketUri']}/runs/exp"
        assert code == 0
        assert f"checkpoints: {prefix}/checkpoints/" in out and f"export:      {prefix}/export/" in out
        assert f"fetch:       {fetch} {prefix}/ ./exp/" in out
    assert cluster.calls == []  # the bucket outlives the job: no cluster needed


def test_cancel_all_leaves_the_stacks_own_job_to_pulumi(cluster, cli, outputs_file):
    path = outputs_file("aws", lambda exports: exports["jobSubmission"].update(stackJob="train"))
    for name in ("a", "b"):
        assert cli("submit", name, "--outputs", path)[0] == 0
    cluster.set_state({"releases": [*cluster.state["releases"],
                                    {"name": "train", "chart": "training-job-0.1.0", "status": "deployed"},
                                    {"name": "other", "chart": "something-else-1.0.0", "status": "deployed"}]})
    code, out, _ = cli("cancel", "--all", "--outputs", path)
    assert code == 0
    assert [c["argv"][1] for c in cluster.calls if c["argv"][0] == "uninstall"] == ["a", "b"]
    assert [r["name"] for r in cluster.state["releases"]] == ["train", "other"]
    assert cli("cancel", "--all", "--outputs", path)[1] == "no jobs to cancel\n"


def _cli_releases(count: int) -> list[dict]:
    # As `helm install --labels trainstack.dev/submitted-by=cli` leaves them (the fake keeps the labels).
    return [{"name": f"job-{i:03d}", "chart": "training-job-0.1.0", "status": "deployed",
             "updated": "2026-11-25 12:00:00.000000 +0000 UTC", "labels": {"trainstack.dev/submitted-by": "cli"}}
            for i in range(count)]


def test_list_and_the_name_checks_see_past_helms_default_of_256(cluster, cli, outputs_file):
    path = outputs_file("gcp")
    cluster.set_state({"releases": _cli_releases(300)})
    code, out, _ = cli("list", "--outputs", path)
    assert code == 0 and "job-299" in out
    code, _, err = cli("submit", "job-299", "--outputs", path)
    assert code == 2 and "a job named job-299 already exists" in err
    assert all(c["argv"][0] != "install" for c in cluster.calls)


def test_cancel_all_reaches_every_release_and_waits_for_the_pods(cluster, cli, outputs_file):
    path = outputs_file("gcp")
    cluster.set_state({"releases": _cli_releases(300)})
    code, out, _ = cli("cancel", "--all", "--outputs", path)
    assert code == 0 and cluster.state["releases"] == []
    uninstalls = [c["argv"] for c in cluster.calls if c["argv"][0] == "uninstall"]
    assert len(uninstalls) == 300
    # Before pulumi destroy: helm returns only once the pods (which hold the shared claim) are gone.
    for argv in uninstalls:
        assert "--wait" in argv and argv[argv.index("--cascade") + 1] == "foreground"


def test_cancel_all_never_touches_a_release_the_cli_did_not_install(cluster, cli, outputs_file):
    # A stale --outputs file: saved while the stack's own job was off, so stackJob is null, but Pulumi's
    # release "train" exists now. Only the CLI's label decides.
    path = outputs_file("aws", lambda exports: exports["jobSubmission"].update(stackJob=None))
    assert cli("submit", "mine", "--outputs", path)[0] == 0
    cluster.set_state({"releases": [*cluster.state["releases"],
                                    {"name": "train", "chart": "training-job-0.1.0", "status": "deployed"}]})
    assert cli("cancel", "--all", "--outputs", path)[0] == 0
    assert [c["argv"][1] for c in cluster.calls if c["argv"][0] == "uninstall"] == ["mine"]
    assert [r["name"] for r in cluster.state["releases"]] == ["train"]


def test_logs_print_every_line_and_survive_one_pod_stream_failing(cluster, outputs_file, capfd):
    # capfd, not the cli fixture's capsys: kubectl writes to the terminal itself.
    path = outputs_file("aws")
    assert main(["submit", "exp", "--outputs", path]) == 0
    lines = "".join(f"[pod/exp-0-abc/trainer] step {i}\n" for i in range(25))
    cluster.set_state({**cluster.state, "logs": lines, "log_stream_error": "pod exp-1-def not found"})
    capfd.readouterr()
    assert main(["logs", "exp", "--outputs", path]) == 0
    assert capfd.readouterr().out == lines  # not only the last 10 of each pod
    assert main(["logs", "exp", "-f", "--outputs", path]) == 0
    assert capfd.readouterr().out == lines


def test_ctrl_c_during_logs_is_not_a_traceback(cluster, cli, outputs_file, monkeypatch):
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("trainstack.jobs.cluster.Cluster.stream", interrupted)
    code, out, err = cli("logs", "exp", "-f", "--outputs", path)
    assert code == 130 and "Traceback" not in err


def _helm_updated(hours_ago: float) -> str:
    # helm list's `updated`: Go's time.String() (helm v3.21.4 cmd/helm/list.go:164-171).
    return (datetime.now(timezone.utc) - timedelta(hours=hours_ago)).strftime("%Y-%m-%d %H:%M:%S.%f000 +0000 UTC")


def test_list_tells_a_job_that_is_gone_from_one_that_waits(cluster, cli, outputs_file):
    # No Job for any of them: the release's status and age say why.
    release = {"chart": "training-job-0.1.0", "labels": {"trainstack.dev/submitted-by": "cli"}}
    cluster.set_state({"releases": [
        {**release, "name": "refused", "status": "failed", "updated": _helm_updated(1)},
        {**release, "name": "installing", "status": "pending-install", "updated": _helm_updated(0)},
        {**release, "name": "old", "status": "deployed", "updated": _helm_updated(25)},  # past the 24 h TTL
        {**release, "name": "removed", "status": "deployed", "updated": _helm_updated(2)},
    ]})
    code, out, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 0, err
    states = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:-1]}
    assert states == {"refused": "failed", "installing": "submitting", "old": "expired", "removed": "deleted"}


def test_list_matches_a_workload_to_its_job_by_uid(cluster, cli, outputs_file):
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    [install] = [c for c in cluster.calls if c["argv"][0] == "install"]
    job = one(render(json.loads(install["stdin"]), release="exp", namespace="default"), "Job")
    job["metadata"].update(uid="11111111-1111-1111-1111-111111111111", creationTimestamp=_at(0.1))
    job["status"] = {}
    current = workload_for(job, conditions=[])
    # A Workload left by an earlier job named exp (cancelled and submitted again): admitted, another owner.
    earlier = workload_for({**job, "metadata": {**job["metadata"], "uid": "22222222-2222-2222-2222-222222222222"}},
                           conditions=[_condition("Admitted", 5, "Admitted")])
    earlier["metadata"]["name"] = "job-exp-22222"
    cluster.set_state({**cluster.state, "jobs": [job], "workloads": [current, earlier]})
    code, out, err = cli("list", "--outputs", path)
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == ["exp", "queued"]


def test_cancel_all_removes_the_nccl_check_the_stack_command_installed(cluster, cli, outputs_file, stack_exports,
                                                                       tmp_path):
    # Review finding 5: the release `eval "$(pulumi stack output ncclCheckCommand)"` installs had no CLI
    # label, so `cancel --all` (before pulumi destroy) left it, and its Job, behind.
    command = stack_exports("gcp-a3")["ncclCheckCommand"]
    install = shlex.split(command.split(" && ", 1)[0])
    assert install[:3] == ["helm", "install", "nccl-check"]
    subprocess.run(install, check=True, cwd=tmp_path, env={**os.environ, "PATH": os.environ["PATH"]})
    assert [r["name"] for r in cluster.state["releases"]] == ["nccl-check"]
    code, _, _ = cli("cancel", "--all", "--outputs", outputs_file("gcp-a3"))
    assert code == 0 and cluster.state["releases"] == []
