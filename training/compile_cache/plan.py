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
directory), and `max_over_ranks` (an all-reduce) makes every rank switch, or give up, at the same step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from training.compile_cache import blob
from training.compile_cache.background import BackgroundCompile, threads_beside_child
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
                 is_main: bool, say=log_info, agree=lambda choice: choice, behind_eager=lambda: (None, None),
                 launches: bool = True, max_over_ranks=lambda value: value, rank: int = 0):
        self.requested, self.run_dir, self.device, self.say = requested, run_dir, device, say
        self.agree = agree  # rank 0's choice on every rank (training/elastic/distributed.broadcast_object)
        self.max_over_ranks = max_over_ranks  # the largest of every rank's value (distributed.max_over_ranks)
        # asked once, when `auto` decides to compile a cold CPU start (not on every start): what background.py
        # would compile here (None: a cold compile blocks the step, as `--compile on` does) and how its child
        # gets a core (background.spare); `launches`: whether this process starts it (a node's local rank 0)
        self.behind_eager, self.launches, self.rank = behind_eager, launches, rank
        self._behind_began: float | None = None  # perf_counter when the compile behind eager steps began
        self._child: BackgroundCompile | None = None
        self._status: str | None = None  # this node's child: None running, "" done, else why it failed
        self._child_s: float | None = None  # the child's own compile seconds
        self._threads: int | None = None  # the trainer's torch threads before the child took a core
        self._misses = 0  # Inductor's cache misses before the switch's compile
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
        if self._behind_began is not None:  # the switch: the child's files are in the cache, and counted
            self._misses = _cache_misses()
            return
        self._since = time.time() - 1.0  # the cache files this compile writes (mtime granularity)
        if not self.is_main:
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
        if self.pending and self._behind_began is not None:
            self._poll(step, model)
            return 0.0
        if self.pending and step == self.start_step + 1:  # auto, cold, CPU: the eager step decides
            self._decide(step, seconds, model)
            return 0.0
        if step != self._compiling_step:
            return 0.0
        self._compiling_step = None
        if self._behind_began is not None:  # the switch's compile: warm from the child's cache
            missed = _cache_misses() - self._misses
            if missed and self.is_main:
                self.say(f"the switch missed {missed} graphs of the background compile's cache: compiled them in "
                         f"line in {seconds:.0f} s")
                self._save(step, seconds)
            return seconds
        if self.is_main:
            if self.warm is None:
                self.say(f"compiled the model in {seconds:.0f} s")
                record_cold_seconds(seconds)
            self._save(step, seconds if self.warm is None else self.warm.compile_s)
        return seconds

    def _save(self, step: int, cold_s: float) -> None:
        saved = blob.save(self.run_dir, self.device, self._since, step, cold_s)
        if saved is not None and self.warm is None:
            self.say(f"saved the compile cache ({saved.files} files) to {self.run_dir / blob.BLOB}: later "
                     "starts of this run, on any machine like this one, start warm")

    def _decide(self, step: int, eager_s: float, model: torch.nn.Module) -> None:
        left = self.max_steps - step
        expected = expected_cold_seconds() or COLD_COMPILE_S
        gain = left * eager_s * (1 - COMPILED_STEP_RATIO_CPU)
        wanted, spare = self.behind_eager()
        behind = wanted is not None and spare is not None
        how = self.agree(("behind eager steps" if behind else "in line") if gain > expected else None)
        if how == "behind eager steps":  # rank 0's way on every rank: the same collectives on each
            self._start_background(wanted, spare)
            return
        if how is not None:
            self._compile(model, step + 1)
            return
        self.pending = False
        if self.is_main:
            self.say(f"running eagerly: the {left} steps left would save about {gain:.0f} s, less than a compile "
                     f"of about {expected:.0f} s on this machine (--compile on compiles anyway)")

    def _start_background(self, wanted: dict | None, spare: str | None) -> None:
        self._since = time.time() - 1.0  # the cache files the child writes (mtime granularity)
        self._behind_began = time.perf_counter()
        self._status = ""  # a rank that starts no child has nothing to wait for
        if self.launches and wanted is None:  # rank 0 had room for a child; this node has not
            self._status = "could not start it: no room for a second model in memory here"
        elif self.launches:
            try:
                self._child, self._status = BackgroundCompile(wanted), None
            except OSError as exc:  # TMPDIR full, no process left: the run goes on
                self._status = f"could not start it: {exc}"
            if self._child is not None and spare == "take":
                self._threads = torch.get_num_threads()
                torch.set_num_threads(threads_beside_child(self._threads))
        if self.is_main:
            self.say("compiling in the background (first start; training eagerly meanwhile)")

    def _poll(self, step: int, model: torch.nn.Module) -> None:
        """Between steps: switch every rank to the compiled model once every node's child is done."""
        if self._child is not None:
            self._status = self._child.poll()
            if self._status is not None:  # this node's child is done: its core goes back to the steps now
                self._child_s = self._child.compile_s
                self._release()
        state = self.max_over_ranks(FAILED if self._status else RUNNING if self._status is None else DONE)
        if state == FAILED:  # a failure anywhere keeps every rank eager
            self._release()
            self.pending = False
            if self.is_main:
                self.say(f"the background compile failed ({self._status or 'on another node'}); training on "
                         "eagerly (--compile off runs eagerly from the start)")
        elif state == RUNNING:
            if step >= self.max_steps and self.is_main:
                self.say("the run ends before the background compile is done: a later start compiles again")
        else:
            self._switch(step, model)

    def _switch(self, step: int, model: torch.nn.Module) -> None:
        if self.is_main:
            cold_s = self._child_s or time.perf_counter() - self._behind_began
            if step < self.max_steps:
                self.say(f"compiled: switching at step {step + 1}")
            self.say(f"compiled the model in {cold_s:.0f} s (behind eager steps)")
            record_cold_seconds(cold_s)
            self._save(step, cold_s)  # now, not after the switch: the run may end or be stopped first
        elif step < self.max_steps:
            self.say(f"rank {self.rank}: compiled: switching at step {step + 1}")  # the same step on every rank
        if step < self.max_steps:
            self._compile(model, step + 1)
        else:
            self.pending = False

    def _release(self) -> None:
        """End this node's child, if it runs, and give its core back to the steps."""
        if self._child is not None:
            self._child.close()
            self._child = None
        if self._threads is not None:
            torch.set_num_threads(self._threads)
            self._threads = None

    def close(self) -> None:
        """The trainer's way out, normal or not: no background compile outlives the run."""
        self._release()


# this node's background compile, as max_over_ranks compares them: one failure anywhere wins
DONE, RUNNING, FAILED = 0, 1, 2


def _cache_misses() -> int:
    return torch._dynamo.utils.counters["inductor"]["fxgraph_cache_miss"]


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
