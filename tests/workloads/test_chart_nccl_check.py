"""The NCCL check (ncclCheck.enabled): what the chart renders, the bus-bandwidth verdict of
files/nccl_busbw.awk on nccl-tests logs, and files/nccl-check.sh run with the rendered container's
own command and environment (mpirun, sshd and the image's helper scripts stubbed)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from .chart import (
    CHART_DIR,
    NAMESPACE,
    NCCL_CHECK_SETS,
    RELEASE,
    chart_values,
    deep_merge,
    load_values,
    one,
    render,
)

SAMPLES = Path(__file__).parent / "nccl_samples"
AWK = CHART_DIR / "files" / "nccl_busbw.awk"
DEFAULTS = chart_values()


def check_container(objects):
    [container] = one(objects, "Job")["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "nccl-check"
    return container


def env_of(container):
    return {e["name"]: e["value"] for e in container["env"]}


def judge(log: str, minimum) -> subprocess.CompletedProcess:
    # mawk: the awk of the Ubuntu-based nccl-tests images (POSIX awk, no gawk extensions).
    return subprocess.run(["mawk", "-v", f"min={minimum}", "-f", str(AWK), str(SAMPLES / log)],
                          capture_output=True, text=True, timeout=30)


# --- the rendered Job -------------------------------------------------------------------------

@pytest.mark.parametrize("value_set", NCCL_CHECK_SETS)
def test_the_check_replaces_the_trainer_in_the_same_wired_job(rendered, value_set):
    values = load_values(value_set)
    mode = values["gpuNetworking"]["mode"]
    job = one(rendered[value_set], "Job")
    pod = job["spec"]["template"]["spec"]
    container = check_container(rendered[value_set])

    plugin = DEFAULTS["gpuNetworking"][mode]["plugin"]
    assert container["image"] == f"{plugin['repository']}:{plugin['tag']}"  # nccl-tests + mpirun inside
    assert [c["name"] for c in pod["initContainers"]] == [f"{mode}-daemon"]
    assert pod["initContainers"][0]["restartPolicy"] == "Always"
    assert "networking.gke.io/interfaces" in job["spec"]["template"]["metadata"]["annotations"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-queue"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2

    env = env_of(container)
    for name, value in DEFAULTS["gpuNetworking"][mode]["ncclEnv"].items():
        assert env[name] == value, name
    assert env["NCCL_CHECK_MIN_BUSBW"] == str(values["ncclCheck"]["minBusBandwidthGBps"])
    assert env["NCCL_CHECK_BENCHMARK"] == "all_gather_perf"
    assert env["NCCL_CHECK_HOSTS"].split() == [
        f"{RELEASE}-{i}.{RELEASE}.{NAMESPACE}.svc.cluster.local" for i in range(2)]
    assert env["NCCL_CHECK_AWK"] == AWK.read_text()


def test_thresholds_follow_the_machine_profile_and_the_command_line(rendered):
    assert env_of(check_container(rendered["a3-nccl-check"]))["NCCL_CHECK_MIN_BUSBW"] == "25"
    assert env_of(check_container(rendered["a3-mega-nccl-check"]))["NCCL_CHECK_MIN_BUSBW"] == "20"
    objects = render(deep_merge(load_values("a3-nccl-check"), {"ncclCheck": {"minBusBandwidthGBps": 60.5}}))
    assert env_of(check_container(objects))["NCCL_CHECK_MIN_BUSBW"] == "60.5"


def test_a_failed_check_fails_the_job_at_once_and_pod_0_decides(rendered):
    spec = one(rendered["a3-nccl-check"], "Job")["spec"]
    rules = spec["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": "nccl-check", "operator": "NotIn",
                                                  "values": [0]}} in rules
    assert all(r.get("onExitCodes", {}).get("containerName") != "trainer" for r in rules)
    assert spec["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}  # then workers are stopped
    assert spec["activeDeadlineSeconds"] == 1800


def test_the_check_does_not_need_a_training_image():
    assert not load_values("a3-nccl-check").get("image")
    assert render(load_values("a3-nccl-check"))


# --- the verdict on nccl-tests output ---------------------------------------------------------

def test_a_tcpx_run_passes_with_its_average_and_peak():
    result = judge("tcpx-2-nodes.log", 25)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "NCCL check PASSED: average bus bandwidth 31.0220 GB/s (peak 70.9 GB/s at 536870912 B, 10 sizes)"
        " >= 25 GB/s"]


def test_the_socket_fallback_fails_loudly_in_one_line():
    result = judge("socket-fallback-2-nodes.log", 25)
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line.startswith("NCCL check FAILED: average bus bandwidth 2.2305 GB/s")
    assert "below the required 25 GB/s" in line


def test_a_higher_bar_fails_a_good_run():
    result = judge("tcpx-2-nodes.log", 40)
    assert result.returncode == 1
    assert "31.0220 GB/s" in result.stdout and "below the required 40 GB/s" in result.stdout


def test_a_run_that_died_mid_table_fails():
    result = judge("crashed-2-nodes.log", 25)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "NCCL check FAILED: no nccl-tests result in the output (4 result rows, no average line):"
        " the benchmark did not run to the end, see the log above"]


def test_old_nccl_tests_without_redop_and_root_columns(tmp_path):
    # nccl-tests before the redop/root columns: busbw is still NF-5 and NF-1.
    log = tmp_path / "old.log"
    log.write_text("#       size         count      type     time   algbw   busbw  error     time   algbw   busbw  error\n"
                   "   536870912       8388608     float   7099.0   75.63   70.90  0e+00   7110.6   75.50   70.78  0e+00\n"
                   "# Avg bus bandwidth    : 70.8400\n")
    result = subprocess.run(["mawk", "-v", "min=25", "-f", str(AWK), str(log)], capture_output=True, text=True)
    assert result.returncode == 0 and "peak 70.9 GB/s at 536870912 B, 1 sizes" in result.stdout


def test_wrong_values_fail_even_when_fast(tmp_path):
    log = tmp_path / "wrong.log"
    log.write_text((SAMPLES / "tcpx-2-nodes.log").read_text().replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"))
    result = subprocess.run(["mawk", "-v", "min=25", "-f", str(AWK), str(log)], capture_output=True, text=True)
    assert result.returncode == 1 and "wrong values" in result.stdout


@pytest.mark.parametrize("minimum", ["", "fast", "-3", "25GB"])
def test_a_threshold_that_is_not_a_number_fails(minimum):
    result = judge("tcpx-2-nodes.log", minimum)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f'NCCL check FAILED: threshold min="{minimum}" is not a number of GB/s']


# --- the driver, as the pod runs it -----------------------------------------------------------

def executable(path: Path, text: str) -> Path:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def pod(tmp_path):
    """Stubs for what the nccl-tests image provides: sshd's service, the ssh/hostfile helpers, mpirun."""
    bin_dir, scripts = tmp_path / "bin", tmp_path / "scripts"
    bin_dir.mkdir()
    scripts.mkdir()
    calls = tmp_path / "calls"
    executable(bin_dir / "service", f'echo "service $*" >> {calls}\n')
    executable(bin_dir / "sleep", f'echo "sleep $*" >> {calls}\n')
    executable(scripts / "init_ssh.sh", f'echo "init_ssh $*" >> {calls}\n')
    executable(scripts / "gen_hostfiles.sh", f'echo "gen_hostfiles $* in $PWD" >> {calls}\n')
    # mpirun prints the sample log named by MPIRUN_SAMPLE and exits MPIRUN_STATUS, recording its argv.
    executable(bin_dir / "mpirun", f'printf "%s\\n" "$@" > {tmp_path}/mpirun.argv\n'
                                   f'cat "{SAMPLES}/$MPIRUN_SAMPLE"\nexit "${{MPIRUN_STATUS:-0}}"\n')
    return tmp_path


