"""nanoGPT as a benchmark peer: its own model.py and optimizer set-up, driven by its train.py loop body.

nanoGPT is not part of this repository. Get a checkout into the git-ignored bench/.peers/ (the
benchmarks default to that path; any checkout can be passed with --nanogpt):

    git clone https://github.com/karpathy/nanoGPT bench/.peers/nanoGPT    # measured at commit 3adf61e1

`NanoLoop.step()` is the body of nanoGPT's train.py loop for one process and no gradient accumulation:
set the learning rate, `logits, loss = model(X, Y)` under its autocast context, backward, clip at 1.0,
optimizer step, `zero_grad(set_to_none=True)`, `loss.item()` every `log_every` steps (its log_interval).
The model is its `GPT` with GPT-2's shape (`bias=True`, dropout 0, our padded vocabulary), loaded with
the same initial weights as the other peers (its nn.Linear weights are our Conv1D weights transposed),
so every peer starts from the same point. Its own choices stay: exact-erf GELU, its loss inside its
forward, and its `configure_optimizers` (fused AdamW: we ask it for its CUDA setting on CPUs too,
because fused AdamW runs there and is its best).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import torch

from bench import common
from training.data.dataset import SampleOrder, TokenWindows

DEFAULT_CHECKOUT = common.ROOT / "bench" / ".peers" / "nanoGPT"
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def load_module(checkout: Path | str | None):
    """nanoGPT's model.py from a checkout, imported under the name `nanogpt_model`."""
    path = Path(checkout or DEFAULT_CHECKOUT) / "model.py"
    if not path.is_file():
        raise SystemExit(f"no nanoGPT checkout at {path.parent}; get one with "
                         f"`git clone https://github.com/karpathy/nanoGPT {DEFAULT_CHECKOUT}` or pass --nanogpt")
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nanogpt_model"] = module
    spec.loader.exec_module(module)
    return module


def build(module, config, block_size: int, init_state: dict | None):
    """nanoGPT's GPT in GPT-2's shape; with `init_state` (GPT2LMHeadModel layout) as its weights."""
    with contextlib.redirect_stdout(None):  # it prints its parameter count
        model = module.GPT(module.GPTConfig(block_size=block_size, vocab_size=config.vocab_size,
                                            n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd,
                                            dropout=0.0, bias=True))
    if init_state is not None:
        state = {k: (v.t().contiguous() if k.endswith(_CONV1D) else v) for k, v in init_state.items()}
        state = {k: v[:block_size] if k == "transformer.wpe.weight" else v for k, v in state.items()}
        model.load_state_dict(state)
    return model


class NanoLoop(common.TimedLoop):
    """nanoGPT's train.py loop body for one process, on our token windows in our sample order."""

    def __init__(self, model, windows: TokenWindows, max_steps: int, batch_size: int, device: torch.device,
                 precision: str, compile_model: bool, seed: int = common.SEED, log_every: int = common.LOG_EVERY):
        self.model, self.windows, self.batch_size, self.device = model, windows, batch_size, device
        self.schedule = common.default_schedule(max_steps)
        self.order = SampleOrder(len(windows), seed)
        with contextlib.redirect_stdout(None):
            self.optimizer = model.configure_optimizers(common.WEIGHT_DECAY, common.LR, common.BETAS, "cuda")
        self.compiled = torch.compile(model) if compile_model else model
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.ctx = torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        self.log_every, self.done = log_every, 0
        self.losses: list[tuple[int, float]] = []

    def get_batch(self, step: int):
        first = step * self.batch_size
        x, y = self.windows.batch([self.order.window_of(g) for g in range(first, first + self.batch_size)])
        if self.device.type == "cuda":
            return x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x, y

    def step(self) -> None:
        lr = self.schedule.lr_at(self.done)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.get_batch(self.done)
        with self.ctx:
            _, loss = self.compiled(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), common.GRAD_CLIP)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.done += 1
        if self.done % self.log_every == 0 or self.done == 1:
            self.losses.append((self.done, loss.item()))


def loss_of(model, x, y):
    """nanoGPT's forward returns (logits, loss) when given targets."""
    return model(x, y)[1]
