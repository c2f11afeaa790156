"""Bad input to every command: one line, exit 2, and nothing sent to the cluster (no helm/kubectl call,
or only the read-only `helm list` that finds out a name is unknown or taken)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.jobs.conftest import without_queue

READ_ONLY = {"helm list", "helm version"}


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("trainstack "), err
    assert "Fix: " in err
    return err


@pytest.mark.parametrize(("argv", "says"), [
    (["--", "--lr", "nan"], "the trainer flags after --: the trainer refuses it"),
    (["--", "--no-such-flag"], "the trainer refuses it"),
    (["--", "--out", "/tmp/elsewhere"], "--out would move the run off the shared volume"),
    (["--", "--data", "/tmp/data"], "--data would move the run"),
    # argparse's abbreviations reach the same flags: checked on what the trainer parses.
    (["--", "--ou", "/tmp/elsewhere"], "--out (or an abbreviation of it) would move the run"),
    (["--", "--dat", "/tmp/x"], "--data (or an abbreviation of it) would move the run"),
    (["--", "--o=/tmp/y"], "the trainer flags after --: "),
    (["--", "--snapshot-uri", "s3://other/x"], "--snapshot-uri is set by trainstack"),
    (["--pods", "1:3"], "3 pods need 3 GPU nodes (g4dn.xlarge), but the stack's GPU pool has at most 2"),
    (["--pods", "3:1"], "--pods: podsMin (3) is greater than podsMax (1)"),
    (["--pods", "two"], "--pods 'two': expected N or MIN:MAX"),
    (["--image", "ghcr.io/me/img"], "--image: image reference 'ghcr.io/me/img' has neither a digest nor a tag"),
    (["--sweep", "lr=1,2", "--sweep", "warmup-steps=1,2,3,4,5,6,7,8,9"], "18 jobs, more than the 16"),
    (["--sweep", "learning-rate=1e-3"], "--sweep learning-rate: not a flag of the trainer"),
    (["--sweep", "lr"], "expected KEY=V1,V2"),
    (["--sweep", "lr=1e-3,1E-3"], "a value is listed twice"),  # one number to the trainer
    (["--sweep", "lr=0.1,0-1"], "give the same job name"),
    (["--sweep", "lr=1e-3", "--", "--lr", "3e-4"], "--lr is set twice"),
    (["--sweep", "lr=3e-4,abc"], "the trainer refuses it: argument --lr"),
    (["--sweep", "no-export=1,0"], "is a switch, not a value"),
    (["--module", "x", "--sweep", "lr=1,2"], "--sweep varies trainer flags"),
])
def test_submit_refuses_before_the_cluster(argv, says, cluster, cli, outputs_file):
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"), *argv)
    assert code == 2 and out == ""
    assert says in _one_line(err)
    assert cluster.calls == []


@pytest.mark.parametrize(("pods", "says"), [
    ("3:1", "trainstack submit: --nodes: podsMin (3) is greater than podsMax (1). Fix: give --pods MIN:MAX with "
            "MIN <= MAX (--pods replaces --nodes)"),
    ("1:3", "trainstack submit: --nodes: 3 pods need 3 GPU nodes (g4dn.xlarge), but the stack's GPU pool has at "
            "most 2"),
])
def test_an_error_on_the_old_nodes_flag_names_that_flag(pods, says, cluster, cli, outputs_file):
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--nodes", pods)
    assert code == 2 and out == ""
    warning, error = err.splitlines()
    assert "--nodes is deprecated" in warning and error.startswith(says), error
    assert cluster.calls == []


@pytest.mark.parametrize("name", ["Exp", "1exp", "exp_1", "a" * 51])
def test_submit_refuses_a_bad_name(name, cluster, cli, outputs_file):
    code, _, err = cli("submit", name, "--outputs", outputs_file("aws"))
    assert code == 2 and _one_line(err).startswith("trainstack submit: NAME: ")
    assert cluster.calls == []


def test_a_sweep_name_over_the_release_limit(cluster, cli, outputs_file):
    code, _, err = cli("submit", "a" * 40, "--outputs", outputs_file("aws"), "--sweep", "warmup-steps=10")
    assert code == 2 and "NAME: " in _one_line(err) and "at most 50" in err
    assert cluster.calls == []


@pytest.mark.parametrize("missing", ["jobSubmission", "kubeconfig", "estimatedHourlyUsd"])
@pytest.mark.parametrize("command", [["submit", "exp"], ["list"], ["logs", "exp"], ["cancel", "exp"],
                                     ["results", "exp"]])
def test_missing_outputs(command, missing, cluster, cli, outputs_file):
    path = outputs_file("gcp", lambda exports: exports.pop(missing))
    code, _, err = cli(*command, "--outputs", path)
    assert code == 2 and f"the stack's outputs lack {missing}" in _one_line(err)
    assert cluster.calls == []


def test_hidden_secrets(cluster, cli, outputs_file):
    path = outputs_file("gcp", lambda exports: exports.update(kubeconfig="[secret]"))
    code, _, err = cli("list", "--outputs", path)
    assert code == 2 and "--show-secrets" in _one_line(err)
    assert cluster.calls == []


def test_no_outputs_file(cluster, cli, tmp_path):
    code, _, err = cli("list", "--outputs", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read it" in _one_line(err)


@pytest.mark.parametrize("kind", ["/dev/zero", "large"])
def test_an_outputs_file_that_is_not_one_is_refused_without_reading_it_all(kind, cluster, cli, tmp_path):
    """Re-check 4 j23: `--outputs /dev/zero` was read until a MemoryError traceback."""
    path = tmp_path / "outputs.json"
    if kind == "large":
        with path.open("wb") as f:
            f.truncate(17 * 2**20)  # sparse: no disk used
    else:
        path = Path(kind)
    code, _, err = cli("list", "--outputs", str(path))
    line = _one_line(err)
    assert code == 2, err
    assert {"/dev/zero": "is a character device", "large": "is over 16 MiB"}[kind] in line
    assert cluster.calls == []


def test_no_pulumi_cli(cluster, cli):
    code, _, err = cli("list", "--stack", "aws")  # PATH holds only the fake helm and kubectl
    assert code == 2 and "the pulumi CLI is not on PATH" in _one_line(err)


@pytest.mark.parametrize("command", [["logs", "ghost"], ["logs", "ghost", "-f"], ["cancel", "ghost"]])
def test_an_unknown_job(command, cluster, cli, outputs_file):
    cluster.set_state({"releases": [{"name": "exp", "chart": "training-job-0.1.0", "status": "deployed"}]})
    code, _, err = cli(*command, "--outputs", outputs_file("aws"))
    assert code == 2 and "no job 'ghost' on this stack (jobs: exp)" in _one_line(err)
    assert set(cluster.verbs()) <= READ_ONLY


def test_cancelling_the_stacks_own_job_is_pulumis(cluster, cli, outputs_file):
    path = outputs_file("aws", lambda exports: exports["jobSubmission"].update(stackJob="train"))
    code, _, err = cli("cancel", "train", "--outputs", path)
    assert code == 2 and "trainstack:job.enabled false" in _one_line(err)
    assert cluster.calls == []


def test_results_of_a_bad_name(cluster, cli, outputs_file):
    code, _, err = cli("results", "../other", "--outputs", outputs_file("aws"))
    assert code == 2 and "NAME: " in _one_line(err)


def test_missing_tools(cluster, cli, outputs_file, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 2 and "helm is not on PATH" in _one_line(err)


@pytest.mark.parametrize("argv", [[], ["exp", "--all"]])
def test_cancel_takes_a_name_or_all(argv, cluster, cli, outputs_file):
    code, _, err = cli("cancel", *argv, "--outputs", outputs_file("aws"))
    assert code == 2 and "cancel takes a NAME or --all" in _one_line(err)
    assert cluster.calls == []


@pytest.mark.parametrize("stack", ["aws", "gcp", "gcp-a3"])
def test_submit_refuses_a_job_its_queue_could_never_admit(stack, cluster, cli, outputs_file):
    # The pool's node count allows the job, but the queue holds less memory than its pods ask (a quota
    # from a stack whose pods grew since): Kueue would leave the Workload pending for ever.
    def smaller_quota(exports):
        submission = exports["jobSubmission"]
        submission["queues"][submission["queueName"]]["quota"]["memory"] = "1Gi"

    code, out, err = cli("submit", "exp", "--outputs", outputs_file(stack, smaller_quota))
    assert code == 2 and out == ""
    assert "memory, but queue" in _one_line(err) and "holds at most 1Gi (its pool at its maximum)" in err
    assert cluster.calls == []


def _set(*path_and_value):
    *path, value = path_and_value

    def edit(exports):
        node = exports
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(("edit", "says"), [
    (_set("jobSubmission", "gpusPerNode", "abc"), "jobSubmission.gpusPerNode is 'abc'"),
    (_set("jobSubmission", "gpusPerNode", 0), "jobSubmission.gpusPerNode is 0"),
    (_set("jobSubmission", "namespace", None), "jobSubmission.namespace is None"),
    (_set("jobSubmission", "namespace", ["a"]), "jobSubmission.namespace is ['a']"),
    (_set("jobSubmission", "values", []), "jobSubmission.values is []"),
    (_set("jobSubmission", "bucketUri", None), "jobSubmission.bucketUri is None"),
    (_set("jobSubmission", "serviceAccountAnnotations", ["x"]), "jobSubmission.serviceAccountAnnotations is"),
    (_set("estimatedHourlyUsd", "gpuNode", "usdPerNode", "x"), "estimatedHourlyUsd.gpuNode.usdPerNode is 'x'"),
    (_set("jobSubmission", "queues", ["training"]), "jobSubmission.queues is ['training']"),
    (_set("jobSubmission", "serviceAccount", 7), "jobSubmission.serviceAccount is 7"),
])
@pytest.mark.parametrize("command", [["submit", "exp"], ["list"]])
def test_malformed_outputs(command, edit, says, cluster, cli, outputs_file):
    code, out, err = cli(*command, "--outputs", outputs_file("aws", edit))
    assert code == 2 and out == "" and says in _one_line(err)
    assert cluster.calls == []


def test_an_outputs_file_in_utf16(cluster, cli, outputs_file, tmp_path):
    # PowerShell 5's `>` writes UTF-16 with a byte-order mark.
    path = tmp_path / "utf16.json"
    path.write_bytes(Path(outputs_file("aws")).read_text(encoding="utf-8").encode("utf-16"))
    code, _, err = cli("list", "--outputs", str(path))
    assert code == 2 and "not UTF-8 text" in _one_line(err)
    assert cluster.calls == []


@pytest.mark.parametrize(("argv", "says"), [
    # Image references the kubelet refuses (InvalidImageName) or helm's schema does.
    (["--image", "x:y z"], "--image: 'x:y z' is not an image reference"),
    (["--image", "@sha256:abc"], "is not an image reference"),
    (["--image", ":tag"], "is not an image reference"),
    (["--image", "repo@"], "is not an image reference"),
    (["--image", "repo:"], "is not an image reference"),
    (["--image", "Repo:UPPER"], "is not an image reference"),
    (["--image", "repo@sha256:abc"], "is not an image reference"),
    # What the chart's schema refuses, found by rendering it here: a digest that is not sha256 and 64 hex.
    (["--image", "repo@sha512:" + "a" * 64], "the chart refuses job exp: at '/image/digest'"),
    (["--module", ""], "--module is empty"),
    (["--script", " "], "--script is empty"),
    (["--module", "training"], "--module training is the trainer"),
])
def test_submit_refuses_what_the_cluster_would(argv, says, cluster, cli, outputs_file):
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"), *argv)
    assert code == 2 and out == ""
    assert says in _one_line(err)
    assert cluster.calls == []


@pytest.mark.parametrize("name", ["default", "kubernetes", "exp-tensorboard", "exp-etcd", "exp-nccl-check"])
def test_submit_refuses_a_name_another_object_has(name, cluster, cli, outputs_file):
    code, _, err = cli("submit", name, "--outputs", outputs_file("aws"))
    assert code == 2 and _one_line(err).startswith("trainstack submit: NAME: ")
    assert cluster.calls == []


def test_tensorboard_without_the_shared_volume_is_refused_by_the_chart_here(cluster, cli, outputs_file):
    # A GCP stack with sharedFilesystem off: no claim for TensorBoard to read the run from.
    def no_claim(exports):
        exports["jobSubmission"]["values"]["storage"].pop("pvc", None)

    code, _, err = cli("submit", "exp", "--tensorboard", "--outputs", outputs_file("gcp", no_claim))
    assert code == 2 and "the chart refuses job exp: " in _one_line(err)
    assert cluster.calls == []


def test_a_multi_node_sweep_needs_a_queue(cluster, cli, outputs_file):
    code, _, err = cli("submit", "lrs", "--outputs", outputs_file("gcp", without_queue), "--pods", "2",
                       "--sweep", "lr=3e-4,1e-3")
    assert code == 2 and "on a stack without a queue" in _one_line(err)
    assert cluster.calls == []


def test_without_the_sdk_the_chart_is_rendered_by_helm_template(cluster, cli, outputs_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "helm_python", None)  # not installed: `import helm_python` fails
    cluster.set_state({"template_error": "Error: execution error at (training-job/templates/_validate.tpl:34:4): "
                                         "image.digest or image.tag is required (a digest pins the exact image)"})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"))
    assert code == 2
    assert "the chart refuses job exp: image.digest or image.tag is required" in _one_line(err)
    [call] = cluster.calls  # helm template alone: offline, no kubeconfig, no install
    assert call["argv"][:2] == ["template", "exp"] and "--kubeconfig" not in call["argv"]


def _half_the_memory_quota(exports):
    """A queue that holds one of the stack pool's two pods (memory), not both."""
    from trainstack.infra.kubernetes.pod_requests import format_quantity, parse_quantity

    quota = exports["jobSubmission"]["queues"][exports["jobSubmission"]["queueName"]]["quota"]
    quota["memory"] = format_quantity(parse_quantity(quota["memory"]) / 2)


