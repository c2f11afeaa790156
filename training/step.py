"""One optimizer step: micro-batches with gradient accumulation, mixed precision, clipping.

Used by `train` and `bench`, so the benchmark measures exactly the loop that trains.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from training.errors import UserError
from training.loss import cross_entropy


def resolve_precision(requested: str, device: torch.device) -> str:
    """bf16 on GPUs with native bf16 (Ampere+), fp16 with loss scaling on older ones (T4, V100)."""
    if device.type != "cuda":
        if requested in ("bf16", "fp16"):
            raise UserError(f"--precision {requested} needs a CUDA GPU; use --precision fp32 or auto on CPU")
        return "fp32"
    if requested != "auto":
        return requested
    return "bf16" if torch.cuda.get_device_capability(device) >= (8, 0) else "fp16"


class Stepper:
    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 precision: str, grad_clip: float, world_size: int, global_batch: int):
        self.model = model
        self.optimizer = optimizer
        self.device = device
        self.grad_clip = grad_clip
        self.world_size = world_size
        self.global_batch = global_batch
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.autocast = (torch.autocast(device_type=device.type, dtype=dtype) if dtype
                         else contextlib.nullcontext())
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.autocast:
            logits = self.model(input_ids=x).logits
        flat_logits, flat_targets = logits.float().view(-1, logits.size(-1)), y.view(-1)
        if torch.is_grad_enabled():
            return cross_entropy(flat_logits, flat_targets)
        return F.cross_entropy(flat_logits, flat_targets)  # evaluation: no backward to save for

    def step(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Accumulate gradients over this rank's micro-batches and update the weights.

        Returns (sum of per-sample losses on this rank, gradient norm before clipping) as tensors,
        so the caller decides when to synchronise with the device.
        """
        loss_sum = torch.zeros((), device=self.device)
        last = len(batches) - 1
        for i, (x, y) in enumerate(batches):
            x = x.to(self.device, non_blocking=True)
            y = y.to(self.device, non_blocking=True)
            # DDP averages gradients over ranks; weighting each micro-batch by its share of the global
            # batch makes the update the mean over all samples, whatever the world size.
            weight = self.world_size * x.size(0) / self.global_batch
            sync = i == last or not isinstance(self.model, DistributedDataParallel)
            with contextlib.nullcontext() if sync else self.model.no_sync():
                loss = self.forward_loss(x, y)
                scaled = loss * weight
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            loss_sum += loss.detach() * x.size(0)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        if self.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        else:
            grad_norm = torch.zeros((), device=self.device)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, grad_norm
