"""A bound on the "restart me" exits of one Kubernetes Job that make no progress (exit 75: a peer or the
store host was lost).

The chart's podFailurePolicy ignores exit 75 so that a spot loss does not use up backoffLimit: the pod
is replaced and rejoins. Ignored exits do not count toward backoffLimit at all (Kubernetes Job
controller, podFailurePolicy action Ignore: "the counter towards the .spec.backoffLimit is not
incremented"), so a fault that keeps looking like a lost peer (a partition between nodes, a NetworkPolicy
that drops the store port) would replace pods for ever.

A fault is told from preemption by progress. Each exit is recorded with the newest checkpoint step in
the trainer's checkpoint directory (PROGRESS_ENV); the exits recorded at the current newest step are the
ones since training last saved anything new. A preemption between checkpoints leaves a newer step (the
SIGTERM checkpoint, or the periodic one) and so starts the count afresh; a persistent fault makes no
progress and its exits add up. Past the budget the launcher exits 1 instead, which the Job counts, so
backoffLimit ends it. Without a checkpoint directory (a custom command that sets none) every exit is at
"no step" and counts, over the Job's life.

The ledger: one empty file per exit, created with O_EXCL (safe on NFS, EFS and Filestore, where appends
from several clients to one file are not), in a directory per Job (its UID, JOB_UID_ENV; else the
rendezvous id), on the volume every pod of the Job shares; the count is a listing of that directory.
Recording runs under a deadline: on a node whose network is gone a hard-mounted NFS call blocks for good,
and the exit must still happen, so past RECORD_TIMEOUT_S the exit goes unrecorded (a restart, uncounted).
The chart sets the variables (templates/job.yaml); without the ledger or the budget nothing is counted.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
import uuid
from pathlib import Path

from training.run_dir.lock import JOB_UID_ENV
from trainstack.contract.deadline import NoAnswer, call_within

LEDGER_ENV = "TRAINSTACK_LOST_PEER_LEDGER"  # a directory on the volume every pod of the Job shares
BUDGET_ENV = "TRAINSTACK_LOST_PEER_BUDGET"  # exits 75 in a row, with no new checkpoint, before they count
PROGRESS_ENV = "TRAINSTACK_LOST_PEER_PROGRESS"  # the trainer's checkpoint directory (step_<N> entries)
COUNTED_EXIT = 1  # a failure the Job controller counts toward backoffLimit
RECORD_TIMEOUT_S = 10.0  # well inside the pod's grace period; an exit never waits longer on the volume
STEP_PREFIX = "step_"  # training/checkpoints/checkpoint.py PREFIX (a step directory appears by an atomic rename)
NO_STEP = "nostep"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def newest_step(directory: str | None) -> int | None:
    """The highest N of the step_<N> entries in `directory`; None without one (or without the directory)."""
    if not directory:
        return None
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    steps = [int(name[len(STEP_PREFIX):]) for name in names
             if name.startswith(STEP_PREFIX) and name[len(STEP_PREFIX):].isdigit()]
    return max(steps, default=None)


def _record(folder: Path, progress: str | None) -> tuple[int, str]:
    """Record one exit at the newest checkpoint step; (exits recorded at that step, the step's mark)."""
    step = newest_step(progress)
    mark = NO_STEP if step is None else f"step{step}"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{mark}.{time.time_ns()}.{_UNSAFE.sub('_', socket.gethostname())}.{uuid.uuid4().hex[:8]}"
    os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    return sum(1 for entry in os.listdir(folder) if entry.startswith(f"{mark}.")), mark


def spend(code: int, run_id: str | None) -> int:
    """`code` while this Job's exits with no new checkpoint are within its budget; COUNTED_EXIT past it."""
    directory, budget = os.environ.get(LEDGER_ENV), os.environ.get(BUDGET_ENV, "")
    job = os.environ.get(JOB_UID_ENV) or run_id
    if not directory or not budget.isdigit() or not job:
        return code
    folder = Path(directory) / _UNSAFE.sub("_", job)
    try:
        spent, mark = call_within(RECORD_TIMEOUT_S, lambda: _record(folder, os.environ.get(PROGRESS_ENV)),
                                  "lost-peer-ledger")
    except NoAnswer:
        print(f"[trainstack] {folder} did not answer within {RECORD_TIMEOUT_S:.0f}s; this restart is not counted",
              file=sys.stderr, flush=True)
        return code
    except OSError as error:
        # Unrecorded, a restart stays a restart: never turn a spot loss into a failure for a full disk.
        print(f"[trainstack] could not count this restart in {folder}: {error.strerror}", file=sys.stderr, flush=True)
        return code
    if spent > int(budget):
        since = "before any checkpoint" if mark == NO_STEP else f"since checkpoint {mark}"
        print(f"[trainstack] {spent} restarts of this job for a lost peer {since}, over its budget of {budget} "
              f"({BUDGET_ENV}, the chart's job.lostPeerRestarts x pods): exit {COUNTED_EXIT}, which counts "
              "toward backoffLimit; a peer that is never reachable while training saves nothing new is a "
              "fault, not a preemption", file=sys.stderr, flush=True)
        return COUNTED_EXIT
    return code
