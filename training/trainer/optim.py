"""AdamW with GPT-2 style weight-decay groups, and the warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Schedule:
    lr: float
    min_lr: float
    warmup_steps: int
    max_steps: int

    def lr_at(self, step: int) -> float:
        """Linear warmup to `lr`, then cosine decay to `min_lr` at `max_steps` (step is 0-based)."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if step >= self.max_steps:
            return self.min_lr
        progress = (step - self.warmup_steps) / max(1, self.max_steps - self.warmup_steps)
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (self.lr - self.min_lr)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.AdamW:
    # Matrices (linear and embedding weights) decay; biases and LayerNorm gains do not.
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel for the whole update, on GPUs and (torch >= 2.4) on CPUs
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
