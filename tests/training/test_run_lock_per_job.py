"""The run lock tells two Kubernetes Jobs of one name apart (issue 29 item 3).

`cancel NAME` then `submit NAME`: the old job's pod NAME-0 still writes its SIGTERM checkpoint while the
new job's pod NAME-0 starts with the same hostname. The lock must judge the old owner by its heartbeat
(another job, whatever the hostname), never by a pid probe in a process table that is not the owner's.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest


def _lock(run: Path, **owner) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    record = {"host": socket.gethostname(), "pid": 1, "start": "1", "run_id": "exp-uid-old", "agent_pid": os.getppid(),
              "job": "uid-old", "since": "earlier", "token": "theirs", **owner}
    (run / ".lock").write_text(json.dumps(record))
    return run / ".lock"


@pytest.fixture
def new_job(monkeypatch):
    from training.run_dir import lock as run_lock

    monkeypatch.setattr(run_lock, "OBSERVE_S", 0.5)
    monkeypatch.setattr(run_lock, "GRACE_MARGIN_S", 0.5)
    monkeypatch.setenv(run_lock.GRACE_ENV, "1")  # the old Job's pods' grace period (the chart's env)
    # The new job's rank 0: the same pod hostname (NAME-0), the forkserver's pid equal by chance, a new Job UID.
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "exp-uid-new")
    monkeypatch.setenv("TRAINSTACK_JOB_UID", "uid-new")
    return run_lock


def test_a_live_owner_of_an_earlier_job_on_the_same_hostname_keeps_the_lock(tmp_path, new_job):
    from trainstack.contract.errors import UserError

    lock = _lock(tmp_path / "run")
    stop = threading.Event()
    beat = threading.Thread(target=lambda: [os.utime(lock) for _ in iter(lambda: stop.wait(0.05), True)])
    beat.start()
    try:
        with pytest.raises(UserError, match="in use by another training.*still being refreshed"):
            new_job.RunLock.acquire(tmp_path / "run")
    finally:
        stop.set()
        beat.join()
    assert json.loads(lock.read_text())["token"] == "theirs"


def test_a_silent_owner_of_an_earlier_job_is_taken_over_after_the_heartbeat_window(tmp_path, new_job, capsys):
    lock = _lock(tmp_path / "run")
    claimed = new_job.RunLock.acquire(tmp_path / "run")
    try:
        record = json.loads(lock.read_text())
        assert record["job"] == "uid-new" and record["run_id"] == "exp-uid-new"
    finally:
        claimed.release()
    assert "stopped refreshing it" in capsys.readouterr().err


def test_the_same_job_restarting_on_the_same_host_still_takes_its_own_lock(tmp_path, new_job, capsys):
    _lock(tmp_path / "run", run_id="exp-uid-new", job="uid-new")
    new_job.RunLock.acquire(tmp_path / "run").release()
    assert capsys.readouterr().err == ""


def _beating(lock: Path, for_s: float) -> threading.Thread:
    """The old Job's rank 0 refreshing its lock for `for_s` seconds (its SIGTERM checkpoint), then gone."""
    def beat():
        end = time.monotonic() + for_s
        while time.monotonic() < end:
            os.utime(lock)
            time.sleep(0.05)
    thread = threading.Thread(target=beat)
    thread.start()
    return thread


def test_a_fixed_run_id_does_not_make_another_job_the_same_run(tmp_path, new_job, monkeypatch):
    """Minor 1: job.runId set gives both Jobs one rendezvous id; the Job UID is judged first."""
    from trainstack.contract.errors import UserError

    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "fixed")
    lock = _lock(tmp_path / "run", run_id="fixed", host="exp-0")
    beat = _beating(lock, 5)
    try:
        with pytest.raises(UserError, match="in use by another training"):
            new_job.RunLock.acquire(tmp_path / "run")
    finally:
        beat.join()
    assert json.loads(lock.read_text())["token"] == "theirs"


def test_the_new_job_waits_for_a_cancelled_jobs_last_checkpoint(tmp_path, new_job, capsys):
    """Minor 2: the old Job's owner still beats (its SIGTERM checkpoint) and stops within the grace period:
    the new Job waits for it, says so in one line, then takes the lock instead of failing."""
    lock = _lock(tmp_path / "run", host="exp-0")
    beat = _beating(lock, 0.8)
    try:
        claimed = new_job.RunLock.acquire(tmp_path / "run")
    finally:
        beat.join()
    try:
        assert json.loads(lock.read_text())["job"] == "uid-new"
    finally:
        claimed.release()
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "held by another Job's training" in out and "waiting up to 2s" in out


def test_the_wait_for_another_job_is_bounded(tmp_path, new_job):
    from trainstack.contract.errors import UserError

    lock = _lock(tmp_path / "run", host="exp-0")
    beat = _beating(lock, 6)
    started = time.monotonic()
    try:
        with pytest.raises(UserError, match="still being refreshed after 2s"):
            new_job.RunLock.acquire(tmp_path / "run")
        waited = time.monotonic() - started
    finally:
        beat.join()
    assert waited < 1 + 0.5 + 2 * 0.5 + 1  # grace + margin + the first look and at most one more, + slack
