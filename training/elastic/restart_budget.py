"""A bound on the "restart me" exits of one Kubernetes Job (exit 75: a peer or the store host was lost).

The chart's podFailurePolicy ignores exit 75 so that a spot loss does not use up backoffLimit: the pod
is replaced and rejoins. Ignored exits do not count toward backoffLimit at all (Kubernetes Job
controller, podFailurePolicy action Ignore: "the counter towards the .spec.backoffLimit is not
incremented"), so a fault that keeps looking like a lost peer (a partition between nodes, a NetworkPolicy
that drops the store port) would replace pods for ever. The launcher counts them per Job in a ledger on
the shared volume (one line per exit, every pod of the Job appending to one file named after the Job's
rendezvous id); past the budget it exits 1 instead, which the Job counts, so backoffLimit ends it.
The chart sets both variables (templates/job.yaml); without them (a plain torchrun, no shared volume)
nothing is counted.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

LEDGER_ENV = "TRAINSTACK_LOST_PEER_LEDGER"  # a directory on the volume every pod of the Job shares
BUDGET_ENV = "TRAINSTACK_LOST_PEER_BUDGET"  # exits 75 one Job may make before they count as failures
COUNTED_EXIT = 1  # a failure the Job controller counts toward backoffLimit
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def spend(code: int, run_id: str | None) -> int:
    """`code` while this Job's lost-peer exits are within its budget; COUNTED_EXIT once past it."""
    directory, budget = os.environ.get(LEDGER_ENV), os.environ.get(BUDGET_ENV, "")
    if not directory or not budget.isdigit() or not run_id:
        return code
    path = Path(directory) / _UNSAFE.sub("_", run_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as ledger:  # O_APPEND: one short line per exit
            ledger.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {socket.gethostname()} {code}\n")
        spent = len(path.read_text().splitlines())
    except OSError as error:
        # Unrecorded, a restart stays a restart: never turn a spot loss into a failure for a full disk.
        print(f"[trainstack] could not count this restart in {path}: {error.strerror}", file=sys.stderr, flush=True)
        return code
    if spent > int(budget):
        print(f"[trainstack] {spent} restarts of this job for a lost peer, over its budget of {budget} "
              f"({BUDGET_ENV}, the chart's job.lostPeerRestarts x pods): exit {COUNTED_EXIT}, which counts "
              "toward backoffLimit; a peer that is never reachable is a fault, not a preemption",
              file=sys.stderr, flush=True)
        return COUNTED_EXIT
    return code
