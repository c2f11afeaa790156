"""The NCCL check in the training image (ncclCheck.runner trainer, profiles/nccl-allreduce.yaml):
what the chart renders, and files/nccl_allreduce.py run with the rendered container's own launcher,
flags and environment on this machine's CPUs (gloo instead of NCCL; one node, two ranks)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from testbed.processes import free_port

from .chart import ALLREDUCE_CHECK_SETS, CHART_DIR, REPO_ROOT, chart_values, load_values, one, render

SCRIPT = CHART_DIR / "files" / "nccl_allreduce.py"
spec = importlib.util.spec_from_file_location("nccl_allreduce", SCRIPT)
nccl_allreduce = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nccl_allreduce)


def check_container(objects):
    [container] = one(objects, "Job")["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "nccl-check"
    return container


@pytest.mark.parametrize("value_set", ALLREDUCE_CHECK_SETS)
def test_the_check_runs_the_training_image_with_the_trainers_wiring(value_set):
    values = load_values(value_set)
    objects = render(values)
    container = check_container(objects)
    mode = values["gpuNetworking"]["mode"]
    assert container["image"].startswith(values["image"]["repository"] + "@sha256:")
    assert container["command"] == ["python", "-m", "training.launch"]
    assert container["args"][-1] == "/opt/nccl-check/nccl_allreduce.py"
    assert any(arg.startswith("--rdzv-endpoint=gpt2-run-0.") for arg in container["args"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    for name, value in chart_values()["gpuNetworking"][mode]["ncclEnv"].items():
        assert env[name] == value, name  # the job's own NCCL environment
    assert env["NCCL_CHECK_EXPECTED_NCCL"] == chart_values()["gpuNetworking"][mode]["nccl"]
    assert env["NCCL_CHECK_EXPECTED_NET"] == chart_values()["gpuNetworking"][mode]["ncclNet"]
    assert container["securityContext"]["runAsNonRoot"] is True  # the trainer's profile, no sshd
    configmap = one(objects, "ConfigMap")
    assert configmap["data"]["nccl_allreduce.py"] == SCRIPT.read_text()
    rules = one(objects, "Job")["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": "nccl-check", "operator": "NotIn",
                                                  "values": [0]}} in rules


def run_rendered(tmp_path, minimum: str) -> subprocess.CompletedProcess:
    """The rendered container's command on this machine: one node of two ranks, gloo on loopback."""
    container = check_container(render(load_values("a3-allreduce-check")))
    args = []
    for arg in container["args"]:
        if arg.startswith("--nnodes="):
            arg = "--nnodes=1:1"
        elif arg.startswith("--nproc-per-node="):
            arg = "--nproc-per-node=2"
        elif arg.startswith("--rdzv-endpoint="):
            arg = f"--rdzv-endpoint=127.0.0.1:{free_port()}"
        elif arg.startswith("--rdzv-id="):
            arg = "--rdzv-id=check"
        elif arg == "/opt/nccl-check/nccl_allreduce.py":
            arg = str(SCRIPT)
        args.append(arg)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env.update(PATH=os.environ["PATH"], HOME=str(tmp_path), OMP_NUM_THREADS="1", NCCL_CHECK_BACKEND="gloo",
               GLOO_SOCKET_IFNAME="lo", NCCL_CHECK_BYTES="1M", NCCL_CHECK_ITERATIONS="3",
               NCCL_CHECK_MIN_BUSBW=minimum, LD_LIBRARY_PATH="")
    return subprocess.run([sys.executable, *container["command"][1:], *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.timeout(300)
def test_the_rendered_check_passes_an_all_reduce(tmp_path):
    result = run_rendered(tmp_path, "0.000001")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "NCCL check PASSED: all-reduce bus bandwidth" in result.stdout


@pytest.mark.timeout(300)
def test_the_rendered_check_fails_the_pod_below_the_bar(tmp_path):
    result = run_rendered(tmp_path, "1000000")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
    assert "NCCL check FAILED: all-reduce bus bandwidth" in result.stdout
    # What the pod got for locked memory, which EFA's buffer registration needs, is in the failed pod's log.
    assert "[nccl-check] rank 0: locked-memory limit (ulimit -l) " in result.stdout


def test_the_locked_memory_limit_reads_as_ulimit_does(monkeypatch):
    monkeypatch.setattr(nccl_allreduce.resource, "getrlimit", lambda _: (8 * 2**20, 8 * 2**20))
    assert nccl_allreduce.locked_memory_limit() == "8192 KiB"
    infinity = nccl_allreduce.resource.RLIM_INFINITY
    monkeypatch.setattr(nccl_allreduce.resource, "getrlimit", lambda _: (infinity, infinity))
    assert nccl_allreduce.locked_memory_limit() == "unlimited"


def test_a_nccl_other_than_the_plugins_fails_in_one_line():
    assert nccl_allreduce.nccl_version_problem((2, 19, 4), "2.19") is None
    assert nccl_allreduce.nccl_version_problem((2, 28, 7), "2.28.7") is None
    problem = nccl_allreduce.nccl_version_problem((2, 27, 5), "2.19")
    assert problem.startswith("NCCL check FAILED: the job loads NCCL 2.27.5") and "\n" not in problem


FAKE_NCCL = r"""
int ncclGetVersion(int *version) { *version = 21907; return 0; }
"""


def test_the_verdict_reads_the_mapped_librarys_runtime_version_not_torchs_build(tmp_path, monkeypatch):
    # torch.cuda.nccl.version() is the NCCL torch was compiled against, whatever runs.
    import ctypes

    import torch

    source = tmp_path / "nccl.c"
    source.write_text(FAKE_NCCL)
    library = tmp_path / "lib" / "libnccl.so.2"
    library.parent.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    ctypes.CDLL(str(library))  # now mapped into this process, as torch maps its NCCL

    def compiled_version():
        raise AssertionError("the check must not judge by torch.cuda.nccl.version()")

    monkeypatch.setattr(torch.cuda.nccl, "version", compiled_version)
    monkeypatch.setenv("NCCL_CHECK_EXPECTED_NCCL", "2.27")
    monkeypatch.delenv("NCCL_CHECK_EXPECTED_NET", raising=False)
    problem, version = nccl_allreduce.nccl_problem(str(tmp_path / "none.log"))
    assert version == f"NCCL 2.19.7 from {library}"
    assert problem.startswith("NCCL check FAILED: the job loads NCCL 2.19.7") and str(library) in problem
    monkeypatch.setenv("NCCL_CHECK_EXPECTED_NCCL", "2.19")
    assert nccl_allreduce.nccl_problem(str(tmp_path / "none.log"))[0] is None


def test_a_fallback_to_sockets_fails_the_check():
    plugin = "NCCL INFO Using network GPUDirectTCPX_v7\n"
    assert nccl_allreduce.network_problem(plugin * 2, "GPUDirectTCPX") is None
    assert nccl_allreduce.network_problem("NCCL INFO Using network FasTrak\n", "FasTrak") is None
    problem = nccl_allreduce.network_problem(plugin + "NCCL INFO Using network Socket\n", "GPUDirectTCPX")
    assert problem.startswith("NCCL check FAILED: NCCL used network GPUDirectTCPX_v7, Socket") and "\n" not in problem
    assert "unknown" in nccl_allreduce.network_problem("", "FasTrak")


def test_bus_bandwidth_and_sizes_are_nccl_tests_own():
    assert nccl_allreduce.parse_bytes("512M") == 512 * 2**20 and nccl_allreduce.parse_bytes("1024") == 1024
    # all-reduce busbw = algbw x 2(n-1)/n: 1 GB in 0.1 s over 16 ranks
    assert nccl_allreduce.bus_bandwidth_gbps(10**9, 0.1, 16) == pytest.approx(18.75)
