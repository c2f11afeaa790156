"""Compile behind eager steps: a cold compile runs in a child process while the trainer steps eagerly.

On a cold start (no run cache restored) the trainer does not wait for the compiler: a child Python
builds the same model configuration with random weights on the same device, compiles it as the
trainer would (training/compile_cache/regions.py, same environment: TORCHINDUCTOR_CACHE_DIR, TMPDIR,
TRAINSTACK_COMPILE_REGIONS), and runs one forward and backward per micro-batch shape of the first
step under the trainer's autocast. That fills the compiler's on-disk caches (FX graph, AOTAutograd,
the precompiled header, the built kernels); the trainer's own compile afterwards finds them there, so
it costs about a warm start. A process, not a thread: Dynamo and Inductor patch global state and are
not meant to run beside eager autograd in one interpreter.

The child shares the node's cores with the trainer, and both lose when they fight over them (the
trainer's OpenMP threads spin while the compiler holds a core): while it runs, the trainer steps on
one thread fewer (`trainer_threads`), the child builds one kernel at a time (one Inductor compile
worker) at a lower priority (CHILD_NICE), and a node with a single core compiles in line instead
(`worth_it`). The child keeps the trainer's torch thread count all the same: Inductor's CPU kernels
are built for it, and it is part of their cache key.

The child asks the kernel to kill it when its parent dies (prctl PR_SET_PDEATHSIG), so a trainer
killed with SIGKILL does not leave it behind; `close` ends it (and what it started, its own process
group) on a normal exit or an error.

Run by the trainer as `python -m training.compile_cache.background SPEC` (SPEC: JSON, see `spec`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
CHILD_NICE = 10  # the trainer's steps come first when the two want the same core


def cores() -> int:
    """The cores this process may run on (its affinity: a container's cpuset, taskset)."""
    return len(os.sched_getaffinity(0))


def worth_it() -> bool:
    """A core for the child beside the trainer; on one core the two would only slow each other down."""
    return cores() >= 2


def trainer_threads(threads: int) -> int:
    """The trainer's torch threads while the child compiles: one core is the child's."""
    return max(1, min(threads, cores() - 1))


def _torch():
    import torch  # the trainer has it already; the module itself stays light for the child's start

    return torch


def spec(model_config, device, precision: str, micro_batch_sizes: list[int], block_size: int) -> dict:
    """What the child needs to compile what the trainer will: the model, the device, the first step's shapes
    and the trainer's torch threads (Inductor builds its CPU kernels for a thread count, which is part of
    their cache key: compiled for another count, they would not be found)."""
    return {"model_config": model_config.to_dict(), "device": str(device), "precision": precision,
            "micro_batch_sizes": micro_batch_sizes, "block_size": block_size, "parent": os.getpid(),
            "threads": _torch().get_num_threads()}


class BackgroundCompile:
    """The child compile: started once, polled between steps, closed on the trainer's way out."""

    def __init__(self, wanted: dict):
        # the child's output, for a failure's line (closed by `close`)
        self.log = tempfile.TemporaryFile(prefix="trainstack-compile-")  # noqa: SIM115
        repo = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
        # one kernel build at a time: the child has one core (compile_threads is not in Inductor's cache key)
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "training.compile_cache.background", json.dumps(wanted)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)  # its own process group: `close` ends the compiler's workers with it

    def poll(self) -> str | None:
        """None while it runs; "" when it finished well; else one line saying why it failed."""
        code = self.process.poll()
        if code is None:
            return None
        if code == 0:
            return ""
        return f"exit code {code}: {self._last_line()}" if code > 0 else f"killed by signal {-code}"

    def _last_line(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else "no output"

    def close(self) -> None:
        """End the child and everything in its process group (idempotent)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a compiler worker left in the group
        self.log.close()


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the trainer died before the line above
        os._exit(1)


def main(argv: list[str]) -> int:
    wanted = json.loads(argv[0])
    _die_with_parent(wanted["parent"])
    os.nice(CHILD_NICE)  # its compiler workers and g++ inherit it
    import torch
    from transformers import GPT2Config

    from training.compile_cache import blob
    from training.compile_cache.regions import compile_in_place
    from training.model.build import create_gpt

    torch.set_num_threads(wanted["threads"])  # the trainer's count, not what it steps on meanwhile: the key
    blob.keep_headers_in_cache()  # as the trainer does (plan.CompilePlan): the header in the cache
    config = GPT2Config.from_dict(wanted["model_config"])
    config.use_cache = False
    device = torch.device(wanted["device"])
    model = compile_in_place(create_gpt(config).to(device).train())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(wanted["precision"])
    autocast = torch.autocast(device_type=device.type, dtype=dtype) if dtype else contextlib.nullcontext()
    for size in wanted["micro_batch_sizes"]:
        x = torch.randint(0, config.vocab_size, (size, wanted["block_size"]), device=device)
        with autocast:
            loss = model(x, x)
        loss.backward()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
