"""`cancel` and `submit` of a name again (issue 29 items 2-4): every release tried, only the CLI's own,
and never two trainings of one name at once. The fake helm and kubectl answer as helm v3.21.4 and
kubectl v0.34.0 do (tests/jobs/fake_tool.py)."""

from __future__ import annotations

import json

from tests.workloads.chart import one, render
from trainstack.infra.kubernetes.job_submission import SUBMITTED_BY_CLI

CLI_LABELS = dict([SUBMITTED_BY_CLI])


def _release(name: str, labels: dict | None = None) -> dict:
    return {"name": name, "namespace": "training", "revision": "1", "status": "deployed",
            "updated": "2026-11-25 12:00:00.000000 +0000 UTC", "chart": "training-job-0.1.0",
            "app_version": "0.1.0", "labels": CLI_LABELS if labels is None else labels}


def test_cancel_all_goes_on_past_a_failure_and_names_it(cluster, cli, outputs_file):
    """M2: a-job's uninstall outlives helm's wait; b-job and c-job are still uninstalled, exit 1 names a-job."""
    cluster.set_state({"releases": [_release("a-job"), _release("b-job"), _release("c-job")],
                       "uninstall_timeout": ["a-job"]})
    code, out, err = cli("cancel", "--all", "--outputs", outputs_file("gcp"))
    assert code == 1
    assert cluster.state["releases"] == []
    assert "cancelled b-job" in out and "cancelled c-job" in out
    assert "a-job: helm uninstall failed: Error: uninstallation completed with 1 error(s)" in err
    assert err.strip().splitlines()[-1].startswith("trainstack cancel: not cancelled, or not confirmed gone: a-job")


def test_cancel_all_waits_longer_than_the_grace_period(cluster, cli, outputs_file, stack_exports):
    cluster.set_state({"releases": [_release("a-job")]})
    assert cli("cancel", "--all", "--outputs", outputs_file("gcp"))[0] == 0
    argv = next(c["argv"] for c in cluster.calls if c["argv"][0] == "uninstall")
    timeout = argv[argv.index("--timeout") + 1]
    job = one(render(json.loads(json.dumps(stack_exports("gcp")["jobSubmission"]["values"])), release="a-job"), "Job")
    grace = job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert timeout.endswith("s") and int(timeout[:-1]) > grace  # helm's default 300 s equals the chart's grace
    assert argv[argv.index("--cascade") + 1] == "foreground" and "--wait" in argv


def test_cancel_name_removes_only_a_release_the_cli_made(cluster, cli, outputs_file):
    """Item 4: a release installed by hand (no CLI label) is not the CLI's to remove."""
    cluster.set_state({"releases": [_release("by-hand", labels={})]})
    code, out, err = cli("cancel", "by-hand", "--outputs", outputs_file("gcp"))
    assert code == 2 and out == ""
    assert "by-hand was not submitted by trainstack" in err and "helm uninstall by-hand" in err
    assert [r["name"] for r in cluster.state["releases"]] == ["by-hand"]
    assert "helm uninstall" not in cluster.verbs()


def test_cancel_name_of_the_stacks_job_under_another_name_is_refused(cluster, cli, outputs_file):
    # The outputs saved before the stack job was enabled do not name it; its release has no CLI label.
    cluster.set_state({"releases": [_release("train", labels={})]})
    code, _, err = cli("cancel", "train", "--outputs", outputs_file("gcp"))
    assert code == 2 and "not submitted by trainstack" in err
    assert [r["name"] for r in cluster.state["releases"]] == ["train"]


def _pod(job: str, *, phase: str = "Running", deleting: bool = True) -> dict:
    meta = {"name": f"{job}-0-x7k2p", "labels": {"app.kubernetes.io/name": "training-job",
                                                 "batch.kubernetes.io/job-name": job,
                                                 "batch.kubernetes.io/controller-uid": "old-uid"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_submit_refuses_while_a_cancelled_jobs_pods_still_stop(cluster, cli, outputs_file):
    """M3: the old pods still write runs/exp; a new exp would share the run directory."""
    cluster.set_state({"pods": [_pod("exp")]})
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("gcp"))
    assert code == 2 and out == ""
    assert "a pod of an earlier job exp is stopping (exp-0-x7k2p)" in err
    assert "kubectl get pods -l batch.kubernetes.io/job-name=exp" in err
    assert "helm install" not in cluster.verbs()


def test_submit_goes_once_the_old_pods_are_finished(cluster, cli, outputs_file):
    cluster.set_state({"pods": [_pod("exp", phase="Succeeded", deleting=False), _pod("other")]})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp"))
    assert code == 0, err
    assert "helm install" in cluster.verbs()


def test_each_submission_selects_only_its_own_pods(cluster, cli, outputs_file):
    """M3: the headless Service of a new job must not select a cancelled job's terminating pods."""
    path = outputs_file("gcp")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    first = json.loads(next(c["stdin"] for c in cluster.calls if c["argv"][0] == "install"))
    assert cli("cancel", "exp", "--outputs", path)[0] == 0
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    second = json.loads([c["stdin"] for c in cluster.calls if c["argv"][0] == "install"][-1])
    ids = [values["job"]["submissionId"] for values in (first, second)]
    assert ids[0] != ids[1]
    objects = render(second, release="exp")
    selector = one(objects, "Service", "exp")["spec"]["selector"]
    labels = one(objects, "Job")["spec"]["template"]["metadata"]["labels"]
    assert selector["trainstack.dev/submission"] == ids[1] == labels["trainstack.dev/submission"]
    old_pod_labels = {**labels, "trainstack.dev/submission": ids[0]}
    assert not all(old_pod_labels.get(k) == v for k, v in selector.items())
