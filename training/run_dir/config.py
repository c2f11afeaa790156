"""RUN_DIR/run_config.json: the settings a run's checkpoints depend on, fixed at its first start.

Resuming with another model shape, tokenizer or global batch would silently produce garbage (or
crash deep inside load_state_dict), so a mismatch is refused up front with the way out.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from training.data.dataset import DataMeta
from trainstack.contract.errors import UserError
from trainstack.contract.log import info
from trainstack.contract.shapes import PRESETS

FILE = "run_config.json"


@dataclass(frozen=True)
class RunConfig:
    model: dict
    block_size: int
    tokenizer_fingerprint: str
    global_batch_size: int
    seed: int
    init_from: str

    def to_dict(self) -> dict:
        return asdict(self)


def shape_flags(model: dict) -> str:
    """The fewest flags that give MODEL's shape: a preset that matches, else one plus its overrides."""
    names = ("n_layer", "n_embd", "n_head", "block_size")

    def overrides(preset: str) -> list[str]:
        shape = asdict(PRESETS[preset])
        return [f"--{n.replace('_', '-')} {model[n]}" for n in names if n in model and shape[n] != model[n]]

    best = min(sorted(PRESETS), key=lambda preset: len(overrides(preset)))
    return " ".join([f"--preset {best}", *overrides(best)])


def _resume_advice(existing: RunConfig, wanted: RunConfig) -> str:
    """How to resume the run there: the flags of its shape (a pretrained start: its --init-from)."""
    if existing.init_from and not existing.init_from.startswith("distill:"):
        return f"resume it with --init-from {existing.init_from}"
    if existing.model.get("vocab_size") != wanted.model.get("vocab_size"):
        return "resume it with the --data it was trained on (another vocabulary)"
    return f"resume it with {shape_flags(existing.model)} (the shape it was started with)"


def load_or_create_run_config(run_dir: Path, wanted: RunConfig, explicit_global_batch: int | None,
                              write: bool, resuming: bool = True, restored_from: str | None = None) -> RunConfig:
    """The run's settings: those of run_config.json when there is a checkpoint to resume (`resuming`),
    else this start's (`restored_from`: the --snapshot-uri an empty RUN_DIR was just restored from). A run_config.json without any checkpoint is the trace of a start that was killed
    before it saved anything (the out-of-memory killer, kill -9): it binds nothing and is replaced."""
    path = run_dir / FILE
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir} is a file, not a directory; pick another --out")
    if (path.exists() or path.is_symlink()) and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise UserError(f"{path} is {what}, not the run's settings file train writes there; remove it "
                        "(the checkpoints are untouched) or pick another --out")
    if path.is_file() and not resuming:
        _announce_replaced(path, wanted)
    if not path.is_file() or not resuming:
        if write:
            run_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(wanted.to_dict(), indent=1))
            os.replace(tmp, path)
        return wanted
    try:
        # ValueError: not JSON, or not UTF-8; TypeError: not an object, or other fields than a RunConfig's
        existing = RunConfig(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(f"{path} is unreadable ({exc}); use a new --out (the checkpoints there are untouched)") from exc
    wrong = _wrong_types(existing)
    if wrong:
        # compared as they are, they would give "trained with --block-size 64, not 64"
        raise UserError(f"{path} is damaged ({wrong}); use a new --out (the checkpoints there are untouched)")
    # A run restored into an empty --out came from --snapshot-uri: that is what holds the other run.
    where = f"--snapshot-uri {restored_from} (restored into the empty {run_dir})" if restored_from else run_dir
    fresh = "a --snapshot-uri of this run's own" if restored_from else "a new --out"
    if existing.model != wanted.model:
        diff = ", ".join(f"{k} {existing.model.get(k)} there vs {wanted.model.get(k)} now"
                         for k in sorted(set(existing.model) | set(wanted.model))
                         if existing.model.get(k) != wanted.model.get(k))
        raise UserError(f"{where} holds a run with a different model configuration ({diff}); "
                        f"{_resume_advice(existing, wanted)}, or use {fresh}")
    if existing.block_size != wanted.block_size:
        raise UserError(f"{where} was trained with --block-size {existing.block_size}, not {wanted.block_size}; "
                        f"use the same --block-size or {fresh}")
    if existing.tokenizer_fingerprint != wanted.tokenizer_fingerprint:
        raise UserError(f"{where} was trained on data from a different tokenizer than --data uses; prepare the "
                        f"data with the run's tokenizer (RUN_DIR/tokenizer) or use {fresh}")
    if existing.init_from != wanted.init_from:
        if existing.init_from.startswith("distill:") or wanted.init_from.startswith("distill:"):
            def said(start: str) -> str:
                return (f"--distill-from {start[len('distill:'):]}" if start.startswith("distill:")
                        else f"--init-from {start}" if start else "neither --init-from nor --distill-from")
            raise UserError(f"{where} holds a run started with {said(existing.init_from)}, but this start has "
                            f"{said(wanted.init_from)}; resume it with the same flag, or use {fresh}")
        raise UserError(f"{where} fine-tunes --init-from '{existing.init_from}', not '{wanted.init_from}'; "
                        f"use the same --init-from or {fresh}")
    if explicit_global_batch is not None and explicit_global_batch != existing.global_batch_size:
        raise UserError(f"{where} runs with --global-batch-size {existing.global_batch_size}; changing it "
                        f"mid-run changes the data order; drop the flag or use {fresh}")
    return existing


def _wrong_types(config: RunConfig) -> str:
    """The fields of a loaded run_config.json that are not of the type train writes ("" when none)."""
    expected = {"model": dict, "block_size": int, "tokenizer_fingerprint": str, "global_batch_size": int,
                "seed": int, "init_from": str}
    return ", ".join(f"{name} is {getattr(config, name)!r}, not {kind.__name__}" for name, kind in expected.items()
                     if not isinstance(getattr(config, name), kind) or isinstance(getattr(config, name), bool))


def _announce_replaced(path: Path, wanted: RunConfig) -> None:
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        before = None
    if before == wanted.to_dict():
        return
    changed = ", ".join(f"{k} {before.get(k)} -> {v}" for k, v in wanted.to_dict().items()
                        if before.get(k) != v) if isinstance(before, dict) else "unreadable before"
    info(f"{path} is from an earlier start that saved no checkpoint; it is replaced with this start's settings "
         f"({changed})")


def check_tokenizer_matches_model(data: DataMeta, model_config, init_from: str) -> None:
    """Pretrained weights only make sense with token ids from the tokenizer they were trained with."""
    from training.data import tokenizer

    fix = f"re-run prepare with --tokenizer {init_from}"
    try:
        source = tokenizer.load(init_from, "--init-from")
    except UserError:
        source = None  # weights without tokenizer files: judge by what we know of the data
    if source is not None:
        if tokenizer.fingerprint(source) != data.tokenizer_fingerprint:
            raise UserError(f"{data.root} was prepared with a different tokenizer than {init_from}; {fix}")
    elif data.raw["tokenizer"].get("trained"):
        raise UserError(f"{data.root} uses a tokenizer trained on your corpus, which --init-from {init_from} "
                        f"does not understand; {fix}")
    if data.vocab_size > model_config.vocab_size:
        raise UserError(f"{data.root} was tokenized with a {data.vocab_size}-token vocabulary but --init-from "
                        f"{init_from} has {model_config.vocab_size} embeddings; {fix}")
