"""`python -m training sample`: generate text from an export or from a run's newest checkpoint."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from training import checkpoint
from training.errors import UserError
from training.model import MODEL_CONFIG, create_model, load_model_config


def load_for_generation(path: Path):
    """(model, tokenizer) from an export directory, a RUN_DIR's export, or a RUN_DIR's newest checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (path / "export" / "config.json").is_file():
        path = path / "export"
    if (path / "config.json").is_file():
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    if (path / "run_config.json").is_file():
        latest = checkpoint.latest_valid(path)
        if latest is None:
            raise UserError(f"{path} has no intact checkpoint yet; train longer or pass an export directory")
        # The architecture `train` saved at the run's start (activation, dropout, ...), not a rebuild
        model = create_model(load_model_config(path / MODEL_CONFIG))
        model.load_state_dict(latest.load()["model"])
        return model, AutoTokenizer.from_pretrained(path / "tokenizer")
    raise UserError(f"{path} is neither a run directory nor a model export; pass RUN_DIR or RUN_DIR/export")


def sample(args: argparse.Namespace) -> list[str]:
    model, tokenizer = load_for_generation(Path(args.model))
    model.eval()
    torch.manual_seed(args.seed)
    inputs = tokenizer(args.prompt, return_tensors="pt")
    if inputs["input_ids"].numel() == 0:
        inputs = {"input_ids": torch.tensor([[tokenizer.eos_token_id]])}
    texts = []
    with torch.no_grad():
        for _ in range(args.num_samples):
            out = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=True,
                                 temperature=args.temperature, top_k=args.top_k,
                                 pad_token_id=tokenizer.eos_token_id)
            texts.append(tokenizer.decode(out[0], skip_special_tokens=True))
    return texts
