"""A third hostile pass over the job CLI (new inputs): numbers no tool sends, a reader that leaves, a
signal, the user's HELM_* environment, a stack output out of range. Each ends in one line or a clean
exit: no traceback, no wait without end, no other cluster touched, no credentials left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from trainstack.jobs import cluster as cluster_module
from trainstack.jobs.cluster import tool_environment

RELEASE = {"name": "exp", "chart": "training-job-0.1.0", "status": "deployed",
           "labels": {"trainstack.dev/submitted-by": "cli"}}
HUGE = "1" + "0" * 5000  # past Python's 4300-digit limit for int()


def one_line(code: int, err: str, expected: int) -> None:
    assert code == expected, err
    assert err.count("\n") == 1 and err.startswith("trainstack ") and "Traceback" not in err, err


@pytest.mark.parametrize(("state", "command"), [
    ({"answer": {"helm list": f'[{{"name": "exp", "chart": "training-job-0.1.0", "revision": {HUGE}}}]'}}, ["list"]),
    ({"answer": {"kubectl get": f'{{"items": [], "x": {HUGE}}}'}, "releases": [RELEASE]}, ["list"]),
])
def test_numbers_no_tool_sends_are_one_line(state, command, cluster, cli, outputs_file):
    cluster.set_state(state)
    one_line(*cli(*command, "--outputs", outputs_file("aws"))[::2], 1)


def test_a_helm_version_with_absurd_digits_is_one_line(cluster, cli, outputs_file):
    cluster.set_state({"answer": {"helm version": f"v{HUGE}.0.0"}})
    one_line(*cli("cancel", "--all", "--outputs", outputs_file("aws"))[::2], 2)


def test_an_outputs_file_with_an_absurd_number_is_one_line(tmp_path, cluster, cli):
    path = tmp_path / "outputs.json"
    path.write_text(f'{{"kubeconfig": {HUGE}}}')
    one_line(*cli("list", "--outputs", str(path))[::2], 2)


@pytest.mark.parametrize("where", ["gpus", "parallelism"])
def test_infinite_counts_in_an_answer_are_one_line(where, cluster, cli, outputs_file):
    job = {"metadata": {"name": "exp", "labels": {"app.kubernetes.io/instance": "exp"}},
           "spec": {"parallelism": 1e400 if where == "parallelism" else 2,
                    "template": {"spec": {"containers": [{"resources": {"limits": {
                        "nvidia.com/gpu": 1e400 if where == "gpus" else 1}}}]}}},
           "status": {"active": 2, "ready": 2}}
    cluster.set_state({"releases": [RELEASE], "jobs": [job]})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert "Traceback" not in err and code in (0, 1), err


def test_an_infinite_ttl_in_the_outputs_is_no_traceback(cluster, cli, outputs_file):
    def edit(exports):
        exports["jobSubmission"]["values"].setdefault("job", {})["ttlSecondsAfterFinished"] = float("inf")
    cluster.set_state({"releases": [RELEASE]})
    code, _, err = cli("list", "--outputs", outputs_file("aws", edit))
    assert code == 0 and "Traceback" not in err, err


def test_a_grace_period_out_of_range_stops_cancel_all_before_any_uninstall(cluster, cli, outputs_file):
    def edit(exports):
        exports["jobSubmission"]["values"].setdefault("job", {})["terminationGracePeriodSeconds"] = 10 ** 20
    cluster.set_state({"releases": [RELEASE]})
    one_line(*cli("cancel", "--all", "--outputs", outputs_file("aws", edit))[::2], 2)
    assert "helm uninstall" not in cluster.verbs()


def test_a_chart_that_only_starts_with_training_job_is_not_ours(cluster, cli, outputs_file):
    other = {**RELEASE, "name": "evil", "chart": "training-job-evil-9.9.9"}
    cluster.set_state({"releases": [RELEASE, other]})
    cli("cancel", "--all", "--outputs", outputs_file("aws"))
    uninstalled = [c["argv"][1] for c in cluster.calls if c["argv"][:1] == ["uninstall"]]
    assert uninstalled == ["exp"]


def test_helm_never_sees_the_users_helm_cluster_overrides():
    env = tool_environment({"PATH": "/bin", "HOME": "/h", "HELM_KUBEAPISERVER": "https://other:6443",
                            "HELM_KUBETOKEN": "t", "HELM_KUBECONTEXT": "c", "HELM_KUBEASUSER": "u",
                            "HELM_KUBECAFILE": "/ca", "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true",
                            "HELM_DRIVER": "configmap", "HELM_NAMESPACE": "other", "HELM_CACHE_HOME": "/c"})
    assert env == {"PATH": "/bin", "HOME": "/h", "HELM_CACHE_HOME": "/c", "HELM_DRIVER": "secret"}


def test_every_helm_call_runs_with_that_environment(monkeypatch, cluster, cli, outputs_file):
    monkeypatch.setenv("HELM_KUBEAPISERVER", "https://other-cluster:6443")
    seen: list[dict] = []
    real_run = subprocess.run

    def run(argv, *args, **kwargs):
        if os.path.basename(argv[0]) == "helm":
            seen.append(kwargs.get("env") or dict(os.environ))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(cluster_module.subprocess, "run", run)
    cluster.set_state({"releases": [RELEASE]})
    cli("cancel", "exp", "--outputs", outputs_file("aws"))
    assert seen and all("HELM_KUBEAPISERVER" not in env for env in seen)


def test_a_reader_that_leaves_is_no_traceback(tmp_path, cluster, outputs_file):
    # `trainstack list | true`: the pipe closes before the table is written.
    cluster.set_state({"releases": [RELEASE]})
    code = textwrap.dedent(f"""
        import os, sys
        r, w = os.pipe(); os.close(r); os.dup2(w, 1)
        from trainstack.jobs.cli import main
        sys.exit(main(["list", "--outputs", {outputs_file("aws")!r}]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 1 and "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, \
        done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_leaves_no_cluster_credentials_behind(sig, tmp_path, cluster, outputs_file):
    # helm install takes its time; the signal comes while the kubeconfig file exists.
    cluster.set_state({"hang": ["helm install"]})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # a terminal's user, whatever this test runs under (`nohup make test` ignores SIGHUP, and a child inherits
    # that: the CLI then keeps ignoring it by design, test_nohup_keeps_sighup_ignored)
    process = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
         "from trainstack.jobs.cli import main; sys.exit(main(sys.argv[1:]))",
         "submit", "exp", "--outputs", outputs_file("aws")],
        env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.getcwd()}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = 60
    import time
    while not any(tmp.rglob("kubeconfig")) and deadline > 0 and process.poll() is None:
        time.sleep(0.1)
        deadline -= 0.1
    assert any(tmp.rglob("kubeconfig")), "the CLI never wrote the kubeconfig"
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + sig, err
    assert not any(tmp.rglob("kubeconfig")), "the stack's credentials were left in TMPDIR"


