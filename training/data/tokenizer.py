"""GPT-2 byte-level BPE tokenizers: load one (local directory or hub name) or train one offline."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

from trainstack.contract.cli import MIN_TRAINED_VOCAB
from trainstack.contract.errors import UserError

EOS = "<|endoftext|>"


def load(name_or_path: str, flag: str = "--tokenizer"):
    from transformers import GPT2TokenizerFast

    from training.model import hub

    target, local_only = hub.resolve(name_or_path, flag, ("tokenizer.json", "vocab.json"))
    try:
        tokenizer = GPT2TokenizerFast.from_pretrained(target, local_files_only=local_only)
    except Exception as exc:  # noqa: BLE001 - the Rust tokenizers library raises a bare Exception on a damaged file
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"cannot load tokenizer '{name_or_path}' ({reason}); pass a "
                        "directory with GPT-2 BPE files (vocab.json + merges.txt or tokenizer.json), a hub name "
                        "when online, or --tokenizer train:VOCAB to train one on the corpus offline") from exc
    if len(tokenizer) < MIN_TRAINED_VOCAB:
        # transformers builds an empty tokenizer from a directory without tokenizer files
        raise UserError(f"'{name_or_path}' holds no GPT-2 BPE tokenizer files (vocab.json + merges.txt or "
                        "tokenizer.json); pass a tokenizer directory or --tokenizer train:VOCAB")
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
