"""Every call bounded, every odd answer one line (issue 29 items 5, 6, 10, 14): the fake helm, kubectl and
pulumi hang, print something that is not JSON, JSON of the wrong shape, or an exec plugin's reason first."""

from __future__ import annotations

import json
import sys

import pytest

from trainstack.jobs import cluster as cluster_module
from trainstack.jobs import stack_outputs


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("trainstack "), err
    return err


@pytest.mark.parametrize(("command", "hang"), [
    (["list"], "helm list"), (["list"], "kubectl get"), (["submit", "exp"], "helm list"),
    (["cancel", "--all"], "helm version"), (["logs", "exp"], "helm list")])
def test_a_tool_that_never_answers_is_named(command, hang, cluster, cli, outputs_file, monkeypatch):
    monkeypatch.setattr(cluster_module, "CALL_TIMEOUT_S", 2)
    cluster.set_state({"hang": [hang]})
    code, _, err = cli(*command, "--outputs", outputs_file("aws"))
    assert code == 1
    assert f"{hang} did not answer within 2s" in _one_line(err)


def test_kubectl_gets_a_request_timeout(cluster, cli, outputs_file):
    assert cli("list", "--outputs", outputs_file("aws"))[0] == 0
    for call in cluster.calls:
        if call["tool"] == "kubectl":
            assert f"--request-timeout={cluster_module.KUBECTL_REQUEST_TIMEOUT_S}s" in call["argv"]


def test_pulumi_that_never_answers_is_named(cluster, cli, monkeypatch, tmp_path):
    pulumi = cluster.bin / "pulumi"
    pulumi.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(3600)\n")
    pulumi.chmod(0o755)
    monkeypatch.setattr(stack_outputs, "PULUMI_TIMEOUT_S", 2)
    code, _, err = cli("list", "--stack", "aws")
    assert code == 2 and "pulumi stack output --stack aws did not answer within 2s" in _one_line(err)


@pytest.mark.parametrize(("answer", "says"), [
    ({"helm list": '[{"name": "a", "chart": "training-job-0.1'}, "helm list answered with something that is not JSON"),
    ({"helm list": '{"name": "a"}'}, "helm list answered with a JSON dict, expected a list"),
    ({"helm list": '["a"]'}, "helm list answered with entries that are not releases"),
    ({"kubectl get": "<html>502 Bad Gateway</html>"}, "kubectl get answered with something that is not JSON"),
    ({"kubectl get": '{"items": {"a": 1}}'}, "kubectl get jobs answered with items that are not Kubernetes objects"),
    ({"kubectl get": "[" * 100000 + "]" * 100000}, "kubectl get answered with JSON nested too deep"),
])
def test_a_wrong_answer_is_one_line(answer, says, cluster, cli, outputs_file):
    cluster.set_state({"answer": answer})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 1 and says in _one_line(err)


def test_outputs_nested_too_deep_are_one_line(cluster, cli, tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text('{"a": ' + "[" * 200000 + "]" * 200000 + "}")
    code, _, err = cli("list", "--outputs", str(path))
    assert code == 2 and "nested deeper than any stack's outputs" in _one_line(err)


# client-go's exec credential plugin writes the plugin's stderr first, then helm its own line
# (k8s.io/client-go plugin/pkg/client/auth/exec/exec.go; helm pkg/kube/client.go "Kubernetes cluster unreachable").
EXPIRED = ("\nToken has expired and refresh failed\n"
           'Error: Kubernetes cluster unreachable: Get "https://x.eks.amazonaws.com/version": getting credentials: '
           "exec: executable aws failed with exit code 255\n")


def test_an_expired_login_keeps_its_reason(cluster, cli, outputs_file):
    cluster.set_state({"stderr": {"helm list": EXPIRED}})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    line = _one_line(err)
    assert code == 1
    assert "exec: executable aws failed with exit code 255 (Token has expired and refresh failed)" in line
    assert "log in again" in line


@pytest.mark.parametrize(("version", "ok"), [("v3.12.3+g3a31588", False), ("v3.13.0+g825e86f", True),
                                             ("v3.21.4+g5ccc2d2", True), ("v4.2.4+g8650e1d", True)])
def test_helm_older_than_3_13_is_refused_before_install(version, ok, cluster, cli, outputs_file):
    cluster.set_state({"helm_version": version})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"))
    if ok:
        assert code == 0, err
        install = next(c["argv"] for c in cluster.calls if c["argv"][0] == "install")
        assert install[install.index("--labels") + 1] == "trainstack.dev/submitted-by=cli"
    else:
        assert code == 2 and "helm v3.12.3 is older than v3.13, which added install --labels" in _one_line(err)
        assert "helm install" not in cluster.verbs()


def test_the_flags_the_cli_passes_exist_in_helm_4(cluster, cli, outputs_file):
    """Helm 4.2.4's flags (pkg/cmd/install.go:209 --labels; list.go:133,136 --max/--selector; uninstall.go:82-83
    --cascade/--timeout; flags.go AddWaitFlag: a bare --wait is the `watcher` strategy)."""
    helm4 = {"install": {"--values", "--labels"}, "list": {"--all", "--max", "--output", "--selector"},
             "uninstall": {"--wait", "--cascade", "--timeout"}, "version": {"--short"}}
    cluster.set_state({"helm_version": "v4.2.4+g8650e1d"})
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    assert cli("cancel", "--all", "--outputs", path)[0] == 0
    for call in (c for c in cluster.calls if c["tool"] == "helm" and c["argv"][0] in helm4):
        flags = {w.split("=")[0] for w in call["argv"] if w.startswith("--")} - {"--kubeconfig", "--namespace"}
        assert flags <= helm4[call["argv"][0]], call["argv"]
        if "--wait" in call["argv"]:  # bare: v4 reads the next word as a value only when joined by =
            after = call["argv"][call["argv"].index("--wait") + 1]
            assert after.startswith("--"), call["argv"]
    assert json.loads(cluster.state_file.read_text())["releases"] == []


@pytest.mark.parametrize("job", [{"metadata": {"name": "exp"}}, {"metadata": {"name": "exp"}, "spec": None},
                                 {"metadata": {"name": "exp"}, "spec": {"template": {"spec": {"containers": [
                                     {"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}}}}])
def test_a_job_of_the_wrong_shape_is_one_line(job, cluster, cli, outputs_file):
    cluster.set_state({"releases": [{"name": "exp", "chart": "training-job-0.1.0", "status": "deployed"}],
                       "jobs": [job]})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 1 and "not what a Kubernetes API server sends" in _one_line(err)


def test_logs_without_follow_is_bounded_and_follow_is_not(cluster, cli, outputs_file, monkeypatch):
    monkeypatch.setattr(cluster_module, "CALL_TIMEOUT_S", 2)
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    cluster.set_state({**cluster.state, "hang": ["kubectl logs"]})
    code, _, err = cli("logs", "exp", "--outputs", path)
    assert code == 1 and "kubectl logs did not finish within 2s" in _one_line(err)
    assert f"--request-timeout={cluster_module.KUBECTL_REQUEST_TIMEOUT_S}s" in cluster.calls[-1]["argv"]
    cluster.set_state({**cluster.state, "hang": []})
    assert cli("logs", "exp", "-f", "--outputs", path)[0] == 0
    assert not any(a.startswith("--request-timeout") for a in cluster.calls[-1]["argv"])  # it would cut the stream
