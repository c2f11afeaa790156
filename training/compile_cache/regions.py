"""What train compiles: each transformer block and the head with its loss (the default), or the whole model.

Regional compilation: every block has the same code and shapes, so torch.compile traces and builds
one graph (forward and backward) that every block reuses (PyTorch's recipe "Reducing torch.compile
cold start compilation time with regional compilation": `for layer in model.layers: layer.compile()`;
torchtitan compiles per block the same way). A second region is the model's `head_loss` (final
LayerNorm, the vocabulary-sized head and the cross-entropy), so the head and the loss are still
fused; only the embeddings run eagerly. The cold compile does not grow with the depth, and the step
is no slower than the whole model's (bench/cold_start.py --step-time, docs/BENCHMARKS.md).
`TRAINSTACK_COMPILE_REGIONS=0` compiles the whole model with its loss instead (as before).

Under DDP, Dynamo's DDPOptimizer splits a compiled graph at DDP's gradient-bucket boundaries, so the
graphs (and their cache keys) depend on whether the model is wrapped, and on the bucket layout: a
restart with one worker less after a lost node compiled again. Per-block graphs already let DDP
reduce a block's gradients while the blocks before it run their backward, so the split is turned
off (`torch._dynamo.config.optimize_ddp`); the graphs are the same at any world size.

Either way the compile is in place (`Module.compile()` and a compiled `head_loss` attribute): parameter
names, the state dict and checkpoints are the plain model's, and DDP's wrapper and the evaluation (run
with the compiler's stance at force_eager) hold the same module.
"""

from __future__ import annotations

import os

import torch

REGIONS = "TRAINSTACK_COMPILE_REGIONS"


def blocks_of(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The transformer blocks of ours (training/model/gpt.py) and of Hugging Face's GPT-2 (`--init-from`)."""
    blocks = getattr(getattr(model, "transformer", None), "h", None)
    return blocks if isinstance(blocks, torch.nn.ModuleList) and len(blocks) > 0 else None


def regional(model: torch.nn.Module) -> bool:
    """Whether `compile_in_place` compiles `model` by regions: ours (blocks and a `head_loss`), unless
    turned off. A model without `head_loss` (Hugging Face's GPT-2, bench/gpu.py's `hf_model`) would
    lose the fused head and loss, so it is compiled whole."""
    return (blocks_of(model) is not None and callable(getattr(model, "head_loss", None))
            and os.environ.get(REGIONS, "1") != "0")


def compile_in_place(model: torch.nn.Module) -> torch.nn.Module:
    """Compile `model` in place (by regions unless TRAINSTACK_COMPILE_REGIONS=0) and return it."""
    if not regional(model):
        model.compile()
        return model
    torch._dynamo.config.optimize_ddp = False  # the same graphs at any world size (see above)
    for block in blocks_of(model):
        block.compile()
    if not hasattr(model.head_loss, "_torchdynamo_orig_callable"):  # not compiled already
        model.head_loss = torch.compile(model.head_loss)
    return model
