"""What a run says about itself as it starts, before the progress bar: where its parameter count comes
from, and a --max-steps that would pass over a small corpus hundreds of times."""

from __future__ import annotations

from training.data.dataset import DataMeta
from trainstack.contract.config import TrainConfig
from trainstack.contract.log import warn
from trainstack.contract.shapes import GPT2_VOCAB

GPT2_PADDED_VOCAB = 50304  # GPT-2's vocabulary padded to a multiple of 64 (bench's default)
# Passes over the training tokens from which the run mostly memorises them: worth a word before it starts.
MANY_PASSES = 100
SENSIBLE_PASSES = 10


def vocabulary_note(data_vocab: int) -> str:
    """Why `--preset gpt2` is not "124M" here: the token embedding is vocabulary x n_embd, and the data's
    own tokenizer is usually far smaller than GPT-2's."""
    if data_vocab in (GPT2_VOCAB, GPT2_PADDED_VOCAB):
        return ""
    return f" (with the data's {data_vocab:,}-token vocabulary; GPT-2's 124M and up count {GPT2_VOCAB:,})"


def warn_repeated_passes(data: DataMeta, cfg: TrainConfig, tokens_per_step: int) -> None:
    train_tokens = data.split_tokens("train")
    passes = cfg.optim.max_steps * tokens_per_step / max(train_tokens, 1)
    if passes < MANY_PASSES:
        return
    steps = max(1, SENSIBLE_PASSES * train_tokens // tokens_per_step)
    warn(f"--max-steps {cfg.optim.max_steps:,} x {tokens_per_step:,} tokens per step passes over the "
         f"{train_tokens:,} training tokens about {passes:,.0f} times: the model will memorise them and its "
         f"validation loss will rise; for about {SENSIBLE_PASSES} passes use --max-steps {steps:,}, or prepare more text")
