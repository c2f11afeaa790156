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
trainer's OpenMP threads spin while the compiler holds a core). So it runs only where a core can be
its (`spare`): an idle one, or one that the node's local rank 0 gives up by stepping on one thread
fewer until the child is done; otherwise (one core, or every core busy with a one-thread rank) the
compile blocks a step as before. The child builds one kernel at a time (one Inductor compile worker)
at a lower priority (CHILD_NICE), and the kernel's OOM killer takes it before the trainer. It keeps
the trainer's torch thread count all the same: Inductor's CPU kernels are built for it, and it is
part of their cache key.

The child asks the kernel to signal it when its parent dies (prctl PR_SET_PDEATHSIG) and then ends its
process group (g++ and Inductor's helpers with it), so a trainer killed with SIGKILL leaves nothing
behind; `close` ends the group on a normal exit or an error.

Run by the trainer as `python -m training.compile_cache.background SPEC` (SPEC: JSON, see `spec`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
CHILD_NICE = 10  # the trainer's steps come first when the two want the same core
SWITCH = "TRAINSTACK_COMPILE_BACKGROUND"  # 0: never compile behind eager steps; 1: even without a spare core
CPU_QUOTA_FILES = ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CHILD_BASE = 2 * 2**30  # the child's interpreter, torch, transformers and Inductor's working set
DONE = "compile_s="  # the child's last line: its own compile seconds (not its start-up or its waits)


def cores() -> int:
    """The cores this process may use: its affinity (a cpuset, taskset) capped by a container's CPU quota
    (a pod's CPU limit leaves every host core in the affinity mask)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cpu_quota()
    return max(1, min(usable, math.ceil(quota))) if quota else usable


def _cpu_quota() -> float | None:
    """CPUs of the cgroup's quota (v2 `cpu.max`: "QUOTA PERIOD" or "max PERIOD"; v1: quota_us and period_us)."""
    for path in CPU_QUOTA_FILES:
        try:
            text = Path(path).read_text().split()
            if path.endswith("cpu.max"):
                quota, period = text[0], text[1]
            else:
                quota, period = text[0], Path(path).with_name("cpu.cfs_period_us").read_text().split()[0]
        except (OSError, IndexError):
            continue
        if quota not in ("max", "-1") and quota.isdigit() and period.isdigit() and int(period) > 0:
            return int(quota) / int(period)
        return None
    return None


def spare(local_ranks: int, threads: int) -> str | None:
    """How the child gets a core beside this node's trainers: "free" (one is idle), "take" (local rank 0
    steps on one thread fewer), or None (no core to give: compile in line, as two processes spinning on
    the same cores only slow each other down). TRAINSTACK_COMPILE_BACKGROUND=0/1 overrides."""
    forced, usable = checked_switch(), cores()
    if forced == "0" or (usable < 2 and forced != "1"):
        return None
    if usable - local_ranks * threads >= 1:
        return "free"
    if threads >= 2:
        return "take"
    return "free" if forced == "1" else None


def checked_switch() -> str | None:
    """TRAINSTACK_COMPILE_BACKGROUND as set (None: unset), refused in one line when it is neither 0 nor 1."""
    value = os.environ.get(SWITCH)
    if value not in (None, "0", "1"):
        from trainstack.contract.errors import UserError

        raise UserError(f"{SWITCH}={value!r}: use 0 (never compile behind eager steps) or 1 (even without a "
                        "spare core), or leave it unset")
    return value


def threads_beside_child(threads: int) -> int:
    """Local rank 0's torch threads while the child has a core ("take"): within the cores left to it (a
    thread count above the cores, such as torch's default under a pod's CPU limit, would starve the child)."""
    return max(1, min(threads - 1, cores() - 1))


def fits(model_config, largest_micro_batch: int, block_size: int) -> bool:
    """Room for the child beside what runs now: its model and gradients, one micro-batch's activations
    (twice the lower bound) and its Python, torch and compiler (CHILD_BASE). Under Kubernetes on cgroup v2
    a container at its memory limit loses every process at once (memory.oom.group), so not fitting
    means compiling in line, not hoping that the OOM killer picks the child."""
    from training.model import memory

    need = (memory.parameters(model_config) * 8 + 2 * largest_micro_batch
            * memory.bytes_per_sequence(model_config, block_size) + CHILD_BASE)
    free = memory.memory_free()
    return free is None or free > need


def _torch():
    import torch  # the trainer has it already; the module itself stays light for the child's start

    return torch


def spec(model_config, device, precision: str, size_sequences: list[list[int]], block_size: int) -> dict:
    """What the child needs to compile what the trainer will: the model, the device, the micro-batch sizes
    of a step (one sequence per kind of rank: ranks of an uneven global batch differ, and each shape is a
    graph of its own) and the trainer's torch threads (Inductor builds its CPU kernels for a thread count,
    which is part of their cache key: compiled for another count, they would not be found)."""
    return {"model_config": model_config.to_dict(), "device": str(device), "precision": precision,
            "size_sequences": size_sequences, "block_size": block_size, "parent": os.getpid(),
            "threads": _torch().get_num_threads()}


class BackgroundCompile:
    """The child compile: started once, polled between steps, closed on the trainer's way out."""

    def __init__(self, wanted: dict):
        # the child's output, for a failure's line (closed by `close`)
        self.log = tempfile.TemporaryFile(prefix="trainstack-compile-")  # noqa: SIM115
        self.compile_s: float | None = None  # the child's own compile seconds, once it finished well
        repo = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
        # one kernel build at a time: the child has one core (compile_threads is not in Inductor's cache key)
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        try:
            # it makes itself a process group of its own (`main`), so that `close` ends the compiler's workers
            # with it; not a session of its own, which would put it in a scheduler autogroup of its own,
            # where its nice value counts for nothing
            self.process = subprocess.Popen(
                [sys.executable, "-m", "training.compile_cache.background", json.dumps(wanted)],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        except BaseException:
            self.log.close()
            raise

    def poll(self) -> str | None:
        """None while it runs; "" when it finished well; else one line saying why it failed."""
        code = self.process.poll()
        if code is None:
            return None
        if code == 0:
            line = self._last_line()
            self.compile_s = float(line[len(DONE):]) if line.startswith(DONE) else None
            return ""
        return f"exit code {code}: {self._last_line()}" if code > 0 else f"killed by signal {-code}"

    def _last_line(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else "no output"

    def close(self) -> None:
        """End the child and everything in its process group (idempotent)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # not its own group yet: only the child itself
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            # bounded: a child stuck in I/O on a shared cache volume must not hold up the trainer's exit
            # (PR_SET_PDEATHSIG still ends it then)
            self.process.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a compiler worker left in the group
        self.log.close()


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the trainer's thread that started us exits (the main thread: plan.py), which ends this
    process group, g++ and Inductor's helpers included, so that nothing is left behind a kill -9."""
    os.setpgid(0, 0)  # a group of its own first: the handler below ends this group, never the trainer's
    if os.getpgrp() != os.getpid():
        os._exit(1)
    signal.signal(signal.SIGTERM, lambda *_: os.killpg(0, signal.SIGKILL))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0 or os.getppid() != parent:
        os._exit(1)  # no death signal, or the trainer died before it was set


def main(argv: list[str]) -> int:
    wanted = json.loads(argv[0])
    _die_with_parent(wanted["parent"])
    os.nice(CHILD_NICE)  # its compiler workers and g++ inherit it
    # a second model and a step's activations: in a pod at its memory limit, the kernel's OOM killer takes
    # this process rather than the trainer (which then trains on eagerly, said in one line)
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")
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
    began = time.perf_counter()
    model = compile_in_place(create_gpt(config).to(device).train())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(wanted["precision"])
    autocast = torch.autocast(device_type=device.type, dtype=dtype) if dtype else contextlib.nullcontext()
    for i, sizes in enumerate(wanted["size_sequences"]):
        if i:  # as a rank that has only seen these sizes: Dynamo marks a size dynamic once a second one comes
            torch._dynamo.reset()
        for size in sizes:
            x = torch.randint(0, config.vocab_size, (size, wanted["block_size"]), device=device)
            with autocast:
                loss = model(x, x)
            loss.backward()
    print(f"{DONE}{time.perf_counter() - began:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
