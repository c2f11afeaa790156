"""`--sweep lr=3e-4,6e-4,1e-3`: one job per point of a small grid, named after its values."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainstack.infra.config.train_args import train_keys
from trainstack.jobs.errors import UsageError

# A grid is a handful of points: more is a mistake (or a bill) more often than a plan.
MAX_POINTS = 16


@dataclass(frozen=True)
class Point:
    name: str  # NAME-lr-3e-4
    flags: tuple[str, ...]  # ("--lr", "3e-4")


def _slug(text: str) -> str:
    """A piece of a DNS-1123 label: lowercase letters, digits and single dashes ("1.5e-3" -> "1-5e-3")."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def _same_value(value: str) -> str | float:
    """What the trainer would read: 1e-3 and 0.001 are one number (two jobs of the same run, both billed)."""
    try:
        number = float(value)
    except ValueError:
        return value
    return number if number == number else value  # NaN is never equal to itself: compare its spelling


def _flag(key: str) -> str:
    flags = {flag.flag: flag for flag in train_keys().values()}
    by_camel = train_keys()
    flag = by_camel[key] if key in by_camel else flags.get(f"--{key.removeprefix('--')}")
    if flag is None:
        raise UsageError(f"--sweep {key}: not a flag of the trainer",
                         "sweep a flag of python -m training train, e.g. --sweep lr=3e-4,6e-4")
    if flag.kind == "bool":
        raise UsageError(f"--sweep {key}: {flag.flag} is a switch, not a value",
                         f"pass {flag.flag} after -- to all jobs, or submit with and without it")
    return flag.flag


def expand(name: str, sweeps: Sequence[str], trainer_flags: Sequence[str]) -> list[Point]:
    """The grid's points, in order; UsageError for a bad axis, a grid over MAX_POINTS or a name clash."""
    if not sweeps:
        return [Point(name=name, flags=())]
    given = {word.split("=", 1)[0] for word in trainer_flags}
    axes: list[tuple[str, list[str]]] = []
    for sweep in sweeps:
        key, sep, listed = sweep.partition("=")
        values = [v.strip() for v in listed.split(",")] if sep else []
        if not key or not values or any(not v for v in values):
            raise UsageError(f"--sweep {sweep!r}: expected KEY=V1,V2,...", "write it as --sweep lr=3e-4,6e-4,1e-3")
        flag = _flag(key)
        if flag in given or flag in {f for f, _ in axes}:
            raise UsageError(f"--sweep {key}: {flag} is set twice", f"give {flag} once: in one --sweep, not after --")
        odd = next((v for v in values if not v.isascii() or not v.isprintable()), None)
        if odd is not None:
            # The trainer reads "１e-3" (a fullwidth digit) as 1e-3, while the job's name would drop it.
            raise UsageError(f"--sweep {key}: {ascii(odd)} has characters other than printable ASCII",
                             "write the values in ASCII, e.g. --sweep lr=3e-4,6e-4")
        if len({_same_value(v) for v in values}) != len(values):
            raise UsageError(f"--sweep {key}: a value is listed twice (1e-3 and 0.001 are one value)",
                             "list each value once")
        axes.append((flag, values))
    size = 1
    for _, values in axes:
        size *= len(values)
    if size > MAX_POINTS:
        raise UsageError(f"--sweep: {size} jobs, more than the {MAX_POINTS} a sweep may submit",
                         "sweep fewer values (or submit several smaller sweeps)")
    points = []
    for combo in itertools.product(*(values for _, values in axes)):
        parts = [f"{_slug(flag)}-{_slug(value)}" for (flag, _), value in zip(axes, combo, strict=True)]
        flags = tuple(word for (flag, _), value in zip(axes, combo, strict=True) for word in (flag, value))
        points.append(Point(name="-".join([name, *parts]), flags=flags))
    names = [p.name for p in points]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise UsageError(f"--sweep: values give the same job name {clashes[0]}",
                         "list values that differ in letters or digits, not only in case or punctuation")
    return points
