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