def test_an_elastic_job_whose_minimum_fits_its_queue_is_submitted_with_a_warning(cluster, cli, outputs_file):
    # Kueue admits it with fewer pods (PartialAdmission, on by default in v0.19.2): refusing it is stricter
    # than Kueue (review finding 9).
    code, _, err = cli("submit", "exp", "--pods", "1:2", "--outputs", outputs_file("aws", _half_the_memory_quota))
    assert code == 0, err
    assert "warning: exp: queue training holds 1 of the 2 pods at most" in err
    code, _, err = cli("submit", "fixed", "--pods", "2", "--outputs", outputs_file("aws", _half_the_memory_quota))
    assert code == 2 and "2 pods ask" in _one_line(err) and "smaller --pods MIN" in err


@pytest.mark.parametrize("argv", [["submit"], ["submit", "--pods"], ["nope"], []])
def test_argument_errors_are_one_line(argv, cluster, cli):
    """Re-check 4 j02/j25: argparse printed its usage block, four lines, for a missing NAME."""
    code, _, err = cli(*argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("trainstack"), err
    assert "Fix: see `trainstack" in err
    assert cluster.calls == []


def test_outputs_through_a_pipe_are_read(cluster, cli, outputs_file, tmp_path):
    """Re-check 5 k06: `--outputs <(pulumi stack output --json --show-secrets)` keeps the secrets off disk."""
    import os
    import threading

    pipe = tmp_path / "outputs.pipe"
    os.mkfifo(pipe)
    text = Path(outputs_file("aws")).read_bytes()
    writer = threading.Thread(target=lambda: pipe.write_bytes(text), daemon=True)
    writer.start()
    code, out, err = cli("list", "--outputs", str(pipe))
    writer.join(5)
    assert code == 0, err


def test_a_pipe_nothing_writes_to_is_one_line_within_the_wait(cluster, cli, tmp_path, monkeypatch):
    """Re-check 6 k15: a FIFO with no writer behind --outputs waited forever."""
    import os

    from trainstack.jobs import stack_outputs

    monkeypatch.setattr(stack_outputs, "PIPE_WAIT_S", 1.0)
    pipe = tmp_path / "outputs.pipe"
    os.mkfifo(pipe)
    code, _, err = cli("list", "--outputs", str(pipe))
    assert code == 2 and "is a pipe nothing writes to" in _one_line(err)
    assert cluster.calls == []
