"""Model shapes and FLOP arithmetic in plain Python, shared by training and by the Pulumi program.

Nothing here imports torch: the Pulumi program (trainstack/infra/cost) reads the presets and FLOP counts to
estimate a run's cost, and it runs in a venv without torch.

FLOPs per token follow the PaLM paper (appendix B), as nanoGPT does:
    flops_per_token = 6 * N + 12 * n_layer * n_embd * block_size
where N is the parameter count without the position embeddings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from trainstack.contract.errors import UserError

GPT2_VOCAB = 50257  # the GPT-2 BPE tokenizer's vocabulary


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_embd: int
    n_head: int
    block_size: int


# The four GPT-2 sizes (124M, 350M, 774M, 1.5B) plus `tiny` for CPUs and tests.
PRESETS: dict[str, ModelShape] = {
    "tiny": ModelShape(n_layer=2, n_embd=128, n_head=4, block_size=128),
    "gpt2": ModelShape(n_layer=12, n_embd=768, n_head=12, block_size=1024),
    "gpt2-medium": ModelShape(n_layer=24, n_embd=1024, n_head=16, block_size=1024),
    "gpt2-large": ModelShape(n_layer=36, n_embd=1280, n_head=20, block_size=1024),
    "gpt2-xl": ModelShape(n_layer=48, n_embd=1600, n_head=25, block_size=1024),
}


def resolve_shape(preset: str, n_layer=None, n_embd=None, n_head=None, block_size=None) -> ModelShape:
    if preset not in PRESETS:
        raise UserError(f"unknown preset '{preset}'; choose one of {', '.join(sorted(PRESETS))}")
    base = asdict(PRESETS[preset])
    for key, value in (("n_layer", n_layer), ("n_embd", n_embd), ("n_head", n_head), ("block_size", block_size)):
        if value is not None:
            base[key] = value
    shape = ModelShape(**base)
    if shape.n_embd % shape.n_head:
        raise UserError(f"--n-embd {shape.n_embd} is not divisible by --n-head {shape.n_head}; "
                        "pick sizes where n_embd / n_head is a whole number")
    return shape


# Dense bf16 tensor-core peak FLOP/s per GPU (fp16 where the GPU has no bf16), from vendor datasheets.
# Matched by substring of the GPU's name (torch.cuda.get_device_name(), or a cloud's GPU name), most
# specific first.
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


def peak_flops_of(gpu_name: str) -> float | None:
    for key, flops in PEAK_FLOPS:
        if key in gpu_name:
            return flops
    return None


def padded_vocab(vocab_size: int, multiple: int = 64) -> int:
    """Round the embedding table up (50257 -> 50304): matmuls on GPUs are faster on aligned sizes."""
    return ((vocab_size + multiple - 1) // multiple) * multiple


def gpt2_params_without_positions(shape: ModelShape, vocab_size: int = GPT2_VOCAB) -> int:
    """GPT-2's parameters without the position embeddings, input and output embeddings tied:
    the token embedding, per layer two LayerNorms, attention (qkv + proj) and the MLP, and the final LayerNorm."""
    d = shape.n_embd
    per_layer = 12 * d * d + 13 * d
    return padded_vocab(vocab_size) * d + shape.n_layer * per_layer + 2 * d


def flops_per_token(n_params_no_pos: int, n_layer: int, n_embd: int, block_size: int) -> float:
    return 6.0 * n_params_no_pos + 12.0 * n_layer * n_embd * block_size
