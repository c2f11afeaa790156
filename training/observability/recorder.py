"""Rank 0's writer of a run's numbers: one `add_scalar` fans out to every place they go.

TensorBoard (RUN_DIR/tensorboard), RUN_DIR/metrics.jsonl (read by the plot and `report`), and
Weights & Biases when --wandb-project is set. Validation losses and checkpoints (`flush`) also ask
for RUN_DIR/loss.png to be redrawn, on a background thread; `close` draws it a last time.
It has the SummaryWriter methods train.py calls (add_scalar, flush, close), so the loop is unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from training.observability import metrics, wandb_logger
from training.observability.plots import LOSS_PNG, BackgroundPlot
from training.observability.run_log import MetricsFile
from trainstack.contract.config import TrainConfig
from trainstack.contract.log import warn


class Recorder:
    def __init__(self, run_dir: Path, tokens_per_step: int, sinks: list, start: dict):
        self.run_dir = run_dir
        self.tokens_per_step = tokens_per_step
        self.sinks = sinks
        self.metrics = MetricsFile(run_dir)
        # What a failed start must put back (rollback): the record as it was, and the picture of it.
        self._metrics_size = self.metrics.path.stat().st_size if self.metrics.path.is_file() else None
        png = run_dir / LOSS_PNG
        self._png_before = png.read_bytes() if png.is_file() else None
        self.metrics.event("start", tokens_per_step=tokens_per_step, **start)
        self.last_step = start.get("step", 0)
        self.plot = BackgroundPlot(run_dir, on_error=warn)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        for sink in self.sinks:
            sink.add_scalar(tag, value, step)
        self.metrics.scalar(tag, value, step, step * self.tokens_per_step)
        self.last_step = max(self.last_step, step)
        if tag == "val/loss":
            self.plot.request()

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()
        self.plot.request()

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.metrics.event("end", step=self.last_step)
        self.plot.close()

    def rollback(self) -> None:
        """A start that failed before its first checkpoint leaves RUN_DIR as it found it (run_dir.RunDirClaim)."""
        if self._metrics_size is None:
            self.metrics.path.unlink(missing_ok=True)
        else:
            os.truncate(self.metrics.path, self._metrics_size)
        png = self.run_dir / LOSS_PNG
        if self._png_before is None:
            png.unlink(missing_ok=True)
        else:
            tmp = png.with_name(f".{LOSS_PNG}-rollback.png")
            tmp.write_bytes(self._png_before)
            os.replace(tmp, png)


def open_recorder(run_dir: Path, cfg: TrainConfig, tokens_per_step: int, start: dict) -> Recorder:
    """The recorder for rank 0: TensorBoard always, W&B when asked (its checks ran at start-up)."""
    sinks = [metrics.tensorboard_writer(run_dir / "tensorboard")]
    if cfg.wandb.enabled:
        sinks.append(wandb_logger.WandbLogger(cfg.wandb, run_dir,
                                              config={**cfg.flags, **start, "tokens_per_step": tokens_per_step}))
    return Recorder(run_dir, tokens_per_step, sinks, start)