# --- the re-check of this pass: tools that cannot run, nowhere to write, odd digits, nohup ------------------

def _unrunnable(path, how: str) -> None:
    path.write_text("#!/nonexistent/interpreter\n" if how == "interpreter" else "\x7fELF garbage")
    path.chmod(0o755)


@pytest.mark.parametrize("how", ["interpreter", "binary"])
@pytest.mark.parametrize("tool", ["helm", "kubectl"])
def test_a_tool_on_path_that_cannot_run_is_one_line(tool, how, cluster, cli, outputs_file):
    _unrunnable(cluster.bin / tool, how)
    cluster.set_state({"releases": [RELEASE]})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 2 and f"{tool} at " in err and "cannot run" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_pulumi_that_cannot_run_is_one_line(tmp_path, monkeypatch, cli):
    bin_dir = tmp_path / "pulumi-bin"
    bin_dir.mkdir()
    _unrunnable(bin_dir / "pulumi", "interpreter")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    one_line(*cli("list", "--stack", "dev")[::2], 2)


def test_a_gcloud_that_cannot_run_or_is_logged_out_leaves_a_warning(cluster, cli, outputs_file, stack_exports):
    image = stack_exports("gcp")["jobSubmission"]["values"]["image"]["repository"] + ":v2"
    for number, body in enumerate(("#!/nonexistent/interpreter\n",
                 "#!/bin/sh\necho 'ERROR: (gcloud) Your default credentials were not found.' >&2\nexit 1\n",
                 "#!/bin/sh\necho 'gcloud: line 1: python3: command not found' >&2\nexit 127\n")):
        (cluster.bin / "gcloud").write_text(body)
        (cluster.bin / "gcloud").chmod(0o755)
        code, _, err = cli("submit", f"exp{number}", "--outputs", outputs_file("gcp"), "--image", image)
        assert code == 0 and "warning" in err and "not checked" in err, (body, err)
        assert "is not in the stack's registry" not in err, (body, err)


