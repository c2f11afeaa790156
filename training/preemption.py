"""SIGTERM (spot reclaim, pod eviction) and Ctrl-C: finish the step, checkpoint, exit.

All ranks agree every step (one tiny all-reduce) on whether any rank was signalled, so they save
the same step together. A rank that was signalled itself exits 0: its node is going away and the
orchestrator restarts the work. A rank on a healthy node exits PEER_PREEMPTED so that its torchrun
agent restarts it and it rejoins the rendezvous with the replacement node.
"""

from __future__ import annotations

import signal

PEER_PREEMPTED = 75  # EX_TEMPFAIL: "a peer was preempted; checkpoint saved; restart me"


class PreemptionWatcher:
    def __init__(self) -> None:
        self.signalled = False
        self._previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.signalled = True

    def exit_code(self) -> int:
        return 0 if self.signalled else PEER_PREEMPTED

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
