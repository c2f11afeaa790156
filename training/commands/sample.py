"""`python -m training sample`: generate text from an export or from a run's newest checkpoint."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import torch

from training.checkpoints import checkpoint
from training.model.build import MODEL_CONFIG, create_model, load_model_config
from trainstack.contract.errors import UserError
from trainstack.contract.log import warn


def _reason(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # load_state_dict: "Error(s) in loading ...:" then the first error
        lines = [f"{lines[0]} {lines[1]}"]
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


def _load_export(path: Path):
    """An export's model and tokenizer; a damaged one (truncated weights, a config that is not JSON) is a
    UserError. transformers, safetensors and the tokenizers library each raise their own types."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    _check_export_config(path)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its table of mismatched weights: the one line below says it
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - any of them means: this export cannot be loaded
        # transformers' own words point at the report that is silenced above
        reason = ("its config.json does not match the shapes of its weights" if "ignore_mismatched_sizes" in str(exc)
                  else _reason(exc))
        raise UserError(f"the export {path} is damaged ({reason})") from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    # Weights that config.json does not describe would be left randomly initialised: a model that runs
    # and is meaningless.
    unmatched = sorted({*info.get("missing_keys", ()), *info.get("unexpected_keys", ()),
                        *(k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", ()))})
    if unmatched:
        raise UserError(f"the export {path} is damaged (its config.json does not match its weights: "
                        f"{len(unmatched)} tensor(s) missing, extra or of another shape, e.g. {unmatched[0]})")
    if len(tokenizer) < 2:
        # Without tokenizer.json, AutoTokenizer builds an empty one from tokenizer_config.json alone: every
        # text would be 0 tokens, and a sample empty.
        raise UserError(f"the export {path} is damaged (its tokenizer has {len(tokenizer)} token(s): tokenizer.json "
                        "is missing or empty)")
    return model, tokenizer


def _check_export_config(path: Path) -> None:
    """train exports GPT-2 (model_type gpt2); another model_type in config.json would load a different,
    randomly initialised architecture. A config that is not JSON is left to from_pretrained's error."""
    import json

    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if isinstance(config, dict) and model_type != "gpt2":
        raise UserError(f"the export {path} is damaged (config.json says model_type {model_type!r}; "
                        "train exports 'gpt2')")


def _load_checkpoint(path: Path):
    """The run's model from its newest intact checkpoint that loads into it; newer ones that pass their
    checksums but do not fit (rewritten by hand or by another program) are reported and skipped, as
    damaged ones are. Read only: nothing is moved or deleted."""
    from transformers import AutoTokenizer

    latest = checkpoint.latest_valid(path)
    if latest is None:
        raise UserError(f"{path} has no intact checkpoint yet; train longer or pass an export directory")
    try:
        # The architecture `train` saved at the run's start (activation, dropout, ...), not a rebuild
        model = create_model(load_model_config(path / MODEL_CONFIG))
        tokenizer = AutoTokenizer.from_pretrained(path / "tokenizer")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged model_config.json or tokenizer/
        raise UserError(f"cannot load the model configuration or tokenizer of {path} ({_reason(exc)}); "
                        "evaluate its export instead, or copy them back from the run's snapshot") from exc
    misfits = []
    for candidate in checkpoint.listed(path):
        if candidate.step > latest.step or (candidate.step < latest.step and checkpoint.verify(candidate.path)):
            continue  # damaged (latest_valid reported the newer ones)
        try:
            model.load_state_dict(candidate.load()["model"])
        except Exception as exc:  # noqa: BLE001 - unpickling, a missing key, wrong shapes
            misfits.append(f"{candidate.path.name}: {_reason(exc)}")
            warn(f"checkpoint {candidate.path} passes its checksums but does not fit the run's model "
                 f"({_reason(exc)}); trying the previous one (move it aside to stop this warning)")
            continue
        return model, tokenizer, f"checkpoint of step {candidate.step} ({candidate.path})"
    raise UserError(f"no checkpoint of {path} fits the run's model ({'; '.join(misfits[:2])}); they stay untouched; "
                    "evaluate its export instead, or move the checkpoints that do not fit aside once an earlier one "
                    "is back")


def load_for_generation(path: Path):
    """(model, tokenizer) from an export directory, a RUN_DIR's export, or a RUN_DIR's newest checkpoint.

    A RUN_DIR whose export is damaged falls back to its newest intact checkpoint, with a warning."""
    model, tokenizer, _ = load_with_source(path)
    return model, tokenizer


def load_with_source(path: Path):
    """load_for_generation's (model, tokenizer), and which model that is: the export, or checkpoint step N."""
    is_run = (path / "run_config.json").is_file()
    if (path / "export" / "config.json").is_file():
        try:
            return (*_load_export(path / "export"), f"the export {path / 'export'}")
        except UserError as exc:
            if not is_run or checkpoint.latest_valid(path, announce=False) is None:
                raise UserError(f"{exc}; and {path} has no intact checkpoint to fall back to; re-export by running "
                                "train on the run again, or pass another model") from None
            warn(f"{exc}; using the newest intact checkpoint of {path} instead")
            return _load_checkpoint(path)
    if (path / "config.json").is_file():
        try:
            return (*_load_export(path), f"the export {path}")
        except UserError as exc:
            raise UserError(f"{exc}; use its run directory (its checkpoints) or export it again by running train "
                            "on that run") from None
    if is_run:
        return _load_checkpoint(path)
    raise UserError(f"{path} is neither a run directory nor a model export; pass RUN_DIR or RUN_DIR/export")


def prompt_text(prompt: str) -> str:
    """--prompt as text: bytes that are not UTF-8 arrive as surrogates (Python's argv decoding) and no
    tokenizer can encode them."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(f"--prompt holds bytes that are not UTF-8 text (at character {exc.start}); pass the prompt "
                        "as UTF-8") from None
    return prompt


def sample(args: argparse.Namespace) -> list[str]:
    prompt_text(args.prompt)  # before the model loads
    model, tokenizer, source = load_with_source(Path(args.model))
    # on stderr: stdout is the samples alone, for a pipe or a file
    print(f"[trainstack] sampling from {source}", file=sys.stderr, flush=True)
    model.eval()
    torch.manual_seed(args.seed)
    ids = tokenizer(prompt_text(args.prompt), add_special_tokens=False)["input_ids"] or [tokenizer.eos_token_id]
    prompt = torch.tensor([ids] * args.num_samples)
    out = generate(model, prompt, args.max_new_tokens, args.temperature, args.top_k, vocab_size=len(tokenizer))
    return [tokenizer.decode(row, skip_special_tokens=True) for row in out.tolist()]


@torch.no_grad()
def generate(model, ids: torch.Tensor, max_new_tokens: int, temperature: float, top_k: int,
             vocab_size: int) -> torch.Tensor:
    """Sample `max_new_tokens` after `ids` (batch x length), whatever the length.

    The model sees at most its n_positions newest tokens: a longer prompt or output slides the
    window (as nanoGPT does). The key/value cache is used while everything fits in the window;
    once the window slides, positions shift and each step reads the window afresh.
    temperature 0 picks the likeliest token; top_k 0 keeps the whole vocabulary. Ids the
    tokenizer cannot decode (the embedding table is padded for speed) are never picked.
    """
    window = model.config.n_positions
    # transformers 5 names the key/value cache `cache` (argument and output) and warns on each use of the
    # old name, past_key_values, which 4.x (pyproject allows >=4.46) still needs.
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    past = None
    for _ in range(max_new_tokens):
        length = ids.size(1)
        if past is not None and length <= window:
            out = model(input_ids=ids[:, -1:], use_cache=True, **{name: past})
        else:
            out = model(input_ids=ids[:, -window:], use_cache=length < window)
        past = out[name] if length < window else None
        logits = out.logits[:, -1, :vocab_size].double()  # float64: any finite temperature divides safely
        if temperature == 0:
            token = logits.argmax(dim=-1, keepdim=True)
        else:
            # the largest logit becomes 0 first, so a tiny temperature cannot overflow to inf - inf
            logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
            if 0 < top_k < logits.size(-1):
                kth = torch.topk(logits, top_k).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            token = torch.multinomial(torch.softmax(logits, dim=-1), 1)
        ids = torch.cat([ids, token], dim=1)
    return ids
