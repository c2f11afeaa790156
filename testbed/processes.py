"""Processes on this machine: a free port, a process tree to signal, a condition to wait for."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> list[int]:
    """Signal a process and everything below it (torchrun puts workers in sessions of their own);
    the pids signalled."""
    pids = [pid, *descendants(pid)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)
    return pids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