def run_rendered(pod_dir: Path, index: int, sample="tcpx-2-nodes.log", status=0, value_set="a3-nccl-check",
                 drop=()):
    container = check_container(render(load_values(value_set)))
    env = {k: v for k, v in env_of(container).items() if k not in drop}
    env.update(PATH=f"{pod_dir / 'bin'}:{os.environ['PATH']}", JOB_COMPLETION_INDEX=str(index),
               NCCL_CHECK_SCRIPTS_DIR=str(pod_dir / "scripts"), NCCL_CHECK_LOG=str(pod_dir / "nccl.log"),
               MPIRUN_SAMPLE=sample, MPIRUN_STATUS=str(status))
    return subprocess.run(container["command"], env=env, capture_output=True, text=True, timeout=60)


def test_pod_0_runs_the_benchmark_over_every_pod_and_passes(pod):
    result = run_rendered(pod, 0)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("NCCL check PASSED: average bus bandwidth 31.0220 GB/s")

    hosts = [f"{RELEASE}-{i}.{RELEASE}.{NAMESPACE}.svc.cluster.local" for i in range(2)]
    calls = (pod / "calls").read_text().splitlines()
    assert calls == ["service ssh restart", f"init_ssh {' '.join(hosts)}",
                     f"gen_hostfiles {' '.join(hosts)} in {pod / 'scripts'}"]
    argv = (pod / "mpirun.argv").read_text().splitlines()
    assert argv[argv.index("-np") + 1] == "16"
    assert argv[argv.index("--hostfile") + 1] == f"{pod / 'scripts'}/hostfiles2/hostfile8"
    forwarded = {argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"}
    assert set(DEFAULTS["gpuNetworking"]["tcpx"]["ncclEnv"]) - {"GLOO_SOCKET_IFNAME"} <= forwarded
    assert not [name for name in forwarded if name.startswith("NCCL_CHECK_")]
    tail = argv[argv.index("taskset"):]
    assert tail[:3] == ["taskset", "-c", DEFAULTS["gpuNetworking"]["tcpx"]["ncclTestCpus"]]
    assert tail[3] == "/third_party/nccl-tests-mpi/build/all_gather_perf"
    assert tail[4:] == ["-b", "1M", "-e", "512M", "-f", "2", "-g", "1", "-w", "5", "-n", "100", "-c", "0"]


def test_pod_0_fails_the_pod_below_the_threshold(pod):
    result = run_rendered(pod, 0, sample="socket-fallback-2-nodes.log")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("NCCL check FAILED: average bus bandwidth 2.2305 GB/s")


def test_pod_0_fails_when_mpirun_fails(pod):
    result = run_rendered(pod, 0, sample="crashed-2-nodes.log", status=1)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == (
        "NCCL check FAILED: mpirun exited 1 before the benchmark finished (log above)")


def test_the_other_pods_only_serve_ssh(pod):
    result = run_rendered(pod, 1)
    assert result.returncode == 0, result.stderr
    assert (pod / "calls").read_text().splitlines() == ["service ssh restart", "sleep infinity"]
    assert not (pod / "mpirun.argv").exists()


def test_a_missing_setting_is_named(pod):
    result = run_rendered(pod, 0, drop=("NCCL_CHECK_HOSTS",))
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "NCCL check FAILED: environment variable NCCL_CHECK_HOSTS is not set (the chart sets it)"]


def test_tcpxo_check_forwards_its_own_settings(pod):
    result = run_rendered(pod, 0, value_set="a3-mega-nccl-check")
    assert result.returncode == 0, result.stdout + result.stderr
    argv = (pod / "mpirun.argv").read_text().splitlines()
    forwarded = {argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"}
    assert {"NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "NCCL_FASTRAK_IFNAME", "NCCL_TUNER_CONFIG_PATH"} <= forwarded
    assert argv[argv.index("taskset") + 2] == "32-63"
