"""Peer heartbeats: a node that vanishes without a TCP reset must not hang the survivors.

A killed process or a rebooted node resets its connections, and the survivors' next collective
fails at once. A node that is lost silently (power, kernel panic, a frozen VM, a network partition)
leaves them waiting in that collective for the full --dist-timeout (600 s by default), which has to
stay long because a checkpoint write on a network filesystem may hold the other ranks at a barrier
for minutes. So liveness is checked apart from progress: a thread on each rank bumps its counter in
the job's key-value store every second and watches everyone else's. A peer whose counter stands
still for --peer-timeout seconds (or a store that stops answering for that long) is lost: the
survivor says so in one line, lets a checkpoint write in flight finish, and exits with
PEER_PREEMPTED so that its torchrun agent restarts it; the rendezvous then re-forms without the lost
node and training resumes from the newest checkpoint. A slow peer is not lost: its heartbeat thread
keeps beating while its main thread compiles, evaluates or writes.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

from training.elastic.preemption import PEER_PREEMPTED

PREFIX = "trainstack/heartbeat/"


class PeerWatchdog:
    def __init__(self, rank: int, world_size: int, timeout_s: float, interval_s: float = 1.0):
        self.rank, self.world_size = rank, world_size
        self.timeout_s, self.interval_s = timeout_s, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peer-heartbeat", daemon=True)

    def start(self) -> PeerWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _connect(self):
        import torch.distributed as dist

        # A connection of its own (not the process group's), with a short timeout: an unanswered
        # request must come back as an error within a heartbeat or two, not after minutes.
        return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                             timeout=datetime.timedelta(seconds=max(2.0, 2 * self.interval_s)),
                             wait_for_workers=False)

    def _run(self) -> None:
        now = time.monotonic()
        last_seen = {r: (None, now) for r in range(self.world_size) if r != self.rank}  # rank -> (count, when)
        store, last_contact = None, now
        while not self._stop.wait(self.interval_s):
            now = time.monotonic()
            try:
                store = store or self._connect()
                store.add(f"{PREFIX}{self.rank}", 1)
                for peer, (count, _since) in last_seen.items():
                    value = store.add(f"{PREFIX}{peer}", 0)
                    if value != count:
                        last_seen[peer] = (value, now)
                last_contact = now
            except Exception:  # noqa: BLE001 - the store host may be the lost node; judged by time below
                store = None
                if now - last_contact > self.timeout_s:
                    self._lost(f"the job's store at {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} "
                               f"has not answered for {now - last_contact:.0f} s")
                continue
            stale = [peer for peer, (_, since) in last_seen.items() if now - since > self.timeout_s]
            if stale:
                self._lost(f"no heartbeat from rank(s) {', '.join(map(str, stale))} for over {self.timeout_s:.0f} s")

    def _lost(self, why: str) -> None:
        print(f"rank {self.rank}: peer lost ({why}); exiting with {PEER_PREEMPTED} so that the launcher "
              "restarts this worker without it (raise --peer-timeout if peers are merely slow)",
              file=sys.stderr, flush=True)
        for thread in threading.enumerate():  # a checkpoint write in flight may be the newest copy
            if thread.name.startswith("checkpoint-"):
                thread.join()
        sys.stdout.flush()
        os._exit(PEER_PREEMPTED)  # the main thread is stuck in a collective; nothing else can end it
