"""What train compiles: the whole model with its loss (the default), or each transformer block.

Regional compilation (`TRAINSTACK_COMPILE_REGIONS=1`): every block has the same code and shapes, so
torch.compile traces and builds one graph (forward and backward) that every block reuses (PyTorch's
recipe "Reducing torch.compile cold start compilation time with regional compilation":
`for layer in model.layers: layer.compile()`; torchtitan compiles per block the same way); the
embeddings, the head and the loss run eagerly. Its cold compile does not grow with the depth, but on
a CPU at train's defaults its step was 1.45-1.61x the whole model's (bench/cold_start.py --step-time,
docs/BENCHMARKS.md): the whole-model graph fuses the vocabulary-sized head and loss, where a small
model spends its step. So the whole model stays the default until a measurement (bench/gpu.py's
`ours_regional` peer on a GPU) shows regions within 3% of it.

Either way `Module.compile()` compiles in place: parameter names, the state dict and checkpoints are
the plain model's, and DDP's wrapper and the evaluation (run with the compiler's stance at
force_eager) hold the same module.
"""

from __future__ import annotations

import os

import torch

REGIONS = "TRAINSTACK_COMPILE_REGIONS"


def blocks_of(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The transformer blocks of ours (training/model/gpt.py) and of Hugging Face's GPT-2 (`--init-from`)."""
    blocks = getattr(getattr(model, "transformer", None), "h", None)
    return blocks if isinstance(blocks, torch.nn.ModuleList) and len(blocks) > 0 else None


def compile_in_place(model: torch.nn.Module) -> torch.nn.Module:
    """Compile `model` in place (its blocks alone with TRAINSTACK_COMPILE_REGIONS=1) and return it."""
    blocks = blocks_of(model)
    if blocks is not None and os.environ.get(REGIONS) == "1":
        for block in blocks:
            block.compile()
    else:
        model.compile()
    return model
