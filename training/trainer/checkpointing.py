"""The checkpoint cadence of the training loop: when to save, what a save writes, and what it refuses to save.

Rank 0 writes; periodic checkpoints in the background, the last one and the one before a stop
(SIGTERM) synchronously, so the process exits only with its last step on disk. A checkpoint is
never written from weights that are no longer numbers (`_stop_if_diverged`).

When a save is due: every --checkpoint-every steps (the floor), at the last step and on a stop, and
with --checkpoint-every-minutes M also once M minutes have passed since the last save (`TimedSaves`),
so what a preemption loses is bounded in time, not only in steps. Ranks must save at the same step,
and a per-step exchange of clocks would cost a collective every step, so minutes become a step number
that every rank computes from the same agreed figures:

- The timer starts when the loop starts (a resume or an elastic restart starts it afresh) and
  restarts after each save, whatever made it due.
- At a *check step* the ranks exchange two numbers (one small host collective): the seconds since
  the last save and the seconds per step since the previous check. The largest of each plans how
  many more whole steps still end within M minutes of the last save: none, and the save is due at
  this step; otherwise the next check is a quarter of the way there (`CHECK_FRACTION`). Checks
  thus close in on the deadline (a few dozen between saves at most, never one per step), and a
  step time that grows (evaluation, a slower node after a restart) is measured again in time: the
  bound holds unless the step time more than quadruples between two checks.
- The first check is the first step of a start; after a save, the next is planned from the step
  time agreed last (the save's barrier has just aligned the ranks).
A timed save therefore comes at the first check that finds no whole step left: within M minutes of
the last save, give or take one step time.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from training.checkpoints import checkpoint
from training.checkpoints.writer import BackgroundCheckpointer
from training.elastic import distributed
from training.elastic.distributed import DistInfo
from trainstack.contract.config import Cadence, TrainConfig
from trainstack.contract.errors import UserError


class Checkpointing:
    def __init__(self, cfg: TrainConfig, run_dir: Path, dist_info: DistInfo, model, optimizer, trainer_state,
                 claim, uploader, start_step: int = 0):
        self.cadence: Cadence = cfg.cadence
        self.max_steps = cfg.optim.max_steps
        self.lr = cfg.optim.lr
        self.run_dir, self.dist_info = run_dir, dist_info
        self.model, self.optimizer, self.trainer_state = model, optimizer, trainer_state
        self.claim, self.uploader = claim, uploader
        self.saver = BackgroundCheckpointer(run_dir, cfg.cadence.keep_checkpoints) if dist_info.is_main else None
        # any step's loss not finite since the start; checked before each save, no sync per step
        self.nonfinite_loss = torch.zeros((), dtype=torch.bool, device=dist_info.device)
        self.timed = TimedSaves(cfg.cadence.checkpoint_every_minutes, start_step,
                                agree=lambda values: agree_on_max(values, dist_info))

    def due(self, step: int, stop: bool) -> bool:
        """The same answer on every rank (`stop` is agreed; the timed check is collective at check steps)."""
        return (stop or step % self.cadence.checkpoint_every == 0 or step == self.max_steps
                or self.timed.due(step))

    def save(self, step: int, wait: bool) -> float:
        """Seconds the training loop spent on it (the background write is not counted)."""
        began = time.perf_counter()
        self._stop_if_diverged(step)  # never a NaN checkpoint
        rng = distributed.gather_objects(rng_state(self.dist_info.device), self.dist_info)
        if self.saver is not None:
            trainer = {"step": step, "rng": rng, **self.trainer_state}
            self.saver.save(step, {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                   "trainer": trainer}, wait=wait)
            self.claim.saved = True  # from now on a failure must not undo RUN_DIR (the write may be in flight)
            if self.uploader is not None:
                self.uploader.submit_checkpoint(step)  # to --snapshot-uri once it commits, in the background
        distributed.barrier(self.dist_info)
        self.timed.saved(step)
        return time.perf_counter() - began

    def record(self, writer, seconds: float, step: int) -> None:
        writer.add_scalar("perf/checkpoint_s", seconds, step)
        if self.saver.last_write_s is not None:
            writer.add_scalar("perf/checkpoint_write_s", self.saver.last_write_s, step)
        writer.flush()

    def wait(self) -> None:
        if self.saver is not None:
            self.saver.wait()  # a write in flight finishes before anything else (it may be the only copy)

    def _stop_if_diverged(self, step: int) -> None:
        """Before a checkpoint (periodic, SIGTERM or final): refuse to save weights that are no longer numbers."""
        finite = torch.stack([torch.isfinite(p).all() for p in self.model.parameters()]).all()
        bad = bool(self.nonfinite_loss) or not bool(finite)
        if distributed.all_reduce_max(bad, self.dist_info):
            raise diverged("nan", step, self.run_dir, self.lr)


# The next check comes after this share of the steps left: a step time up to 1/CHECK_FRACTION times
# the measured one still cannot overrun the deadline before it is measured again.
CHECK_FRACTION = 0.25


class TimedSaves:
    """--checkpoint-every-minutes as a step number every rank agrees on (the rule: the module docstring).

    `agree` takes this rank's figures and returns the largest of each across ranks (a collective:
    called at check steps only, which every rank reaches at the same step); `clock` counts seconds.
    """

    def __init__(self, minutes: float, start_step: int, agree: Callable[[list[float]], list[float]],
                 clock: Callable[[], float] = time.monotonic):
        self.budget_s = minutes * 60.0
        self.agree, self.clock = agree, clock
        now = clock()
        self.saved_at, self.checked_at, self.checked_step = now, now, start_step
        self.step_s: float | None = None  # agreed seconds per step; None until the first check
        self.check_step = start_step + 1

    @property
    def enabled(self) -> bool:
        return self.budget_s > 0

    def due(self, step: int) -> bool:
        if not self.enabled or step != self.check_step:
            return False
        now = self.clock()
        since_save, step_s = self.agree([now - self.saved_at, (now - self.checked_at) / (step - self.checked_step)])
        self.checked_at, self.checked_step, self.step_s = now, step, step_s
        left = self._steps_left(self.budget_s - since_save)
        if left <= 0:
            return True
        self.check_step = step + math.ceil(left * CHECK_FRACTION)
        return False

    def saved(self, step: int) -> None:
        """After any save (every rank, past the save's barrier): the timer restarts."""
        now = self.clock()
        self.saved_at, self.checked_at, self.checked_step = now, now, step
        left = self._steps_left(self.budget_s) if self.step_s is not None else 1
        self.check_step = step + max(1, math.ceil(left * CHECK_FRACTION))

    def _steps_left(self, seconds: float) -> int:
        """Whole steps that still end within `seconds`."""
        return int(seconds // max(self.step_s, 1e-9)) if seconds > 0 else 0


def agree_on_max(values: list[float], dist_info: DistInfo) -> list[float]:
    """The largest of each figure across ranks (small Python objects over the existing group)."""
    every = distributed.gather_objects(values, dist_info)
    return [max(column) for column in zip(*every, strict=True)]


def diverged(loss: str, step: int, run_dir: Path, lr: float) -> UserError:
    last = checkpoint.latest_valid(run_dir, announce=False)
    kept = f"the last finite checkpoint {last.path} is kept" if last else "no checkpoint was written"
    return UserError(f"the loss became {loss} by step {step}; stopped without saving ({kept}); lower --lr "
                     f"(now {lr:g}), lengthen --warmup-steps or keep --grad-clip on, then run again "
                     "(it resumes from the last finite checkpoint)")


def agree_on_checkpoint(run_dir: Path, dist_info: DistInfo) -> checkpoint.Checkpoint | None:
    """Rank 0 picks the newest intact checkpoint and every rank resumes from that one.

    Each rank choosing for itself could split the job: on NFS (EFS, Filestore) a directory renamed
    a moment ago on one node may not be listed yet on another.
    """
    chosen = distributed.on_main(lambda: checkpoint.resume_point(run_dir), dist_info)
    step = distributed.broadcast_object(chosen.step if chosen else None, dist_info)
    if step is None or dist_info.is_main:
        return chosen
    return checkpoint.wait_for_step(run_dir, step)


def rng_state(device: torch.device) -> dict:
    # Plain lists and tensors only: checkpoints load with torch.load(weights_only=True).
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": random.getstate(), "numpy": (kind, keys.tolist(), pos, has_gauss, cached),
             "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(states: list[dict], dist_info: DistInfo, seed: int, step: int) -> None:
    """Each rank gets its own RNG state back; after a world-size change, a fresh per-rank seed."""
    if len(states) == dist_info.world_size:
        state = states[dist_info.rank]
        random.setstate(state["python"])
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state["torch"])
        if "cuda" in state and dist_info.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda"], dist_info.device)
    else:
        derived = hash((seed, step, dist_info.rank)) % (2**31)
        random.seed(derived)
        np.random.seed(derived)
        torch.manual_seed(derived)
