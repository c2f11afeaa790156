"""The evaluation cadence of the training loop: the loss on a fixed set of validation windows."""

from __future__ import annotations

import numpy as np
import torch

from training.data.dataset import TokenWindows, micro_batches
from training.elastic import distributed
from training.elastic.distributed import DistInfo
from training.observability.run_log import describe_tokens
from training.trainer.step import Stepper
from trainstack.contract.config import TrainConfig


class Evaluator:
    def __init__(self, cfg: TrainConfig, windows: TokenWindows, stepper: Stepper, dist_info: DistInfo):
        self.every, self.max_steps = cfg.cadence.eval_every, cfg.optim.max_steps
        self.samples, self.batch_size = cfg.cadence.eval_samples, cfg.optim.batch_size
        self.windows, self.stepper, self.dist_info = windows, stepper, dist_info

    def due(self, step: int) -> bool:
        """Never without validation windows (a split too small for one block)."""
        return len(self.windows) > 0 and (step % self.every == 0 or step == self.max_steps)

    def run(self, step: int, writer, console) -> None:
        val_loss = evaluate(self.stepper, self.windows, self.samples, self.batch_size, self.dist_info)
        if self.dist_info.is_main:
            writer.add_scalar("val/loss", val_loss, step)
            writer.add_scalar("val/perplexity", float(np.exp(min(val_loss, 50.0))), step)
            console.emit(f"step {step} | val loss {val_loss:.4f} nats/token on "
                         f"{describe_tokens(validation_tokens(self.windows, self.samples), self.windows.block_size)}"
                         f" | val perplexity {np.exp(min(val_loss, 50.0)):.2f}")


def validation_tokens(windows: TokenWindows, samples: int) -> int:
    """How many tokens each evaluation measures: the first `samples` windows, or all there are."""
    return min(len(windows), samples) * windows.block_size


@torch.no_grad()
def evaluate(stepper: Stepper, windows: TokenWindows, samples: int, batch_size: int, dist_info: DistInfo) -> float:
    """Mean loss over a fixed set of validation windows (the first `samples`), shared out across ranks."""
    stepper.model.eval()
    n = min(len(windows), samples)
    mine = list(range(dist_info.rank, n, dist_info.world_size))
    total = 0.0
    for mb in micro_batches(mine, batch_size):
        x, y = windows.batch(mb)
        total += stepper.forward_loss(x.to(dist_info.device), y.to(dist_info.device)).item() * len(mb)
    stepper.model.train()
    loss_sum, count = distributed.all_reduce_sum([total, float(len(mine))], dist_info)
    return loss_sum / max(count, 1.0)
