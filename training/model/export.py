"""RUN_DIR/export: a Hugging Face model + tokenizer directory (from_pretrained / pipeline ready)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import struct
import uuid
from pathlib import Path

import torch

from trainstack.contract.errors import UserError, storage_error, storage_failure


def export_model(model: torch.nn.Module, run_dir: Path) -> Path:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run_dir / "tokenizer")
    model = copy.deepcopy(model).to("cpu")
    # Training pads the embedding table to a multiple of 64 for speed; the export matches the tokenizer
    # so generation can never produce an id the tokenizer cannot decode.
    if model.config.vocab_size > len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    model.config.use_cache = True
    model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id

    target = run_dir / "export"
    staging = run_dir / f".export-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)  # the previous export, if any, was never touched
        cause = storage_failure(exc)
        if cause is None:
            raise
        kept = "the previous export is untouched" if target.exists() else "the checkpoints are untouched"
        raise storage_error(cause, f"the export to {target}", f"{kept}; `train` again only re-exports") from exc
    previous = run_dir / f".export-previous-{uuid.uuid4().hex[:8]}"
    try:
        if target.exists():
            os.rename(target, previous)
        os.rename(staging, target)
    except OSError as exc:  # export/ a mount point (EBUSY), a directory someone made read-only
        if previous.exists() and not target.exists():
            os.rename(previous, target)  # the previous export back where it was
        shutil.rmtree(staging, ignore_errors=True)
        kept = "the previous export is untouched" if target.exists() else "the checkpoints are untouched"
        raise UserError(f"cannot put the new export in place at {target} ({exc.strerror or exc}); {kept}; fix that "
                        "(a mount point or a read-only export/ cannot be replaced), then `train` again only "
                        "re-exports") from None
    shutil.rmtree(previous, ignore_errors=True)
    return target


def looks_intact(export: Path) -> bool:
    """A cheap look at an export, without loading the model: config.json and tokenizer.json are JSON
    objects (config.json naming gpt2), and model.safetensors' header describes exactly the bytes that
    follow it (a truncated or overwritten file does not). The format: an 8-byte little-endian header
    length, a JSON header with each tensor's data_offsets, then the data (huggingface/safetensors
    README, "Format"; headers over 100 MB are refused: SafeTensorError::HeaderTooLarge, docs.rs
    safetensors 0.4.2)."""
    try:
        config = json.loads((export / "config.json").read_text(encoding="utf-8"))
        tokenizer = json.loads((export / "tokenizer.json").read_text(encoding="utf-8"))
        weights = export / "model.safetensors"
        with open(weights, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > 100 * 2**20:  # safetensors' own limit on the header
                return False
            header = json.loads(f.read(length).decode("utf-8"))
        ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
        return (isinstance(config, dict) and config.get("model_type") == "gpt2" and isinstance(tokenizer, dict)
                and bool(ends) and 8 + length + max(ends) == weights.stat().st_size)
    except (OSError, ValueError, struct.error, TypeError, KeyError, IndexError, AttributeError):
        return False
