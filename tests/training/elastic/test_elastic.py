"""Real multi-process behaviour under torchrun (gloo on CPU): elastic resume, kill -9, SIGTERM."""

from __future__ import annotations

import re
import signal
import sys
import time

import pytest

from testbed.processes import free_port, kill_tree, wait_for
from tests.support.training_runs import checkpoint_steps, losses, spawn, torchrun, train, train_args

pytestmark = pytest.mark.timeout(300)


def standalone(nproc: int) -> list[str]:
    return torchrun("--nnodes=1", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                    f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--max-restarts=0")


def run_to_end(args: list[str], log) -> str:
    proc = spawn(args, log)
    assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
    return log.read_text()


def test_two_workers_to_one_resume_matches_the_two_worker_run(data_dir, tmp_path):
    """The global batch is fixed, so 1 worker accumulating 2 micro-batches takes the same steps as 2 workers."""
    both, shrunk = tmp_path / "both", tmp_path / "shrunk"
    run_to_end(standalone(2) + train_args(data_dir, both, "--max-steps", "12", "--no-export"), tmp_path / "a.log")
    run_to_end(standalone(2) + train_args(data_dir, shrunk, "--max-steps", "6", "--checkpoint-every", "6",
                                          "--no-export"), tmp_path / "b.log")
    code, out, err = train(data_dir, shrunk, "--batch-size", "4", "--max-steps", "12", "--checkpoint-every", "6",
                           "--no-export")
    assert code == 0, err
    assert "saved by 2 workers, now 1" in out
    reference, resumed = losses(both), losses(shrunk)
    for step in range(7, 13):
        assert resumed[step] == pytest.approx(reference[step], rel=1e-4), step
    # ...and back to 2 workers
    log = run_to_end(standalone(2) + train_args(data_dir, shrunk, "--max-steps", "14", "--no-export"),
                     tmp_path / "c.log")
    assert "saved by 1 worker, now 2" in log  # not "1 workers" (issue 30)
    assert checkpoint_steps(shrunk)[-1] == 14


def test_uneven_shares_of_the_global_batch_give_the_single_process_losses(data_dir, tmp_path):
    """Global batch 5 over 2 workers (3 + 2 samples, micro-batches of 2): the same steps as 1 process."""
    uneven = ["--batch-size", "2", "--global-batch-size", "5", "--max-steps", "4", "--no-export"]
    code, _, err = train(data_dir, tmp_path / "one", *uneven)
    assert code == 0, err
    run_to_end(standalone(2) + train_args(data_dir, tmp_path / "two") + uneven, tmp_path / "two.log")
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert sorted(two) == [1, 2, 3, 4]
    for step in range(1, 5):
        assert two[step] == pytest.approx(one[step], rel=1e-4), step


def test_global_batch_smaller_than_the_workers_is_refused(data_dir, tmp_path):
    log = tmp_path / "log"
    proc = spawn(standalone(2) + train_args(data_dir, tmp_path / "run", "--global-batch-size", "1"), log)
    assert proc.wait(timeout=120) != 0
    assert "error: global batch of 1 sequences is smaller than the 2 workers; raise --global-batch-size" \
        in log.read_text()
    assert not (tmp_path / "run").exists(), "refused before anything is written"


def test_sigterm_checkpoints_the_current_step_and_exits_0(data_dir, tmp_path):
    run = tmp_path / "run"
    proc = spawn([sys.executable, *train_args(data_dir, run, "--max-steps", "100000", "--checkpoint-every", "100000")],
                 tmp_path / "log")
    log = tmp_path / "log"
    wait_for(lambda: "step 5/" in log.read_text(), 120, "five finished steps")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
    text = log.read_text()
    finished = max(int(line.split()[1].split("/")[0]) for line in text.splitlines() if line.startswith("step ")
                   and "/" in line.split()[1])
    assert f"checkpoint of step {finished} saved" in text
    assert checkpoint_steps(run) == [finished], "every finished step is in the checkpoint"


def test_sigterm_to_torchrun_checkpoints_on_every_worker_path(data_dir, tmp_path):
    """Pod eviction: SIGTERM reaches torchrun (PID 1 in the pod), which forwards it to its workers."""
    run, log = tmp_path / "run", tmp_path / "log"
    proc = spawn(standalone(2) + train_args(data_dir, run, "--max-steps", "100000", "--checkpoint-every", "100000"),
                 log)
    wait_for(lambda: "step 3/" in log.read_text(), 120, "three finished steps")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=90)
    text = log.read_text()
    assert "stop requested; checkpoint of step" in text, text[-2000:]
    finished = max(int(line.split()[1].split("/")[0]) for line in text.splitlines() if line.startswith("step ")
                   and "/" in line.split()[1])
    assert checkpoint_steps(run) == [finished]


