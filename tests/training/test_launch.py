"""`python -m training.launch`: torchrun whose exit code tells a Kubernetes Job what happened."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from testbed.processes import descendants, kill_tree, wait_for
from tests.support.training_runs import checkpoint_steps, spawn, train_args
from training.launch import honour_shutdown_timeout

pytestmark = pytest.mark.timeout(240)


def launch(*args: str) -> list[str]:
    return [sys.executable, "-m", "training.launch", "--standalone", "--nproc-per-node=1", "--max-restarts=0", *args]


def running(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()  # a zombie has ended
    except OSError:
        return False


@pytest.mark.parametrize("worker_start", ["fork", "exec"])
def test_bad_input_exits_2_so_the_job_fails_fast(tmp_path, monkeypatch, worker_start):
    monkeypatch.setenv("TRAINSTACK_WORKER_START", worker_start)  # forked from the warm server, or torchrun's own way
    proc = spawn(launch("-m", "training", "train", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "r")),
                 tmp_path / "log")
    assert proc.wait(timeout=120) == 2
    log = (tmp_path / "log").read_text()
    assert "worker failed with exit code 2" in log
    assert log.count("error: data directory") == 1, log  # the one line, once


@pytest.mark.parametrize("value", ["abc", "", "-5", "1.5"])
def test_a_shutdown_timeout_torch_cannot_read_is_one_line_and_exit_2(tmp_path, monkeypatch, value):
    """torchrun reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT with int(): a ValueError traceback and exit 1 before."""
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", value)
    proc = spawn(launch("-m", "training", "train", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "r")),
                 tmp_path / "log")
    assert proc.wait(timeout=120) == 2
    log = (tmp_path / "log").read_text()
    assert log.splitlines() == [f"error: TORCH_ELASTIC_SHUTDOWN_TIMEOUT={value!r} in the environment: must be a "
                                "whole number of seconds >= 0 (the grace period between SIGTERM and SIGKILL for "
                                "the workers); fix or unset it"], log
    assert not (tmp_path / "r").exists()


def test_a_finished_run_exits_0(data_dir, tmp_path):
    proc = spawn(launch(*train_args(data_dir, tmp_path / "r", "--max-steps", "2", "--no-export")), tmp_path / "log")
    assert proc.wait(timeout=120) == 0, (tmp_path / "log").read_text()[-2000:]


def test_sigterm_checkpoints_and_exits_143(data_dir, tmp_path):
    log = tmp_path / "log"
    proc = spawn(launch(*train_args(data_dir, tmp_path / "r", "--max-steps", "100000", "--checkpoint-every",
                                    "100000")), log)
    try:
        wait_for(lambda: "step 3/" in log.read_text(), 120, "three finished steps")
        # the trainer runs in a process forked by the warm fork server, not in a fresh interpreter
        commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    for pid in descendants(proc.pid)}
        servers = [pid for pid, command in commands.items() if "multiprocessing.forkserver" in command
                   and f"PPid:\t{proc.pid}\n" in Path(f"/proc/{pid}/status").read_text()]
        assert len(servers) == 1, commands
        assert descendants(servers[0]), "no worker under the fork server"
        everything_below = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 143, log.read_text()[-2000:]
        assert "stop requested; checkpoint of step" in log.read_text()
        assert checkpoint_steps(tmp_path / "r")
        # the fork server and its resource tracker end on their own once the launcher is gone
        wait_for(lambda: not [pid for pid in everything_below if running(pid)], 10,
                 "every process below the launcher to end")
    finally:
        kill_tree(proc.pid)


def test_shutdown_timeout_extends_torchs_30_seconds(monkeypatch):
    from torch.distributed.elastic.multiprocessing import api

    seen = []
    monkeypatch.setattr(api.PContext, "close", lambda self, death_sig=None, timeout=30: seen.append(timeout))
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "270")
    honour_shutdown_timeout()
    api.PContext.close(object())           # torch < 2.12: the agent passes no timeout
    api.PContext.close(object(), None, 600)  # a longer timeout given by torch itself wins
    assert seen == [270, 600]


def test_rendezvous_defaults_drop_a_lost_node_after_3_s_and_yield_to_given_values():
    from training.launch import with_rdzv_defaults

    assert with_rdzv_defaults("") == "keep_alive_interval=1,keep_alive_max_attempt=3"
    assert with_rdzv_defaults("join_timeout=1800,keep_alive_interval=5") == \
        "join_timeout=1800,keep_alive_interval=5,keep_alive_max_attempt=3"
