"""`prepare --data` pointed at what prepare or train wrote: refused as such, not as text without a text column."""

from __future__ import annotations

import json
from pathlib import Path

from training.data.dataset import META_FILE
from trainstack.contract.errors import UserError


def is_prepared_data(folder: Path) -> bool:
    """A directory `prepare` wrote: its meta.json is prepare's (a JSON object with the splits), not any
    file of that name."""
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "splits" in meta


def check_not_text_of_ours(src: str) -> None:
    """A --data that is the output of prepare or train: their files would be read as text columns
    (tokenizer.json, metrics.jsonl) and refused for a reason that says nothing of the mix-up."""
    folder = Path(src)
    if any(ch in src for ch in "*?[") or not folder.is_dir():
        return
    if is_prepared_data(folder):
        raise UserError(f"--data {src} is prepared data (its {META_FILE} is prepare's), not text; train on it with "
                        f"`python -m training train --data {src}`, or point --data at the text it was made from")
    if (folder / "run_config.json").is_file():
        raise UserError(f"--data {src} is a training run's directory (it holds run_config.json), not text; point "
                        "--data at text files")