def test_no_writable_temp_dir_is_one_line(monkeypatch, cluster, cli, outputs_file):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", "/proc")
    cluster.set_state({"releases": [RELEASE]})
    code, _, err = cli("list", "--outputs", outputs_file("aws"))
    assert code == 2 and "cannot write the stack's kubeconfig under /proc" in err and "TMPDIR" in err, err


@pytest.mark.parametrize("value", ["²", "٣"])
def test_digits_int_reads_but_no_stack_writes_are_refused(value, cluster, cli, outputs_file):
    def edit(exports):
        exports["jobSubmission"]["gpusPerNode"] = value
    one_line(*cli("list", "--outputs", outputs_file("aws", edit))[::2], 2)


@pytest.mark.parametrize("price", [float("nan"), float("inf")])
def test_a_price_that_is_no_number_is_refused(price, cluster, cli, outputs_file):
    def edit(exports):
        exports["estimatedHourlyUsd"]["gpuNode"]["usdPerNode"] = price
    one_line(*cli("list", "--outputs", outputs_file("aws", edit))[::2], 2)


def test_a_full_disk_under_stdout_is_one_line(cluster, outputs_file):
    cluster.set_state({"releases": [RELEASE]})
    code = ("import sys; from trainstack.jobs.cli import main; "
            f"sys.exit(main(['list', '--outputs', {outputs_file('aws')!r}]))")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 1 and "cannot write the output" in done.stderr and "Traceback" not in done.stderr, \
        done.stderr


def test_nohup_keeps_sighup_ignored(cluster, outputs_file):
    # `nohup trainstack submit ... &`: the terminal closing must not stop a sweep half submitted.
    code = textwrap.dedent("""
        import os, signal, sys
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        from trainstack.jobs import cli
        cli._exit_cleanly_on(signal.SIGTERM, signal.SIGHUP)
        sys.exit(signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN)
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=60)
    assert done.returncode == 0


# --- the final re-check: stdout closed or no file, and a script that is a torchrun option ----------------

@pytest.mark.parametrize("redirect", ["closed", "read-only file"])
def test_an_unwritable_stdout_is_no_traceback_after_the_work_is_done(redirect, tmp_path, cluster, outputs_file):
    cluster.set_state({"releases": [RELEASE]})
    code = ("import sys; from trainstack.jobs.cli import main; "
            f"sys.exit(main(['list', '--outputs', {outputs_file('aws')!r}]))")
    target = tmp_path / "read-only"
    target.write_text("")
    with open(target) as read_only:
        stdout = read_only if redirect == "read-only file" else None
        done = subprocess.run([sys.executable, "-c", code], stdout=stdout, stderr=subprocess.PIPE, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()},
                              preexec_fn=(lambda: os.close(1)) if stdout is None else None)  # `>&-`
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr


@pytest.mark.parametrize("script", ["--rdzv-endpoint=victim-0.victim:29400", "-m", " --nnodes=9"])
def test_a_script_that_torchrun_would_read_as_its_own_option_is_refused(script, cluster, cli, outputs_file):
    one_line(*cli("submit", "exp", "--outputs", outputs_file("aws"), f"--script={script}", "--", "train.py")[::2], 2)
    assert "helm install" not in cluster.verbs()


def test_the_chart_refuses_a_script_that_is_a_torchrun_option():
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "workloads" / "charts" / "training-job" /
                         "values.schema.json").read_text())
    script = schema["properties"]["command"]["properties"]["script"]
    jsonschema.validate("", script)
    jsonschema.validate("train.py", script)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("--rdzv-endpoint=victim-0.victim:29400", script)


# --- the last pass: sweep values the trainer reads alike, and nested launchers ----------------------------

@pytest.mark.parametrize("values", ["１e-3,1e-3", "1e-3,0.001", "3e-4,0.0003,6e-4", "lr\u200b,x"])
def test_sweep_values_that_would_run_the_same_job_twice_are_refused(values, cluster, cli, outputs_file):
    one_line(*cli("submit", "exp", "--outputs", outputs_file("aws"), "--sweep", f"lr={values}")[::2], 2)
    assert "helm install" not in cluster.verbs()


@pytest.mark.parametrize("module", ["training.launch", "torch.distributed.run"])
def test_a_launcher_as_the_module_is_refused(module, cluster, cli, outputs_file):
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--module", module, "--",
                       "--rdzv-endpoint=other-0.other:29400")
    one_line(code, err, 2)
    assert "launcher" in err and "helm install" not in cluster.verbs()
