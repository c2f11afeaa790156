"""One optimizer step: micro-batches with gradient accumulation, mixed precision, clipping.

Used by `train` and `bench`, so the benchmark measures exactly the loop that trains.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from trainstack.contract.errors import UserError


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matmuls run about twice as fast as fp32 (bench/cpu_vs_hf_trainer.py)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_precision(requested: str, device: torch.device) -> str:
    """bf16 on GPUs with native bf16 (Ampere+), fp16 with loss scaling on older ones (T4, V100);
    on CPUs bf16 where the instruction set has it (AVX512-BF16, AMX), else fp32."""
    if device.type != "cuda":
        if requested == "fp16":
            raise UserError("--precision fp16 needs a CUDA GPU; use --precision bf16, fp32 or auto on CPU")
        if requested == "auto":
            return "bf16" if cpu_has_native_bf16() else "fp32"
        return requested
    if requested != "auto":
        return requested
    return "bf16" if torch.cuda.get_device_capability(device) >= (8, 0) else "fp16"


def resolve_compile(requested: str) -> bool:
    """Whether anything may be compiled: train's `auto` decides per start whether the model is
    (training/compile_cache/plan.py); elsewhere (bench, distillation's teacher) auto means on."""
    return requested != "off"


class Stepper:
    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                 precision: str, grad_clip: float, world_size: int, global_batch: int, eager: bool = False):
        self.model = model
        self.eager = eager  # evaluation: compiled regions of the model run eagerly (no second, no-grad compile)
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
        """Mean next-token loss; the model (training/model/gpt.py) computes it, inside the compiled graph."""
        # set_stance sets the stance when called and puts the previous one back when its block ends
        with self.autocast, torch.compiler.set_stance("force_eager") if self.eager else contextlib.nullcontext():
            return self.model(x, y)

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cuda":
            return t
        # pinned: the copy is asynchronous, so the host builds the next batch while the GPU computes
        return t.pin_memory().to(self.device, non_blocking=True)

    def step(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Accumulate gradients over this rank's micro-batches and update the weights.

        Returns (sum of per-sample losses on this rank, gradient norm before clipping) as tensors,
        so the caller decides when to synchronise with the device.
        """
        loss_sum = torch.zeros((), device=self.device)
        last = len(batches) - 1
        for i, (x, y) in enumerate(batches):
            x, y = self._to_device(x), self._to_device(y)
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
