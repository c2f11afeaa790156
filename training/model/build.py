"""GPT-2 model construction: presets, custom sizes, or pretrained weights."""

from __future__ import annotations

from trainstack.contract.errors import UserError
from trainstack.contract.shapes import PRESETS, ModelShape, padded_vocab, resolve_shape  # noqa: F401 - torch-free, in the contract


def config_for(shape: ModelShape, vocab_size: int, dropout: float, eos_token_id: int):
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=padded_vocab(vocab_size), n_positions=shape.block_size, n_embd=shape.n_embd,
        n_layer=shape.n_layer, n_head=shape.n_head, resid_pdrop=dropout, embd_pdrop=dropout,
        attn_pdrop=dropout, bos_token_id=eos_token_id, eos_token_id=eos_token_id, use_cache=False,
        # GPT-2's own tanh-approximated GELU, computed by one fused kernel instead of several ops
        activation_function="gelu_pytorch_tanh",
    )


def create_model(config):
    """transformers' GPT2LMHeadModel (generation, export, the HF Trainer benchmark peer)."""
    from transformers import GPT2LMHeadModel

    config._attn_implementation = "sdpa"
    return GPT2LMHeadModel(config)


def create_gpt(config):
    """The model `train` trains (training/model/gpt.py): GPT2LMHeadModel's weights, a leaner step."""
    from training.model.gpt import GPT

    return GPT(config)


def load_pretrained(name_or_path: str, flag: str = "--init-from"):
    """Pretrained GPT-2 weights (hub name or local directory) in the model `train` trains; `flag` is
    the one the user gave it with (--init-from, or --distill-from for a teacher)."""
    from transformers import GPT2LMHeadModel

    from training.model import hub
    from training.model.gpt import unsupported

    target, local_only = hub.resolve(name_or_path, flag, ("config.json",))
    try:
        hf = GPT2LMHeadModel.from_pretrained(target, attn_implementation="sdpa", local_files_only=local_only)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load {flag} '{name_or_path}' ({str(exc).splitlines()[0]}); pass a local "
                        "directory with a GPT-2 checkpoint, or a hub name when the machine is online") from exc
    hf.config.use_cache = False
    problem = unsupported(hf.config)
    if problem:
        raise UserError(f"{flag} '{name_or_path}' uses {problem}, which training does not implement; "
                        "start from a standard GPT-2 checkpoint (gpt2, gpt2-medium, distilgpt2, or an export)")
    model = create_gpt(hf.config)
    model.load_state_dict(hf.state_dict())
    return model


def shape_of(config) -> dict:
    """The parts of a model configuration that a checkpoint's weights depend on."""
    return {"n_layer": config.n_layer, "n_embd": config.n_embd, "n_head": config.n_head,
            "block_size": config.n_positions, "vocab_size": config.vocab_size}


MODEL_CONFIG = "model_config.json"  # in RUN_DIR: the architecture, for resuming without the source model


def save_model_config(config, path) -> None:
    import os

    tmp = path.with_suffix(".tmp")
    config.to_json_file(tmp)
    os.replace(tmp, path)


def load_model_config(path):
    from transformers import GPT2Config

    config = GPT2Config.from_json_file(path)
    config.use_cache = False
    return config
