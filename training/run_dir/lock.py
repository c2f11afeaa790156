"""RUN_DIR/.lock: one training per run directory.

Two trainings writing checkpoints into one RUN_DIR would prune each other's checkpoints and
overwrite each other's export. Rank 0 holds the lock; the lock names its owner (host, pid, the
process's start time so a reused pid is not mistaken for the owner, and under torchrun the run id
and the agent's pid). When it finds a lock, it decides:

- the same torchrun run (same run id, or the same agent after an elastic restart): take it over,
  it is this run's own previous worker;
- an owner on this host: alive means refuse; dead (crashed, kill -9) means take over, with a warning;
- an owner of another job (another Kubernetes Job's UID, TRAINSTACK_JOB_UID, or another torchrun run id):
  judged as on another host, whatever its hostname: a cancelled job's pod NAME-0 and the next job's
  pod NAME-0 share the hostname but not the process table, so a pid probe would judge a live owner dead.
  The Job UID is judged before the run id (a fixed job.runId is the same in both Jobs), and a live owner
  of another Job (a cancelled or replaced one, still writing its SIGTERM checkpoint) is waited for up to
  the grace period (TRAINSTACK_GRACE_PERIOD_SECONDS) plus GRACE_MARGIN_S before the lock is refused;
- an owner on another host (another pod on a shared volume): its liveness cannot be asked, so the
  lock's heartbeat (its mtime, touched every HEARTBEAT_S) is watched for OBSERVE_S: still beating
  means refuse, silent means the owner is gone: take over, with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from trainstack.contract.errors import UserError
from trainstack.contract.log import warn

LOCK = ".lock"
HEARTBEAT_S = 10.0
OBSERVE_S = 3.5 * HEARTBEAT_S  # a live owner beats at least three times in this window
GRACE_ENV = "TRAINSTACK_GRACE_PERIOD_SECONDS"  # the pods' terminationGracePeriodSeconds, set by the chart
GRACE_DEFAULT_S = 300.0  # the chart's default grace period
GRACE_MARGIN_S = 60.0  # the owner's own exit and its last heartbeat's observation window


def _grace_s() -> float:
    value = os.environ.get(GRACE_ENV, "")
    return float(value) if value.isdigit() else GRACE_DEFAULT_S


def _start_ticks(pid: int) -> str | None:
    """Process start time (clock ticks after boot), Linux; tells a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _run_id() -> str | None:
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    return None if run_id in (None, "", "none") else run_id  # torchrun's default id means "not given"


JOB_UID_ENV = "TRAINSTACK_JOB_UID"  # the Job's UID, set by the chart (downward API, controller-uid label)


def _me(token: str) -> dict:
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_ticks(os.getpid()),
            "run_id": _run_id(), "agent_pid": os.getppid() if under_torchrun else None,
            "job": os.environ.get(JOB_UID_ENV) or None,
            "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "token": token}


def _other_job(owner: dict, me: dict) -> bool:
    """Does the owner belong to another job than ours, by an id both name (never by hostname)?"""
    return any(me.get(key) and owner.get(key) and owner.get(key) != me.get(key) for key in ("job", "run_id"))


def _alive_here(owner: dict) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    return owner.get("start") is None or _start_ticks(pid) == owner.get("start")


class RunLock:
    def __init__(self, path: Path, token: str):
        self.path = path
        self.token = token
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="run-lock-heartbeat", daemon=True)
        self._beat.start()

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        path = run_dir / LOCK
        if path.is_symlink() or (path.exists() and not path.is_file()):
            what = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else "not a regular file"
            raise UserError(f"{path} is {what}, not the lock file train writes there; remove it (or pick another "
                            "--out), then run the same command again")
        token = uuid.uuid4().hex
        me = _me(token)
        blob = json.dumps(me).encode()
        for _ in range(5):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                owner = _read(path)
                if owner is None:
                    continue  # released (or being written) in between: look again
                if not _is_owner(owner):
                    # Train writes the whole record at once; a live owner's lock always reads back whole.
                    warn(f"{path} names no owner (empty, cut off or not written by train); taking the run "
                         "directory over")
                else:
                    _judge(owner, me, path)  # raises when the owner is alive
                _replace(path, blob)
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
            if (_read(path) or {}).get("token") == token:  # two takers at once: the last writer wins
                return cls(path, token)
            time.sleep(0.1)
        raise UserError(f"{run_dir} is being claimed by another training at the same moment; start only one")

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def release(self) -> None:
        self._stop.set()
        if (_read(self.path) or {}).get("token") == self.token:
            with contextlib.suppress(OSError):
                self.path.unlink()


