"""`python -m training evaluate MODEL --data DATA`: perplexity of a model on held-out text.

MODEL: a run directory (its export, else its newest intact checkpoint), an export, or anything
`AutoModelForCausalLM.from_pretrained` loads (a local model directory; a hub name when online).
DATA: a prepared DATA_DIR (its validation split; the model must use the tokenizer it was prepared
with) or a text file, tokenized here with the model's tokenizer.

The text is cut into non-overlapping windows of --block-size + 1 tokens, as training's validation
does, so the numbers compare with the run's `val/loss`. Perplexity = exp(mean next-token loss).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training.commands.sample import load_for_generation
from training.data import tokenizer as tokenizers
from training.data.dataset import META_FILE, TokenWindows, load_meta, micro_batches
from training.elastic.distributed import pick_device
from trainstack.contract.errors import UserError
from trainstack.contract.paths import kind_of


def load_model(name_or_path: str):
    """(model, tokenizer) of a run, an export, a model directory or a hub name."""
    path = Path(name_or_path)
    if path.exists():
        return load_for_generation(path)
    if path.is_absolute() or name_or_path.startswith((".", "~")):
        raise UserError(f"{name_or_path} does not exist; pass RUN_DIR, RUN_DIR/export or a model directory")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.model import hub

    # a name neither cached nor reachable: one line in seconds, not transformers' retries (as --init-from)
    target, local_only = hub.resolve(name_or_path, "evaluate's MODEL", ("config.json",))
    try:
        return (AutoModelForCausalLM.from_pretrained(target, local_files_only=local_only),
                AutoTokenizer.from_pretrained(target, local_files_only=local_only))
    except (OSError, ValueError) as exc:
        raise UserError(f"{name_or_path} is not a run, an export or a model directory, and not a hub model this "
                        f"machine can load ({str(exc).splitlines()[0][:160]}); pass RUN_DIR, RUN_DIR/export or a "
                        "local model directory") from exc


class _ArrayWindows:
    """TokenWindows over token ids in memory (a tokenized text file)."""

    def __init__(self, ids: np.ndarray, block_size: int):
        self.ids, self.block_size = ids, block_size

    def __len__(self) -> int:
        return max(0, (len(self.ids) - 1) // self.block_size)

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.block_size
        rows = torch.from_numpy(np.stack([self.ids[i * b: i * b + b + 1] for i in indices]).astype(np.int64))
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def _windows(data: Path, tok, block_size: int, model_vocab: int) -> tuple[object, str]:
    if data.is_dir() and (data / META_FILE).is_file():
        meta = load_meta(data)
        if meta.vocab_size > model_vocab:  # as train refuses it: ids past the model's embedding table
            raise UserError(f"{data} has a vocabulary of {meta.vocab_size} tokens and the model {model_vocab}; "
                            "evaluate on a text file instead, or on data prepared with the model's tokenizer")
        if tokenizers.fingerprint(tok) != meta.tokenizer_fingerprint:
            raise UserError(f"{data} was prepared with a different tokenizer than the model's; evaluate on a text "
                            "file instead (it is tokenized with the model's tokenizer) or prepare the data with "
                            "--tokenizer pointing at the model")
        windows = TokenWindows(meta.shards("val"), meta.dtype, block_size)
        if len(windows) == 0:
            raise UserError(f"the validation split of {data} has {meta.split_tokens('val')} tokens, fewer than one "
                            f"window of {block_size + 1}; lower --block-size or prepare with a larger --val-fraction")
        return windows, f"validation split of {data}"
    if data.is_dir():
        raise UserError(f"{data} is a directory but not a prepared DATA_DIR (no {META_FILE}); pass a DATA_DIR "
                        "or a text file")
    if kind_of(data):
        raise UserError(f"--data {data} is {kind_of(data)}, not a file; save the text to a file first, or pass a "
                        "prepared DATA_DIR")
    if not data.is_file():
        raise UserError(f"--data {data} does not exist; pass a prepared DATA_DIR or a text file")
    try:
        text = data.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{data} is not UTF-8 text (byte {exc.start}); convert it, or prepare it with "
                        "`python -m training prepare --encoding ...` and evaluate on that DATA_DIR") from exc
    ids = np.asarray(tok(text, verbose=False)["input_ids"], dtype=np.int64)
    if len(ids) < 2:
        raise UserError(f"{data} holds {len(ids)} token(s); perplexity needs at least 2")
    windows = _ArrayWindows(ids, block_size)
    if len(windows) == 0:  # shorter than one block: one window of the whole text
        windows = _ArrayWindows(ids, len(ids) - 1)
    return windows, f"{data} ({len(ids):,} tokens)"


@torch.no_grad()
def perplexity(model, windows, batch_size: int, device: torch.device, max_windows: int | None = None) -> dict:
    model.to(device).eval()
    n = len(windows) if max_windows is None else min(len(windows), max_windows)
    total, tokens = 0.0, 0
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast(
        "cpu", enabled=False)
    for mb in micro_batches(list(range(n)), batch_size):
        x, y = windows.batch(mb)
        x, y = x.to(device), y.to(device)
        with autocast:
            logits = model(input_ids=x).logits
        total += F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1), reduction="sum").item()
        tokens += y.numel()
    loss = total / tokens
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "tokens": tokens, "windows": n}


def evaluate(args: argparse.Namespace) -> str:
    data = Path(args.data)
    if not data.exists():
        raise UserError(f"--data {data} does not exist; pass a prepared DATA_DIR or a text file")
    device = pick_device(args.device)
    model, tok = load_model(args.model)
    positions = model.config.n_positions
    block_size = args.block_size or min(positions, 1024)
    if block_size > positions:
        raise UserError(f"--block-size {block_size} exceeds the model's {positions} positions; use "
                        f"--block-size {positions} or less")
    windows, source = _windows(data, tok, block_size, model.config.vocab_size)
    result = perplexity(model, windows, args.batch_size, device, args.max_windows)
    result.update(model=args.model, data=source, block_size=windows.block_size)
    if args.json:
        return json.dumps(result)
    return (f"perplexity {result['perplexity']:.2f} (loss {result['loss']:.4f} nats per token) on "
            f"{result['tokens']:,} tokens in {result['windows']} window(s) of {windows.block_size} | "
            f"model {args.model} | data {source}")
