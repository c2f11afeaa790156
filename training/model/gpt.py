"""The GPT-2 that `train` trains: a lean module with GPT2LMHeadModel's exact parameter names and layouts.

Why not GPT2LMHeadModel itself: per step it builds attention masks, output dataclasses and dispatch
wrappers in Python, and its loss runs outside the model, so `torch.compile` cannot fuse the last
matmul with the cross-entropy. This module is the same function (pre-LayerNorm blocks, fused QKV,
tanh or exact GELU, tied embeddings, causal SDPA) written as plain tensor code, and returns the loss
itself. Its state_dict has GPT2LMHeadModel's keys and shapes (Conv1D weights stored (in, out)), so
checkpoints, `--init-from` and the Hugging Face export move weights across without conversion.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from training.model.loss import cross_entropy

# GPT2Config.activation_function -> the GELU it computes (HF's "gelu_new" is the tanh approximation).
_GELU_APPROXIMATION = {"gelu_pytorch_tanh": "tanh", "gelu_new": "tanh", "gelu_fast": "tanh", "gelu": "none"}


def unsupported(config) -> str | None:
    """Why this GPT2Config cannot be trained by `GPT` (None when it can)."""
    if config.activation_function not in _GELU_APPROXIMATION:
        return f"activation_function '{config.activation_function}'"
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if getattr(config, flag, False):
            return flag
    if not getattr(config, "scale_attn_weights", True):
        return "scale_attn_weights=False"
    return None


class Conv1D(nn.Module):
    """A linear layer stored as GPT-2 stores it: weight (in, out), y = x @ W + b."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.t(), self.bias)


# Up to this many positions a CPU computes attention faster with the (B, H, T, T) scores in memory,
# which inductor fuses with the mask and softmax, than with the CPU flash-attention kernel.
CPU_MATERIALISED_ATTENTION_MAX_T = 512


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float) -> torch.Tensor:
    t = q.size(-2)
    if q.device.type != "cpu" or t > CPU_MATERIALISED_ATTENTION_MAX_T or dropout:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v


class Attention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = Conv1D(n_embd, 3 * n_embd)
        self.c_proj = Conv1D(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for z in self.c_attn(x).split(c, dim=2))
        y = causal_attention(q, k, v, self.dropout if self.training else 0.0)
        return F.dropout(self.c_proj(y.transpose(1, 2).reshape(b, t, c)), self.dropout, self.training)


class MLP(nn.Module):
    def __init__(self, n_embd: int, n_inner: int, approximate: str, dropout: float):
        super().__init__()
        self.approximate, self.dropout = approximate, dropout
        self.c_fc = Conv1D(n_embd, n_inner)
        self.c_proj = Conv1D(n_inner, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.c_fc(x), approximate=self.approximate)
        return F.dropout(self.c_proj(h), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        eps = config.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=eps)
        self.attn = Attention(config.n_embd, config.n_head, config.attn_pdrop)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=eps)
        self.mlp = MLP(config.n_embd, config.n_inner or 4 * config.n_embd,
                       _GELU_APPROXIMATION[config.activation_function], config.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class GPT(nn.Module):
    """forward(input_ids, targets) -> mean cross-entropy; forward(input_ids) -> logits;
    forward(input_ids, return_hidden=True) -> (logits, last hidden state after ln_f)."""

    def __init__(self, config):
        super().__init__()
        problem = unsupported(config)
        if problem:
            raise ValueError(f"GPT does not implement GPT2Config {problem}")
        self.config = config
        self.embd_pdrop = config.embd_pdrop
        self.transformer = Transformer(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """GPT-2's initialisation (as GPT2LMHeadModel does it): N(0, 0.02), residual projections
        scaled by 1/sqrt(2 * n_layer), zero biases, unit LayerNorm gains."""
        std = self.config.initializer_range
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln_" in name or name.startswith("transformer.ln_f"):
                p.fill_(1.0)
            elif name.endswith("c_proj.weight"):
                p.normal_(0.0, std / math.sqrt(2 * self.config.n_layer))
            else:
                p.normal_(0.0, std)

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None,
                return_hidden: bool = False) -> torch.Tensor:
        t = input_ids.size(1)
        pos = torch.arange(t, device=input_ids.device)
        x = self.transformer.wte(input_ids) + self.transformer.wpe(pos)
        x = F.dropout(x, self.embd_pdrop, self.training)
        for block in self.transformer.h:
            x = block(x)
        if targets is not None and not return_hidden:
            return self.head_loss(x, targets)
        hidden = self.transformer.ln_f(x)
        logits = self.lm_head(hidden)
        if return_hidden:  # (logits, last hidden state): distillation's cosine loss (training/trainer/distill.py)
            return logits, hidden
        return logits

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm, the head and the mean cross-entropy: one function, so that a compile of it
        alone (training/compile_cache/regions.py) still fuses the vocabulary-sized matmul with the loss."""
        logits = self.lm_head(self.transformer.ln_f(x))
        # the loss in at least fp32, whatever autocast computed the logits in
        flat = logits.view(-1, logits.size(-1)).to(torch.promote_types(logits.dtype, torch.float32))
        if torch.is_grad_enabled() and not torch.compiler.is_compiling():
            # eager: the one-pass backward (training/model/loss.py); compiled: inductor fuses F.cross_entropy
            return cross_entropy(flat, targets.view(-1))
        return F.cross_entropy(flat, targets.view(-1))

    def to_hf(self):
        """The same weights as a transformers GPT2LMHeadModel (for export and generation)."""
        from transformers import GPT2LMHeadModel

        config = self.config
        config._attn_implementation = "sdpa"
        hf = GPT2LMHeadModel(config)
        hf.load_state_dict(self.state_dict())
        return hf.to(self.transformer.wte.weight.device)