def _read(path: Path) -> dict | None:
    for _ in range(10):
        try:
            owner = json.loads(path.read_text())
            return owner if isinstance(owner, dict) else {}
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            time.sleep(0.1)  # caught between open and write
    return {}  # unreadable: no owner we could ask


def _is_owner(owner: dict) -> bool:
    """A record as _me writes it (a lock holding anything else names nobody who could still be writing)."""
    return isinstance(owner.get("host"), str) and isinstance(owner.get("pid"), int) and bool(owner.get("token"))


def _replace(path: Path, blob: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)


def _judge(owner: dict, me: dict, path: Path) -> None:
    """Return when the lock may be taken over; raise UserError when its owner is still training."""
    # The Job's identity first: a fixed job.runId is the same in a cancelled Job and its successor.
    same_job = bool(me.get("job")) and owner.get("job") == me.get("job")
    if same_job or (me["run_id"] and owner.get("run_id") == me["run_id"] and not _other_job(owner, me)):
        return  # the same Job or torchrun run: an elastic restart, maybe on another node
    who = f"pid {owner.get('pid')} on {owner.get('host')} (since {owner.get('since')})"
    advice = f"wait for it to finish or stop it, or use another --out; if no such training runs, delete {path}"
    if me.get("job") and owner.get("job"):  # another Job (the same one returned above)
        if not _beating(path):
            _silent(path, who)
            return
        # Another Job's pods (a cancelled or replaced one) write their SIGTERM checkpoint for up to their
        # grace period after the new Job starts: wait that long, bounded, for the owner to let go.
        wait_s = _grace_s() + GRACE_MARGIN_S
        print(f"[trainstack] {path.parent} is held by another Job's training, {who}; waiting up to {wait_s:.0f}s "
              "for it to stop (a cancelled job's pods keep writing their last checkpoint)", flush=True)
        deadline = time.monotonic() + wait_s
        while _beating(path):
            if time.monotonic() >= deadline:
                raise UserError(f"{path.parent} is in use by another training, {who}: its lock was still being "
                                f"refreshed after {wait_s:.0f}s; {advice}")
        if path.exists():
            _silent(path, who)
        return  # stopped, or released: free to take
    if owner.get("host") == me["host"] and not _other_job(owner, me):
        if me["agent_pid"] and owner.get("agent_pid") == me["agent_pid"]:
            return  # this torchrun agent's previous worker (restarted after a failure)
        if _alive_here(owner):
            raise UserError(f"{path.parent} is in use by another training, {who}; {advice}")
        warn(f"{path}: its owner {who} is gone (crashed or killed); taking the run directory over")
        return
    if _beating(path):
        raise UserError(f"{path.parent} is in use by another training, {who}: its lock is still being refreshed; "
                        f"{advice}")
    _silent(path, who)


def _silent(path: Path, who: str) -> None:
    warn(f"{path}: its owner {who} stopped refreshing it for {OBSERVE_S:.0f}s; taking the run directory over")


def _beating(path: Path) -> bool:
    """Does the lock's mtime change while we watch it? (mtimes only, so clocks of other hosts do not matter)"""
    def mtime():
        try:
            return path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    first = mtime()
    deadline = time.monotonic() + OBSERVE_S
    while time.monotonic() < deadline:
        time.sleep(min(1.0, OBSERVE_S / 10))
        now = mtime()
        if now != first:
            return now is not None  # refreshed: alive; deleted: released
    return False
