"""RUN_DIR/metrics.jsonl: what a run recorded, one JSON object per line, appended by rank 0.

Two kinds of line:
    {"step": 40, "tokens": 10240, "tag": "train/loss", "value": 5.12, "time": 1700000000.0}
    {"event": "start", "step": 0, "world_size": 2, ..., "time": ...}   (also "end", "upload", ...)

A resumed run appends to the same file, so a step may appear twice (logged, then lost with the
process, then trained again): readers keep the last value of each (tag, step). A line cut short by
a killed process is skipped. The plot (training/observability/plots.py) and `python -m training report` read it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainstack.contract.log import warn

METRICS = "metrics.jsonl"


class MetricsFile:
    """Appends records; each write opens the file, so the upload thread can still log after the loop's end.

    A record that cannot be written (full or read-only volume) is reported once and dropped: the
    metrics are a log, never a reason to stop training.
    """

    def __init__(self, run_dir: Path):
        self.path = run_dir / METRICS
        self._lock = threading.Lock()
        self._failed = False

    def scalar(self, tag: str, value: float, step: int, tokens: int) -> None:
        self._write({"step": step, "tokens": tokens, "tag": tag, "value": float(value)})

    def event(self, kind: str, **fields) -> None:
        self._write({"event": kind, **fields})

    def _write(self, record: dict) -> None:
        record["time"] = round(time.time(), 3)
        line = json.dumps(record) + "\n"
        with self._lock:
            if self._failed:
                return
            try:
                with open(self.path, "a") as f:
                    f.write(line)
            except OSError as exc:
                self._failed = True
                warn(f"cannot write {self.path} ({exc.strerror or exc}); training goes on without it")


@dataclass
class RunLog:
    """metrics.jsonl, parsed: series[tag] = [(step, tokens, value)] sorted by step, and the events."""

    series: dict[str, list[tuple[int, int, float]]] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    timeline: list[tuple[str, float]] = field(default_factory=list)  # (event or "scalar", time) in file order

    def last_event(self, kind: str) -> dict | None:
        return next((e for e in reversed(self.events) if e["event"] == kind), None)

    def wall_seconds(self) -> float:
        """Time spent in the run's processes: from each start to the last line written in that session."""
        total, began, last = 0.0, None, None
        for kind, t in self.timeline:
            if kind == "start":
                if began is not None and last is not None:
                    total += last - began
                began, last = t, t
            else:
                last = t
        if began is not None and last is not None:
            total += last - began
        return total


def read(run_dir: Path) -> RunLog:
    log = RunLog()
    values: dict[str, dict[int, tuple[int, float]]] = {}
    path = Path(run_dir) / METRICS
    # errors="replace": bytes that are not UTF-8 (a damaged or overwritten file) spoil only their line
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a killed process, or damage
            if not isinstance(record, dict):
                continue
            try:
                if "event" in record:
                    timeline = (str(record["event"]), float(record.get("time", 0.0)))
                    log.events.append(record)
                    log.timeline.append(timeline)
                elif {"tag", "step", "value"} <= set(record):
                    point = (int(record.get("tokens", 0)), float(record["value"]))
                    step, time = int(record["step"]), float(record.get("time", 0.0))
                    values.setdefault(str(record["tag"]), {})[step] = point
                    log.timeline.append(("scalar", time))
            except (TypeError, ValueError, OverflowError):
                continue  # a record whose fields are not the numbers train writes: damage, skipped
    for tag, by_step in values.items():
        log.series[tag] = [(s, tok, v) for s, (tok, v) in sorted(by_step.items())]
    return log


def describe_tokens(tokens: int, block_size: int | None) -> str:
    """'128 tokens (1 window of 128)': what a validation loss was measured on; one window says little."""
    if not block_size:
        return f"{tokens:,} tokens"
    windows = tokens // block_size
    return f"{tokens:,} tokens ({windows:,} window{'' if windows == 1 else 's'} of {block_size:,})"
