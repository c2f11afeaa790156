"""GPT-2 byte-level BPE tokenizers: load one (local directory or hub name) or train one offline."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

from trainstack.contract.cli import MIN_TRAINED_VOCAB
from trainstack.contract.errors import UserError

EOS = "<|endoftext|>"


def _fix(flag: str) -> str:
    """What to do about a tokenizer that does not load, for the flag it came from."""
    if flag == "--data":  # the tokenizer prepare saved in DATA_DIR: the prepared data is damaged
        return "the prepared data is damaged; re-run `python -m training prepare` into a new --out"
    files = "a directory with GPT-2 BPE files (vocab.json + merges.txt or tokenizer.json)"
    if flag == "--tokenizer":  # prepare can also train one
        return f"pass {files}, a hub name when online, or --tokenizer train:VOCAB to train one on the corpus offline"
    return f"pass {files}, or a hub name when online"


def _short(text: str, limit: int = 160) -> str:
    """The first line of `text`, cut at a word rather than inside one."""
    line = (text.splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."


def load(name_or_path: str, flag: str = "--tokenizer"):
    from pathlib import Path

    from transformers import GPT2TokenizerFast

    from training.model import hub

    target, local_only = hub.resolve(name_or_path, flag, ("tokenizer.json", "vocab.json"))
    if local_only and Path(target).is_file():  # transformers' own words for this are cut mid-sentence
        raise UserError(f"tokenizer '{name_or_path}' is a file, not a tokenizer directory; {_fix(flag)}")
    try:
        tokenizer = GPT2TokenizerFast.from_pretrained(target, local_files_only=local_only)
    except Exception as exc:  # noqa: BLE001 - the Rust tokenizers library raises a bare Exception on a damaged file
        reason = _short(str(exc)) or type(exc).__name__
        raise UserError(f"cannot load tokenizer '{name_or_path}' ({reason}); {_fix(flag)}") from exc
    if len(tokenizer) < MIN_TRAINED_VOCAB:
        # transformers builds an empty tokenizer from a directory without tokenizer files
        raise UserError(f"'{name_or_path}' holds no GPT-2 BPE tokenizer files (vocab.json + merges.txt or "
                        f"tokenizer.json); {_fix(flag)}")
    if tokenizer.eos_token_id is None:
        raise UserError(f"tokenizer '{name_or_path}' has no end-of-text token; use a GPT-2 style tokenizer")
    return tokenizer


def train(texts: Iterator[str], vocab_size: int):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                            show_progress=False)
    return GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, eos_token=EOS, bos_token=EOS, unk_token=EOS)


def fingerprint(tokenizer) -> str:
    """Identity of a tokenizer's vocabulary and merges (what token ids mean)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    identity = json.dumps({"model": spec.get("model"), "added": spec.get("added_tokens")}, sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()[:16]
