"""A hostile pass over the job CLI with inputs the earlier passes did not try: odd fake answers and odd
arguments. Every one ends in exit 0, 1 or 2 with at most one line on stderr per problem: no traceback,
no call that changes the cluster for bad input."""

from __future__ import annotations

import pytest

CHANGES = ("helm install", "helm uninstall")
RELEASE = {"name": "exp", "chart": "training-job-0.1.0", "status": "deployed", "labels": {}}


@pytest.mark.parametrize(("state", "command", "code"), [
    ({"answer": {"helm list": "null"}}, ["list"], 0),
    ({"answer": {"helm list": '[{"name": 5}]'}}, ["list"], 1),
    ({"answer": {"kubectl get": '{"items": null}'}, "releases": [RELEASE]}, ["list"], 1),
    ({"answer": {"kubectl get": '{"items": [{"metadata": {"name": "x", "ownerReferences": null}}]}'},
      "releases": [RELEASE]}, ["list"], 1),
    ({"answer": {"helm version": ""}}, ["cancel", "--all"], 2),
    ({"answer": {"helm version": "v3.13.0-rc.1+gabcdef0"}}, ["cancel", "--all"], 0),
    ({"stderr": {"helm list": ""}}, ["list"], 1),
    ({"stderr": {"kubectl get": "error: You must be logged in to the server (Unauthorized)"}}, ["submit", "exp"], 1),
    ({"answer": {"kubectl get": '{"items": [{"metadata": {"name": "p", "labels": {"batch.kubernetes.io/job-name": '
                                '"exp"}}, "status": null}]}'}}, ["submit", "exp"], 2),
    ({"pods": [{"metadata": {"name": "p", "labels": {"app.kubernetes.io/name": "training-job"}},
                "status": {"phase": "Running", "containerStatuses": None}}], "releases": [RELEASE]}, ["list"], 0),
])
def test_odd_answers(state, command, code, cluster, cli, outputs_file):
    cluster.set_state(state)
    got, _, err = cli(*command, "--outputs", outputs_file("aws"))
    assert got == code, err
    if code:
        assert err.count("\n") == 1 and err.startswith("trainstack "), err
        assert not set(cluster.verbs()) & set(CHANGES)


@pytest.mark.parametrize("argv", [
    ["submit", "--", "--lr", "1"], ["submit", "éxp"], ["submit", "exp\t"], ["submit", "exp", "--pods", " "],
    ["submit", "exp", "--pods", "1:2:3"], ["submit", "exp", "--image", "repo:tag\n"], ["logs", "exp\n"],
    ["results", "exp\t"], ["cancel", "exp", "--all"], ["submit", "exp", "--sweep", "lr=" + "1" * 5000],
    ["submit", "exp", "--", "--snapshot-uri="], ["submit", "exp", "--", "-h", "--lr", "1"],
    ["submit", "exp", "--module", "x", "--", "--help"],
])
def test_odd_arguments(argv, cluster, cli, outputs_file):
    got, _, err = cli(argv[0], "--outputs", outputs_file("aws"), *argv[1:])
    if argv[-1] == "--help" and "--module" in argv:
        assert got == 0, err  # a module's own arguments are the module's
        return
    assert got == 2, err
    assert err.count("\n") == 1 and err.startswith("trainstack"), err
    assert not set(cluster.verbs()) & set(CHANGES)
