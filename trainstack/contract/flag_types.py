"""The argparse types of every flag: a number in range (finite, with its bounds in the message), a path.

Shared by the core commands (cli.py) and the integrations' flags (cli_integrations.py).
"""

from __future__ import annotations

import argparse
import math

SEED_MAX = 2**32 - 1  # numpy's seeds are 32-bit
COUNT_MAX = 2**62  # far beyond any real run, and still an int64 everywhere it ends up


def _bound(value: float, limit: float, open_: bool, above: bool) -> bool:
    if above:
        return value > limit if open_ else value >= limit
    return value < limit if open_ else value <= limit


def number(kind: type, low: float | None = None, high: float | None = None, *, low_open: bool = False,
           high_open: bool = False):
    """An argparse type: an int or a finite float within [low, high] (or open ends), else one clear line."""
    def show(bound: float) -> str:
        return str(bound) if kind is int else f"{bound:g}"

    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {show(low)}")
    if high is not None and high != COUNT_MAX:  # a bound nobody reaches is noise in the message
        parts.append(f"{'<' if high_open else '<='} {show(high)}")
    noun = "a whole number" if kind is int else "a finite number"
    wanted = noun + (f" {' and '.join(parts)}" if parts else "")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wanted}, got '{text}'") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got '{text}'")
        if low is not None and not _bound(value, low, low_open, above=True):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
        if high is not None and not _bound(value, high, high_open, above=False):
            raise argparse.ArgumentTypeError(f"must be {noun} {'<' if high_open else '<='} {show(high)}, got {text}")
        return value

    parse.kind = kind.__name__
    parse.__name__ = wanted
    return parse


positive_int = number(int, 1, COUNT_MAX)
non_negative_int = number(int, 0, COUNT_MAX)
seed = number(int, 0, SEED_MAX)
probability = number(float, 0.0, 1.0, high_open=True)  # dropout, Adam betas
fraction = number(float, 0.0, 1.0, low_open=True, high_open=True)
learning_rate = number(float, 0.0, 1.0, low_open=True)  # AdamW beyond lr 1 only diverges
non_negative = number(float, 0.0)


def path(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a path, got an empty string")
    return text
