"""One start's compile: whether it compiles, what the console says, and the seconds kept out of the ETA.

`--compile on` compiles at the first step; `off` never. `auto` compiles at once when the run's compile
cache is here (a warm start costs seconds); on a cold start on a CPU it times one eager step first
and compiles only when the steps left would earn the compile back: steps left x eager step x
(1 - COMPILED_STEP_RATIO) > the compile's expected seconds (the last cold compile measured on this
machine, else COLD_COMPILE_S). That cold compile runs behind eager steps (background.py): a child
process fills the compiler's caches while the trainer trains on eagerly, and when it is done the
trainer compiles from them (a warm compile) and switches at the next step; a child that fails leaves
the run eager, said in one line. On a GPU `auto` compiles at once (no measured ratio there yet:
bench/gpu.py records one; a second copy of the model and its activations on the GPU could take
memory the trainer needs). Under DDP every rank does the same: rank 0's choice (from its own cache
and timing) is broadcast by `agree`; the child runs on each node's local rank 0 (the node's cache
directory), and `any_rank` (an all-reduce) makes every rank switch, or give up, at the same step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from training.compile_cache import blob
from training.compile_cache.background import BackgroundCompile, trainer_threads
from training.compile_cache.regions import compile_in_place
from trainstack.contract.log import info as log_info

# A compiled step's time over an eager one's at train's CPU defaults (bench/cold_start.py --step-time,
# docs/BENCHMARKS.md: 0.72-0.82 measured by regions; the higher end, so that a short run is not
# compiled on hope).
COMPILED_STEP_RATIO_CPU = 0.82
# A CPU that has never compiled here: between a cold start on a quiet and on a busy 2-core machine
# (docs/BENCHMARKS.md); the first compile here replaces it with what it took (RECORD).
COLD_COMPILE_S = 60.0
RECORD = "trainstack-compile.json"  # in the compiler's cache directory: the last cold compile's seconds here


class CompilePlan:
    """Created before the first step; `before_step`/`after_step` around each step until the compile is done."""

    def __init__(self, requested: str, run_dir: Path, device: torch.device, start_step: int, max_steps: int,
                 is_main: bool, say=log_info, agree=lambda choice: choice, background: dict | None = None,
                 launches: bool = True, any_rank=lambda flag: flag, rank: int = 0):
        self.requested, self.run_dir, self.device, self.say = requested, run_dir, device, say
        self.agree = agree  # rank 0's choice on every rank (training/elastic/distributed.broadcast_object)
        self.any_rank = any_rank  # True on every rank when it is True on one (distributed.all_reduce_max)
        # what background.py compiles (None: a cold compile blocks the step, as `--compile on` does),
        # started by this process when `launches` (a node's local rank 0)
        self.background, self.launches, self.rank = background, launches, rank
        self._child: BackgroundCompile | None = None
        self._child_began: float | None = None  # perf_counter at its start, on every rank
        self._cold_s: float | None = None  # the background compile's seconds
        self._threads: int | None = None  # the trainer's torch threads before the child took a core
        self.start_step, self.max_steps, self.is_main = start_step, max_steps, is_main
        self.pending = requested != "off"  # a compile still to decide on or to do
        quiet = lambda line: None  # noqa: E731 - every rank loads; rank 0 says what was wrong
        if self.pending:
            blob.keep_headers_in_cache()
        self.warm = blob.load(run_dir, device, say=blob.warn if is_main else quiet) if self.pending else None
        self._compiling_step: int | None = None
        self._began = 0.0
        self._since = 0.0

    @property
    def compile_at_once(self) -> bool:
        return self.requested == "on" or (self.requested == "auto" and (self.warm is not None or self.device.type != "cpu"))

    def prepare(self, model: torch.nn.Module) -> None:
        """Before the loop: compile now (the first step builds it) or wait for the eager step's timing."""
        if self.pending and self.agree(self.compile_at_once):
            self._compile(model, self.start_step + 1)

    def _compile(self, model: torch.nn.Module, step: int) -> None:
        compile_in_place(model)
        self.pending, self._compiling_step = False, step
        if self._child_began is None:
            self._since = time.time() - 1.0  # the cache files this compile writes (mtime granularity)
        if not self.is_main or self._child_began is not None:
            return
        if self.warm is not None:
            self.say(f"compile cache from step {self.warm.step}: warm start (the cold compile took "
                     f"{self.warm.compile_s:.0f} s)")
        else:
            expected = expected_cold_seconds()
            about = f"about {expected:.0f} s on this machine, once" if expected else "once"
            self.say(f"compiling the model (first start; {about}: later starts of this run reuse it); "
                     "the progress ETA leaves it out")

    def before_step(self) -> None:
        self._began = time.perf_counter()

    def after_step(self, step: int, model: torch.nn.Module) -> float:
        """Seconds of this step to keep out of the ETA and step time (the compile's), 0 for other steps."""
        seconds = time.perf_counter() - self._began
        if self.pending and self._child_began is not None:
            self._poll(step, model)
            return 0.0
        if self.pending and step == self.start_step + 1:  # auto, cold, CPU: the eager step decides
            self._decide(step, seconds, model)
            return 0.0
        if step != self._compiling_step:
            return 0.0
        self._compiling_step = None
        if self.is_main:
            cold_s = self._cold_s or seconds
            if self.warm is None:
                self.say(f"compiled the model in {cold_s:.0f} s" + (" (behind eager steps)" if self._cold_s else ""))
                record_cold_seconds(cold_s)
            saved = blob.save(self.run_dir, self.device, self._since, step, cold_s if self.warm is None
                              else self.warm.compile_s)
            if saved is not None and self.warm is None:
                self.say(f"saved the compile cache ({saved.files} files) to {self.run_dir / blob.BLOB}: later "
                         "starts of this run, on any machine like this one, start warm")
        return seconds

    def _decide(self, step: int, eager_s: float, model: torch.nn.Module) -> None:
        left = self.max_steps - step
        expected = expected_cold_seconds() or COLD_COMPILE_S
        gain = left * eager_s * (1 - COMPILED_STEP_RATIO_CPU)
        if self.agree(gain > expected):
            if self.background is None:
                self._compile(model, step + 1)
            else:
                self._start_background()
            return
        self.pending = False
        if self.is_main:
            self.say(f"running eagerly: the {left} steps left would save about {gain:.0f} s, less than a compile "
                     f"of about {expected:.0f} s on this machine (--compile on compiles anyway)")


    def _start_background(self) -> None:
        self._since = time.time() - 1.0  # the cache files the child writes (mtime granularity)
        self._child_began = time.perf_counter()
        if self.launches:
            self._child = BackgroundCompile(self.background)
            self._threads = torch.get_num_threads()
            torch.set_num_threads(trainer_threads(self._threads))
        if self.is_main:
            self.say("compiling in the background (first start; training eagerly meanwhile)")

    def _poll(self, step: int, model: torch.nn.Module) -> None:
        """Between steps: switch every rank to the compiled model once every node's child is done."""
        status = self._child.poll() if self._child is not None else ""
        failed = self.any_rank(bool(status))  # a failure anywhere keeps every rank eager
        running = self.any_rank(status is None)
        if failed:
            self.close()
            self.pending = False
            if self.is_main:
                why = status or "on another node"
                self.say(f"the background compile failed ({why}); training on eagerly (--compile off runs "
                         "eagerly from the start)")
        elif not running:
            self.close()
            self._cold_s = time.perf_counter() - self._child_began
            # every rank says it (the same step on each: the all-reduces above)
            self.say(f"{'' if self.is_main else f'rank {self.rank}: '}compiled: switching at step {step + 1}")
            self._compile(model, step + 1)

    def close(self) -> None:
        """End the background compile, if one runs (the trainer's way out, normal or not)."""
        if self._child is not None:
            self._child.close()
            self._child = None
        if self._threads is not None:  # the child's core back to the steps
            torch.set_num_threads(self._threads)
            self._threads = None


def _record_path() -> Path:
    return blob.local_cache_dir() / RECORD


def expected_cold_seconds() -> float | None:
    try:
        found = json.loads(_record_path().read_text())
        return float(found["cold_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_cold_seconds(seconds: float) -> None:
    path = _record_path()
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"cold_s": round(seconds, 1)}))
        os.replace(tmp, path)
    except OSError:
        pass  # only the next start's estimate is lost