def test_kill_9_one_node_and_start_it_again_the_job_finishes(data_dir, tmp_path):
    """Two torchrun node agents, c10d rendezvous on 127.0.0.1; node 1 dies hard and comes back."""
    run, port, steps = tmp_path / "run", free_port(), 300

    def agent(is_host: bool, log_name: str):
        launcher = torchrun("--nnodes=1:2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=kill-test", "--max-restarts=5",
                            "--monitor-interval=0.5",
                            f"--rdzv-conf=join_timeout=90,last_call_timeout=2,is_host={str(is_host).lower()}")
        return spawn(launcher + train_args(data_dir, run, "--max-steps", str(steps), "--checkpoint-every", "5"),
                     tmp_path / log_name)

    node0 = agent(True, "node0.log")
    node1 = agent(False, "node1.log")
    log0 = tmp_path / "node0.log"
    # (any checkpoint from step 10 on: with keep 3, step 10's own is pruned 15 steps later)
    wait_for(lambda: "on 2 worker(s)" in log0.read_text() and max(checkpoint_steps(run), default=0) >= 10, 180,
             "two workers past the step-10 checkpoint")
    kill_tree(node1.pid)
    node1.wait()
    wait_for(lambda: "failed (exitcode" in log0.read_text() or "resumed from" in log0.read_text(), 120,
             "node 0 to notice the lost peer")
    node1 = agent(False, "node1-again.log")
    assert node0.wait(timeout=240) == 0, log0.read_text()[-3000:]
    assert node1.wait(timeout=120) == 0, (tmp_path / "node1-again.log").read_text()[-3000:]
    assert checkpoint_steps(run)[-1] == steps
    text = log0.read_text()
    assert "resumed from" in text, "the survivors restart from the newest checkpoint"
    assert losses(run).keys() >= set(range(steps - 4, steps + 1))


def test_a_silently_lost_node_stalls_the_survivor_for_the_peer_timeout_not_the_dist_timeout(data_dir, tmp_path):
    """Node 1 freezes (SIGSTOP of its agent and worker: its sockets stay open, no reset reaches node 0, as
    when a machine loses power or network). Node 0 must resume alone after --peer-timeout, not --dist-timeout."""
    run, port, peer_timeout = tmp_path / "run", free_port(), 5

    def agent(is_host: bool, log_name: str):
        launcher = torchrun("--nnodes=1:2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=freeze-test", "--max-restarts=3",
                            "--monitor-interval=0.5", "--rdzv-conf=join_timeout=90,last_call_timeout=1,"
                            f"keep_alive_interval=1,keep_alive_max_attempt=3,is_host={str(is_host).lower()}")
        args = train_args(data_dir, run, "--max-steps", "100000", "--checkpoint-every", "5")
        args[args.index("--dist-timeout") + 1] = "600"  # only the heartbeat can end the wait in time
        return spawn(launcher + args + ["--peer-timeout", str(peer_timeout)], tmp_path / log_name)

    node0, node1 = agent(True, "node0.log"), agent(False, "node1.log")
    log0 = tmp_path / "node0.log"
    try:
        wait_for(lambda: "on 2 worker(s)" in log0.read_text() and max(checkpoint_steps(run), default=0) >= 5, 180,
                 "two workers past the step-5 checkpoint")
        frozen = kill_tree(node1.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        before = len(log0.read_text())
        finished = re.compile(r"^step \d+/", re.MULTILINE)
        wait_for(lambda: finished.search(log0.read_text(), before + log0.read_text()[before:].find("resumed from"))
                 if "resumed from" in log0.read_text()[before:] else None, 120, "a finished step after resuming alone")
        stall = time.monotonic() - stopped_at
        resumed = log0.read_text()[before:]
        assert "peer lost (no heartbeat from rank(s) 1" in resumed, resumed[-2000:]
        assert "on 1 worker(s)" in resumed
        assert stall < peer_timeout + 30, f"stalled {stall:.0f} s"
    finally:
        for proc in (node0, node1):
            kill_tree(proc.pid, signal.SIGKILL)  # SIGKILL ends stopped processes too
            proc.wait()
    assert frozen
