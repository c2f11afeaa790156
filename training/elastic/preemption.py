"""SIGTERM (spot reclaim, pod eviction) and Ctrl-C: finish the step, checkpoint, exit.

All ranks agree every step (one tiny all-reduce) on whether any rank was signalled, so they save
the same step together. A rank that was signalled itself exits 0: its node is going away and the
orchestrator restarts the work. A rank on a healthy node exits PEER_PREEMPTED so that its torchrun
agent restarts it and it rejoins the rendezvous with the replacement node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

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


@contextlib.contextmanager
def exit_on_signals(before_exit=None, hard: bool = False):
    """Outside the training loop, SIGTERM and Ctrl-C end the process with 143 / 130 and no traceback.

    By default by unwinding (SystemExit), so cleanup on the way out runs: a failed start of `train`
    leaves RUN_DIR as it found it (torchrun sends SIGTERM to the other workers as soon as one of them
    fails). With hard=True, after `before_exit()`, by os._exit: for code whose own unwinding may
    block (datasets' process pool).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):  # noqa: ARG001 - signal handler signature
        if before_exit is not None:
            before_exit()
        if hard:
            os._exit(128 + signum)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
