"""`prepare --data` pointed at what prepare or train wrote: refused as such, not as text without a text column."""

from __future__ import annotations

import json
import re
from pathlib import Path

from training.data.dataset import META_FILE
from trainstack.contract.errors import UserError

MAX_JSON_BYTES = 16 * 2**20  # meta.json and run_config.json are small; a larger file (or a device) is not ours


def small_json(path: Path):
    """The JSON in a regular file of at most MAX_JSON_BYTES, else None (a device or a FIFO is never read)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def is_prepared_data(folder: Path) -> bool:
    """A directory `prepare` wrote: its meta.json is prepare's (a JSON object with the splits), not any
    file of that name."""
    meta = small_json(folder / META_FILE)
    return isinstance(meta, dict) and "splits" in meta


def readable_by_prepare(meta) -> bool:
    """What prepare reads of an earlier meta.json in its --out: the tokenizer's spec and identity and the
    train split's tokens (anything less is another tool's file, or one damaged past reading)."""
    tokenizer = meta.get("tokenizer") if isinstance(meta, dict) else None
    splits = meta.get("splits") if isinstance(meta, dict) else None
    return (isinstance(tokenizer, dict) and isinstance(tokenizer.get("spec"), str)
            and isinstance(tokenizer.get("spec_identity"), str) and isinstance(splits, dict)
            and isinstance(splits.get("train"), dict) and isinstance(splits["train"].get("tokens"), int))


def looks_like_a_run(folder: Path) -> bool:
    """Something only train leaves: a checkpoint of its making, a folder checkpoints/step_XXXXXXXX (eight
    digits) holding its manifest.json (a damaged run_config.json beside one is still this run's)."""
    checkpoints = folder / "checkpoints"
    if not checkpoints.is_dir() or checkpoints.is_symlink():
        return False
    return any(re.fullmatch(r"step_\d{8}", p.name) and (p / "manifest.json").is_file() for p in checkpoints.iterdir())


def is_run_dir(folder: Path) -> bool:
    """A directory `train` wrote: its run_config.json is train's (the model and the tokenizer it was
    started with), not another tool's file of that name."""
    config = small_json(folder / "run_config.json")
    return isinstance(config, dict) and {"model", "tokenizer_fingerprint"} <= config.keys()


def check_not_text_of_ours(src: str) -> None:
    """A --data that is the output of prepare or train: their files would be read as text columns
    (tokenizer.json, metrics.jsonl) and refused for a reason that says nothing of the mix-up."""
    folder = Path(src)
    if any(ch in src for ch in "*?[") or not folder.is_dir():
        return
    if is_prepared_data(folder):
        raise UserError(f"--data {src} is prepared data (its {META_FILE} is prepare's), not text; train on it with "
                        f"`python -m training train --data {src}`, or point --data at the text it was made from")
    if is_run_dir(folder):
        raise UserError(f"--data {src} is a training run's directory (it holds run_config.json), not text; point "
                        "--data at text files")


def check_not_inside_a_run(out: Path, flag: str) -> None:
    """An --out inside a training run's directory (at any depth): that run rotates its checkpoints and
    replaces its export, and whatever lies inside them goes with them."""
    for folder in out.resolve().parents:
        if is_run_dir(folder):
            raise UserError(f"{flag} {out} is inside the run directory {folder}, which that run's checkpoint "
                            "rotation and export replace; give it a directory of its own, outside it (e.g. next "
                            "to it)")
