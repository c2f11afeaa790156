"""RUN_DIR/loss.png: training and validation loss against steps and tokens, the learning rate below.

Drawn from RUN_DIR/metrics.jsonl (training/observability/run_log.py) with matplotlib's Agg backend (no display),
through the object API only, so it can run on a background thread while the training loop goes on.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from pathlib import Path

from training.observability import run_log

LOSS_PNG = "loss.png"


def draw(run_dir: Path) -> Path | None:
    """Write RUN_DIR/loss.png (atomically) from the run's metrics; None when nothing is recorded yet."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    run_dir = Path(run_dir)
    log = run_log.read(run_dir)
    train, val, lr = (log.series.get(t, []) for t in ("train/loss", "val/loss", "train/lr"))
    if not train and not val:
        return None
    start = log.last_event("start") or {}
    per_step = start.get("tokens_per_step") or _tokens_per_step(train + val)

    fig = Figure(figsize=(10, 7.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    if train:
        top.plot([s for s, _, _ in train], [v for _, _, v in train], color="tab:blue", lw=1.2,
                 label="training loss (mean over each logging window)")
    if val:
        best = min(val, key=lambda p: p[2])
        measured = (f" (on {run_log.describe_tokens(int(start['val_tokens']), start.get('block_size'))})"
                    if start.get("val_tokens") else "")
        top.plot([s for s, _, _ in val], [v for _, _, v in val], color="tab:orange", lw=1.8, marker="o",
                 ms=5, label=f"validation loss{measured}")
        last_step = max(s for s, _, _ in train + val)
        top.annotate(f"best {best[2]:.3f} (perplexity {math.exp(min(best[2], 50)):.1f})", (best[0], best[2]),
                     xytext=(0, -16), textcoords="offset points", fontsize=9, color="tab:orange",
                     ha="right" if best[0] > 0.8 * last_step else "center",
                     bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})
    top.set_xlim(left=0)  # the whole run from its start, also when the first point is a late log line
    top.set_ylabel("loss (cross-entropy, nats per token)")
    top.grid(True, alpha=0.3)
    top.legend(loc="upper right")
    if per_step:
        tokens_axis = top.secondary_xaxis("top", functions=(lambda s: s * per_step, lambda t: t / per_step))
        tokens_axis.set_xlabel(f"tokens seen ({per_step:,} per step)")
        tokens_axis.xaxis.set_major_formatter(EngFormatter(sep=""))
    fig.suptitle(_title(run_dir, start, train, val), fontsize=11)

    if lr:
        bottom.plot([s for s, _, _ in lr], [v for _, _, v in lr], color="tab:green", lw=1.2, label="learning rate")
        bottom.legend(loc="upper right")
    bottom.set_ylabel("learning rate")
    bottom.set_xlabel("optimizer step")
    bottom.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    bottom.grid(True, alpha=0.3)

    target = run_dir / LOSS_PNG
    tmp = run_dir / f".{LOSS_PNG}-{uuid.uuid4().hex[:8]}.png"
    fig.savefig(tmp)
    os.replace(tmp, target)
    return target


def _tokens_per_step(points: list[tuple[int, int, float]]) -> int | None:
    for step, tokens, _ in points:
        if step and tokens:
            return tokens // step
    return None


def _title(run_dir: Path, start: dict, train, val) -> str:
    parts = [f"run {run_dir.resolve().name}"]
    if start.get("params"):
        parts.append(f"{_si(start['params'])} parameters")
    last = max((p[0] for p in train + val), default=0)
    parts.append(f"step {last}" + (f" of {start['max_steps']}" if start.get("max_steps") else ""))
    if train:
        parts.append(f"last training loss {train[-1][2]:.3f}")
    return " | ".join(parts)


def _si(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


class BackgroundPlot:
    """Redraws loss.png on a daemon thread when asked; requests made while drawing collapse into one."""

    def __init__(self, run_dir: Path, on_error=None):
        self.run_dir = run_dir
        self._wanted = threading.Event()
        self._stop = False
        self._on_error = on_error
        self._thread = threading.Thread(target=self._loop, name="loss-plot", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wanted.set()

    def _loop(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stop:
                return
            self._draw()

    def _draw(self) -> Path | None:
        try:
            return draw(self.run_dir)
        except Exception as exc:  # a plot must never take the training down
            if self._on_error:
                self._on_error(f"could not draw {self.run_dir / LOSS_PNG}: {exc}")
            return None

    def close(self) -> Path | None:
        """Stop the thread and draw once more, here, with everything recorded."""
        self._stop = True
        self._wanted.set()
        self._thread.join(timeout=60)
        return self._draw()
