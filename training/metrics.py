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

# Dense bf16 tensor-core peak FLOP/s per GPU (fp16 where the GPU has no bf16), from vendor datasheets.
# Matched by substring of torch.cuda.get_device_name(), most specific first.
PEAK_FLOPS: list[tuple[str, float]] = [
    ("GB200", 2.5e15),
    ("B200", 2.25e15),
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM / HBM3
    ("H800", 989e12),
    ("A100", 312e12),
    ("A800", 312e12),
    ("L40S", 362e12),
    ("L40", 181e12),
    ("L4", 121e12),
    ("A10G", 70e12),
    ("A10", 125e12),
    ("RTX 4090", 165e12),
    ("V100", 125e12),  # fp16
    ("T4", 65e12),  # fp16 (g4dn)
]


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, flops in PEAK_FLOPS:
        if key in name:
            return flops
    return None


def flops_per_token(n_params_no_pos: int, n_layer: int, n_embd: int, block_size: int) -> float:
    return 6.0 * n_params_no_pos + 12.0 * n_layer * n_embd * block_size


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
