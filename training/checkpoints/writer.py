"""Checkpoints off the step path: copy the state to host memory, write it in a background thread.

The step path pays only for the copy into host buffers that are allocated once and reused (pinned
on GPUs, so the device-to-host copies are asynchronous; on CPUs reuse saves the page faults of 1.5 GB
of fresh memory per GPT-2 124M checkpoint). The price is one more copy of the state in host memory. The write itself is `checkpoint.save`, unchanged: temporary directory, fsync,
checksummed manifest, atomic rename, so a crash mid-write still leaves the previous checkpoint
loadable. One write at a time: the next save, `wait()`, and `close()` first finish the one in
flight, and re-raise its error if it failed (a failed write is never silently dropped).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import torch

from training.checkpoints import checkpoint


class BackgroundCheckpointer:
    def __init__(self, run_dir: Path, keep: int):
        self.run_dir, self.keep = run_dir, keep
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._buffers: dict[tuple, torch.Tensor] = {}  # staging buffers, reused from one save to the next
        self._cuda_copies = False
        self.last_write_s: float | None = None  # how long the most recent background write took
        self.last_write_cpu_s: float | None = None  # and the CPU time it used (taken from training on busy cores)

    def save(self, step: int, states: dict, wait: bool = False) -> None:
        """Checkpoint `states` as step `step`; with wait, return only once it is safely on disk."""
        self.wait()
        staged = self._stage(states)
        # Device-to-host copies are queued on the current stream; the writer waits for them, the
        # training thread does not (later steps update the weights in stream order, after the copies).
        copied = torch.cuda.Event() if self._cuda_copies else None
        if copied is not None:
            copied.record()
        self._thread = threading.Thread(target=self._write, args=(step, staged, copied), name=f"checkpoint-{step}",
                                        daemon=False)  # the interpreter waits for a write in flight at exit
        self._thread.start()
        if wait:
            self.wait()

    def wait(self) -> None:
        """Block until the write in flight (if any) is done; raise its error if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    @property
    def writing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _write(self, step: int, staged: dict, copied) -> None:
        began, cpu_began = time.perf_counter(), time.thread_time()
        nice_this_thread()
        try:
            if copied is not None:
                copied.synchronize()
            checkpoint.save(self.run_dir, step, staged, keep=self.keep)
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            self._error = exc
        self.last_write_s = time.perf_counter() - began
        self.last_write_cpu_s = time.thread_time() - cpu_began

    def _stage(self, obj, memo: dict | None = None):
        """A copy of `obj` that later training steps cannot change: tensors copied to host memory
        (tied tensors stay tied: one copy each), containers rebuilt, everything else kept as is."""
        memo = {} if memo is None else memo
        if isinstance(obj, torch.Tensor):
            if id(obj) not in memo:
                memo[id(obj)] = self._copy_to_host(obj, len(memo))
            return memo[id(obj)]
        if isinstance(obj, dict):
            return {k: self._stage(v, memo) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            items = [self._stage(v, memo) for v in obj]
            return items if isinstance(obj, list) else tuple(items)
        return obj

    def _copy_to_host(self, t: torch.Tensor, index: int) -> torch.Tensor:
        """Into this tensor's staging buffer (safe to reuse: save() first waits for the previous write)."""
        t = t.detach()
        key = (index, tuple(t.shape), t.dtype)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = torch.empty(t.shape, dtype=t.dtype, pin_memory=t.device.type == "cuda")
        buffer.copy_(t, non_blocking=t.device.type == "cuda")
        self._cuda_copies |= t.device.type == "cuda"
        return buffer


def nice_this_thread(level: int = 10) -> None:
    """Lower the calling thread's CPU priority (Linux: per-thread nice), so that on a machine with
    few cores the background write yields to the training threads."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not permitted: keep the priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), level)
