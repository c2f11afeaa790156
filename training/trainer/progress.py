"""The logging cadence of the training loop: the train loss and throughput of each window of steps.

Every `--log-every` steps the ranks sum their losses; rank 0 writes the scalars (recorder) and a
line to the console, or above the progress bar when there is one.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from training.elastic import distributed
from training.elastic.distributed import DistInfo
from training.observability import metrics
from training.trainer.checkpointing import diverged
from trainstack.contract.config import TrainConfig


class Console:
    """Rank 0's progress bar (tqdm) and the lines printed above it; plain prints without one."""

    def __init__(self, cfg: TrainConfig, start_step: int, dist_info: DistInfo):
        self.bar = None
        if dist_info.is_main and cfg.runtime.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=cfg.optim.max_steps, initial=start_step, desc="train", unit="step",
                            dynamic_ncols=True, mininterval=1.0)

    def emit(self, line: str, loss: float | None = None, tok_s: float | None = None, force: bool = False) -> None:
        if self.bar is None:
            print(line, flush=True)
            return
        self.bar.write(line)
        if loss is not None:
            self.bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tok_s:,.0f}", refresh=False)
        if force:
            self.bar.refresh()

    def update(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def exclude(self, seconds: float) -> None:
        """Keep `seconds` (the compile) out of the bar's rate and ETA: tqdm measures from start_t
        (average rate) and last_print_t (its smoothed rate), both moved forward by them."""
        if self.bar is not None:
            self.bar.start_t += seconds
            self.bar.last_print_t += seconds

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None  # what is emitted after close is printed plainly, with no bar redrawn below it


class TrainLog:
    """Accumulates each step's loss on the device (no host sync) and reports a window every --log-every steps."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, dist_info: DistInfo, writer, console: Console, schedule,
                 tokens_per_step: int, flops_per_token: float, distilling: bool):
        self.run_dir, self.lr = run_dir, cfg.optim.lr
        self.every, self.max_steps = cfg.cadence.log_every, cfg.optim.max_steps
        self.dist_info, self.writer, self.console, self.schedule = dist_info, writer, console, schedule
        self.tokens_per_step, self.flops_per_token = tokens_per_step, flops_per_token
        self.peak = metrics.peak_flops(dist_info.device)
        self.distilling = distilling
        self.loss = torch.zeros((), device=dist_info.device)
        self.samples = 0
        self.window_start, self.window_steps = time.perf_counter(), 0

    def add(self, loss_sum: torch.Tensor, samples: int) -> None:
        self.loss += loss_sum
        self.samples += samples
        self.window_steps += 1

    def due(self, step: int) -> bool:
        return step % self.every == 0 or step == self.max_steps

    def exclude(self, seconds: float) -> None:
        """Time the loop spent elsewhere (checkpoints) is reported on its own, not as step time."""
        self.window_start += seconds

    def leave_out_step(self, seconds: float) -> None:
        """The step just added compiled the model: its time and tokens leave the window's throughput,
        unless it is the window's only step (then the line shows what it took)."""
        if self.window_steps > 1:
            self.window_steps -= 1
            self.window_start += seconds

    def report(self, step: int, stepper, grad_norm) -> None:
        """The window's mean loss on every rank (a loss that is not a number stops the run), written by rank 0."""
        total_loss, total_samples = distributed.all_reduce_sum([self.loss.item(), self.samples], self.dist_info)
        elapsed = time.perf_counter() - self.window_start
        tok_s = self.window_steps * self.tokens_per_step / elapsed
        util = metrics.mfu(tok_s / self.dist_info.world_size, self.flops_per_token, self.peak)
        train_loss = total_loss / total_samples
        if not np.isfinite(train_loss):
            raise diverged(str(train_loss), step, self.run_dir, self.lr)
        parts = stepper.pop_parts() if self.distilling else {}  # distill/kd, distill/lm, distill/cos
        if self.dist_info.is_main:
            lr, step_ms = self.schedule.lr_at(step - 1), 1000 * elapsed / self.window_steps
            for tag, value in parts.items():
                self.writer.add_scalar(tag, value, step)
            self.writer.add_scalar("train/loss", train_loss, step)
            self.writer.add_scalar("train/lr", lr, step)
            self.writer.add_scalar("train/grad_norm", float(grad_norm), step)
            self.writer.add_scalar("perf/tokens_per_s", tok_s, step)
            self.writer.add_scalar("perf/step_ms", step_ms, step)
            if util is not None:
                self.writer.add_scalar("perf/mfu", util, step)
            line = (f"step {step}/{self.max_steps} | loss {train_loss:.4f} | lr {lr:.2e} "
                    f"| {tok_s:,.0f} tok/s | {step_ms:.0f} ms/step"
                    + (f" | mfu {100 * util:.1f}%" if util is not None else ""))
            self.console.emit(line, train_loss, tok_s)
        self.loss.zero_()
        self.samples = 0
        self.window_start, self.window_steps = time.perf_counter(), 0
