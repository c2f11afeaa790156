"""Expected tokens per second of one GPU for a model shape: documented where a peer published a run,
derived from the GPU's peak FLOPs and an assumed MFU otherwise (throughput.yaml says which)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainstack.contract.shapes import (
    PRESETS,
    ModelShape,
    flops_per_token,
    gpt2_params_without_positions,
    peak_flops_of,
)

THROUGHPUT_FILE = Path(__file__).with_name("throughput.yaml")


@functools.cache
def _table() -> dict[str, Any]:
    return yaml.safe_load(THROUGHPUT_FILE.read_text())


@dataclass(frozen=True)
class Throughput:
    tokens_per_second_per_gpu: float
    kind: str  # "documented" or "derived"
    basis: str  # one line: where the figure comes from


def model_flops_per_token(shape: ModelShape) -> float:
    return flops_per_token(gpt2_params_without_positions(shape), shape.n_layer, shape.n_embd, shape.block_size)


def expected_throughput(gpu: str, preset: str, shape: ModelShape) -> Throughput | None:
    """Tokens/s of one `gpu` (a name like "A100") training `shape`; None for a GPU with no known peak."""
    table = _table()
    for entry in table["documented"]:
        if entry["gpu"] == gpu and entry["preset"] == preset and PRESETS.get(preset) == shape:
            return Throughput(float(entry["tokens_per_second_per_gpu"]), "documented",
                              f"documented: {entry['source'].split(':')[0]}")
    peak = peak_flops_of(gpu)
    if peak is None:
        return None
    mfu = float(table["assumed_mfu"])
    return Throughput(mfu * peak / model_flops_per_token(shape), "derived",
                      f"derived: {mfu:.0%} MFU x {peak / 1e12:g} TFLOP/s peak")
