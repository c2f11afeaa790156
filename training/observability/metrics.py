"""Throughput and model FLOPs utilisation (MFU), and the TensorBoard writer.

MFU follows the PaLM paper (appendix B), as nanoGPT does:
    flops_per_token = 6 * N + 12 * n_layer * n_embd * block_size
where N is the parameter count without the position embeddings (the 6N term is the forward and
backward matmuls, the second term the attention scores). MFU = tokens/s * flops_per_token divided by
the device's dense bf16 peak (no sparsity). On CPUs no peak is known and MFU is reported as None.
"""

from __future__ import annotations

from pathlib import Path

import torch

from trainstack.contract.shapes import PEAK_FLOPS, flops_per_token, peak_flops_of  # noqa: F401 - torch-free, shared with trainstack/infra/cost


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return peak_flops_of(torch.cuda.get_device_name(device))


def count_params(model: torch.nn.Module) -> int:
    """Parameters without position embeddings (tied input/output embeddings counted once)."""
    total = sum(p.numel() for p in model.parameters())
    wpe = getattr(getattr(model, "transformer", None), "wpe", None)
    return total - (wpe.weight.numel() if wpe is not None else 0)


def mfu(tokens_per_s: float, flops_token: float, peak: float | None) -> float | None:
    return None if not peak else tokens_per_s * flops_token / peak


def tensorboard_writer(log_dir: Path):
    from torch.utils.tensorboard import SummaryWriter  # imported late: only rank 0 needs it

    return SummaryWriter(log_dir=str(log_dir))
