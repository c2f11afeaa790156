"""A pod that is not the c10d store's host, started with the chart's own command: it waits for pod 0
for join_timeout (torch alone gave up after its read_timeout and failed the pod), and when pod 0
goes away after it had joined it exits with a code the Job's podFailurePolicy ignores."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from training.launch import HOST_LOST

from .chart import REPO_ROOT, deep_merge, load_values, one, render, trainer

pytestmark = pytest.mark.timeout(300)

JOIN_TIMEOUT = 20
READ_TIMEOUT = 3  # torch's default is 60; shorter here so that giving up early shows within seconds
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TRAINSTACK_JOB_UID": "0b5e7c1a"}


def non_host_command(port: int) -> list[str]:
    """The trainer's command as the chart renders it for a two-node job, node 0 at 127.0.0.1:port."""
    values = deep_merge(load_values("gpu-4x8-queue-pvc"), {"job": {"joinTimeoutSeconds": JOIN_TIMEOUT}})
    container = trainer(render(values))
    args = []
    for arg in container["args"]:
        if arg.startswith("--rdzv-endpoint="):
            arg = f"--rdzv-endpoint=127.0.0.1:{port}"
        elif arg.startswith("--rdzv-conf="):
            assert f"join_timeout={JOIN_TIMEOUT}" in arg
            arg = f"{arg},read_timeout={READ_TIMEOUT},is_host=0"
        elif arg.startswith("--nproc-per-node="):
            arg = "--nproc-per-node=1"  # no worker starts before the rendezvous; keep it light
        args.append(arg)
    return [sys.executable, *container["command"][1:], *args]


def test_a_pod_up_before_pod_0_waits_join_timeout_for_the_store(tmp_path):
    # Pod 0 is not there yet: its address takes no connections (a bound socket that never listens).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    log = tmp_path / "log"
    started = time.monotonic()
    with silent, log.open("w") as out:
        result = subprocess.run(non_host_command(silent.getsockname()[1]), cwd=REPO_ROOT, env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, timeout=240)
    elapsed = time.monotonic() - started
    text = log.read_text()
    assert f"waiting up to join_timeout={JOIN_TIMEOUT}s" in text, text[-3000:]
    # torch alone raised RendezvousConnectionError after about 2 x read_timeout
    assert elapsed >= JOIN_TIMEOUT, (elapsed, text[-3000:])
    # Never reached within join_timeout: a real failure, counted against backoffLimit.
    assert result.returncode == 1


def test_a_pod_whose_store_host_went_away_exits_for_a_replacement(tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, multi_tenant=True, timeout=timedelta(seconds=30),
                          wait_for_workers=False)  # pod 0's store
    log = tmp_path / "log"
    with log.open("w") as out:
        proc = subprocess.Popen(non_host_command(port), cwd=REPO_ROOT, env=ENV, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            keys = store.num_keys()
            # The agent has joined once it has written its rendezvous state to the store.
            while store.num_keys() == keys and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.5)
            time.sleep(2)
            assert proc.poll() is None, log.read_text()[-3000:]
            del store  # pod 0 lost
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == HOST_LOST, log.read_text()[-3000:]
    ignored = one(render(load_values("gpu-4x8-queue-pvc")), "Job")["spec"]["podFailurePolicy"]["rules"]
    assert any(rule["action"] == "Ignore" and HOST_LOST in rule.get("onExitCodes", {}).get("values", [])
               for rule in ignored)


STORE_HOST = """
import sys, time
from datetime import timedelta
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, multi_tenant=True,
                      timeout=timedelta(seconds=30), wait_for_workers=False)
print("serving", flush=True)
time.sleep(600)
"""


def free_local_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_a_pod_whose_store_host_stops_answering_exits_for_a_replacement(tmp_path):
    # Pod 0 frozen or cut off: the connection stays open and nothing answers. TCPStore's own
    # timeout does not fire then, and torch's launcher waited for ever.
    port = free_local_port()
    host = subprocess.Popen([sys.executable, "-c", STORE_HOST, str(port)], stdout=subprocess.PIPE, text=True, env=ENV)
    log = tmp_path / "log"
    try:
        assert host.stdout.readline().strip() == "serving"
        with log.open("w") as out:
            proc = subprocess.Popen(non_host_command(port), cwd=REPO_ROOT, env=ENV, stdout=out,
                                    stderr=subprocess.STDOUT)
            try:
                time.sleep(12)  # joined, and polling the store for the second node
                assert proc.poll() is None, log.read_text()[-3000:]
                host.send_signal(19)  # SIGSTOP
                stopped = time.monotonic()
                code = proc.wait(timeout=90)
                waited = time.monotonic() - stopped
            finally:
                if proc.poll() is None:
                    proc.kill()
    finally:
        host.kill()
        host.wait()
    assert code == HOST_LOST, log.read_text()[-3000:]
    assert waited <= 2 * READ_TIMEOUT + 10, waited
    assert "lost the rendezvous store host" in log.read_text()


def test_pod_0_hosts_by_its_completion_index_and_never_waits(tmp_path):
    # A wrong job.clusterDomain: the endpoint's name is not this pod's. torch guessed "not the host"
    # from the name, and pod 0 waited join_timeout as a client of itself before failing.
    values = deep_merge(load_values("gpu-4x8-queue-pvc"), {"job": {"joinTimeoutSeconds": JOIN_TIMEOUT}})
    args = [f"--rdzv-endpoint=gpt2-run-0.gpt2-run.default.svc.wrong.invalid:{free_local_port()}"
            if arg.startswith("--rdzv-endpoint=") else arg for arg in trainer(render(values))["args"]]
    args = [f"{arg},read_timeout={READ_TIMEOUT}" if arg.startswith("--rdzv-conf=") else arg for arg in args]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "training.launch", *args], cwd=REPO_ROOT,
                            env={**ENV, "JOB_COMPLETION_INDEX": "0"}, capture_output=True, text=True, timeout=240)
    assert result.returncode != 0
    assert "waiting up to join_timeout" not in result.stderr, result.stderr[-3000:]
    assert time.monotonic() - started < JOIN_TIMEOUT, result.stderr[-3000:]


def test_is_host_comes_from_the_completion_index_unless_given():
    from training.launch import with_host_from_index

    assert with_host_from_index("join_timeout=5", {"JOB_COMPLETION_INDEX": "0"}) == "join_timeout=5,is_host=1"
    assert with_host_from_index("", {"JOB_COMPLETION_INDEX": "3"}) == "is_host=0"
    assert with_host_from_index("is_host=0", {"JOB_COMPLETION_INDEX": "0"}) == "is_host=0"
    assert with_host_from_index("join_timeout=5", {}) == "join_timeout=5"


def test_only_a_lost_connection_is_host_lost():
    from torch.distributed import DistNetworkError
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    from training.launch import lost_connection

    def wrapped(cause):
        try:
            raise RendezvousConnectionError("The connection to the C10d store has failed.") from cause
        except RendezvousConnectionError as error:
            return error

    assert lost_connection(wrapped(DistNetworkError("Connection reset by peer")))
    assert lost_connection(wrapped(ConnectionRefusedError()))
    assert not lost_connection(wrapped(TimeoutError("wait timeout after 3000ms")))
    assert not lost_connection(wrapped(DistNetworkError("Socket Timeout")))
