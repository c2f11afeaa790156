"""The checkpoint cadence of the training loop: when to save, what a save writes, and what it refuses to save.

Rank 0 writes; periodic checkpoints in the background, the last one and the one before a stop
(SIGTERM) synchronously, so the process exits only with its last step on disk. A checkpoint is
never written from weights that are no longer numbers (`_stop_if_diverged`).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import torch

from training.checkpoints import checkpoint
from training.checkpoints.writer import BackgroundCheckpointer
from training.contract.config import Cadence, TrainConfig
from training.contract.errors import UserError
from training.elastic import distributed
from training.elastic.distributed import DistInfo


class Checkpointing:
    def __init__(self, cfg: TrainConfig, run_dir: Path, dist_info: DistInfo, model, optimizer, trainer_state,
                 claim, uploader):
        self.cadence: Cadence = cfg.cadence
        self.max_steps = cfg.optim.max_steps
        self.lr = cfg.optim.lr
        self.run_dir, self.dist_info = run_dir, dist_info
        self.model, self.optimizer, self.trainer_state = model, optimizer, trainer_state
        self.claim, self.uploader = claim, uploader
        self.saver = BackgroundCheckpointer(run_dir, cfg.cadence.keep_checkpoints) if dist_info.is_main else None
        # any step's loss not finite since the start; checked before each save, no sync per step
        self.nonfinite_loss = torch.zeros((), dtype=torch.bool, device=dist_info.device)

    def due(self, step: int, stop: bool) -> bool:
        return stop or step % self.cadence.checkpoint_every == 0 or step == self.max_steps

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
