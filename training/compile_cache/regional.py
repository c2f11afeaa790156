"""Regional compilation: compile the repeated transformer block, not the whole model.

Every block has the same code and shapes, so torch.compile traces and builds one graph (forward and
backward) and every block reuses it (PyTorch's recipe "Reducing torch.compile cold start compilation
time with regional compilation": `for layer in model.layers: layer.compile()`; torchtitan compiles
per block the same way). The embeddings, the final norm, the head and the loss run eagerly (the
loss as the one-pass cross-entropy of training/model/loss.py). `Module.compile()` compiles in place,
so parameter names, the state dict and checkpoints are those of the plain model.
"""

from __future__ import annotations

import os

import torch

# TRAINSTACK_COMPILE_REGIONS=0 compiles the whole model with its loss, as train did before: the
# comparison bench/cold_start.py measures.
WHOLE_MODEL = "TRAINSTACK_COMPILE_REGIONS"


def blocks_of(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The transformer blocks of ours (training/model/gpt.py) and of Hugging Face's GPT-2 (`--init-from`)."""
    blocks = getattr(getattr(model, "transformer", None), "h", None)
    return blocks if isinstance(blocks, torch.nn.ModuleList) and len(blocks) > 0 else None


def compile_regions(model: torch.nn.Module) -> torch.nn.Module:
    """Compile `model`'s blocks in place and return the model; a model without blocks is compiled whole
    (in place too: the caller's references, DDP's included, run it)."""
    blocks = blocks_of(model)
    if blocks is None or os.environ.get(WHOLE_MODEL) == "0":
        model.compile()
        return model
    for block in blocks:
        block.compile()
    return model

