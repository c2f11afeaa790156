"""`python -m training report RUN_DIR`: a run's summary, from what the run recorded.

Reads RUN_DIR/metrics.jsonl (written by rank 0 during training), the checkpoints on disk, the export
and the snapshot uploads the run logged. Prints a two-column table, or JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from training.checkpoints import checkpoint
from training.observability import run_log
from training.observability.plots import LOSS_PNG
from trainstack.contract.errors import UserError
from trainstack.contract.log import warn


def summarize(run_dir: Path) -> dict:
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; pass the --out of a `train` run")
    if not (run_dir / run_log.METRICS).is_file():
        raise UserError(f"{run_dir} has no {run_log.METRICS} (not a run directory, or trained by a version "
                        "that did not record metrics); pass the --out of a `train` run")
    log = run_log.read(run_dir)
    start = {k: v for k, v in (log.last_event("start") or {}).items()
             if k == "device" and isinstance(v, str) or _number(v)}  # a damaged record's fields are dropped
    starts = [e for e in log.events if e["event"] == "start"]
    steps = max((p[0] for points in log.series.values() for p in points), default=0)
    val = log.series.get("val/loss", [])
    best = min(val, key=lambda p: p[2]) if val else None
    tok_s = [v for _, _, v in log.series.get("perf/tokens_per_s", [])]
    mfu = [v for _, _, v in log.series.get("perf/mfu", [])]
    train = log.series.get("train/loss", [])
    uploads = [e for e in log.events if e["event"] == "upload" and e.get("ok")]
    ckpt_uploads = [e for e in uploads if e.get("what") == "checkpoint"]
    export_upload = next((e for e in reversed(uploads) if e.get("what") == "export"), None)
    newest = _newest_intact(run_dir)
    export = run_dir / "export" / "config.json"
    if not log.events and not log.series and newest is None and not export.is_file():
        raise UserError(f"nothing in {run_dir} is readable: {run_log.METRICS} holds no intact record and no "
                        "checkpoint or export is intact; pass the --out of a `train` run (the damaged files are "
                        "left as they are)")
    wandb_file = run_dir / "wandb_run.json"
    return {
        "run_dir": str(run_dir),
        "steps": steps,
        "max_steps": start.get("max_steps"),
        "tokens": steps * int(start.get("tokens_per_step") or 0),
        "wall_seconds": round(log.wall_seconds(), 1),
        "sessions": len(starts),
        "workers": start.get("world_size"),
        "device": start.get("device"),
        "parameters": start.get("params"),
        "last_train_loss": train[-1][2] if train else None,
        "best_val_loss": best[2] if best else None,
        "best_val_step": best[0] if best else None,
        "best_val_perplexity": math.exp(min(best[2], 50.0)) if best else None,
        "val_tokens": start.get("val_tokens"),  # what each validation loss was measured on (this session's)
        "block_size": start.get("block_size"),
        "tokens_per_s": statistics.median(tok_s) if tok_s else None,
        "mfu": statistics.median(mfu) if mfu else None,
        "checkpoints": [int(p.name[len(checkpoint.PREFIX):]) for p in sorted((run_dir / checkpoint.CHECKPOINTS).glob(
            f"{checkpoint.PREFIX}*")) if p.name[len(checkpoint.PREFIX):].isdigit()],
        "newest_intact_checkpoint": str(newest.path) if newest else None,
        "uploaded_checkpoint": ckpt_uploads[-1].get("uri") if ckpt_uploads else None,
        "export": str(run_dir / "export") if export.is_file() else None,
        "uploaded_export": export_upload.get("uri") if export_upload else None,
        "loss_png": str(run_dir / LOSS_PNG) if (run_dir / LOSS_PNG).is_file() else None,
        "wandb_run": _wandb_id(wandb_file),
    }


def _newest_intact(run_dir: Path) -> checkpoint.Checkpoint | None:
    """The newest checkpoint that verifies; each damaged newer one is named in one line, and the report
    goes on with the rest (the damaged ones stay on disk, as train leaves them)."""
    for ckpt in checkpoint.listed(run_dir):
        problem = checkpoint.verify(ckpt.path)
        if problem is None:
            return ckpt
        warn(f"checkpoint {ckpt.path} is damaged ({problem}); reporting without it")
    return None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _wandb_id(path: Path) -> str | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None  # absent or damaged: the table says "-"
    return record.get("id") if isinstance(record, dict) and isinstance(record.get("id"), str) else None


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _count(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def table(summary: dict) -> str:
    s = summary
    none = "-"
    rows = [
        ("run", s["run_dir"]),
        ("steps", f"{s['steps']:,}" + (f" of {s['max_steps']:,}" if s["max_steps"] else "")),
        ("tokens", _count(s["tokens"])),
        ("wall time", f"{_hms(s['wall_seconds'])} in {s['sessions']} session(s)"),
        ("workers, device", f"{s['workers']}, {s['device']}" if s["workers"] else none),
        ("parameters", _count(s["parameters"]) if s["parameters"] else none),
        ("last training loss", f"{s['last_train_loss']:.4f}" if s["last_train_loss"] is not None else none),
        ("best validation loss", f"{s['best_val_loss']:.4f} nats/token at step {s['best_val_step']:,}"
         + (f", on {run_log.describe_tokens(int(s['val_tokens']), s['block_size'])}" if s["val_tokens"] else "")
         if s["best_val_loss"] is not None else "- (no validation split or no evaluation yet)"),
        ("best validation perplexity", f"{s['best_val_perplexity']:.2f}" if s["best_val_perplexity"] else none),
        ("tokens/s (median)", f"{s['tokens_per_s']:,.0f}" if s["tokens_per_s"] else none),
        ("MFU (median)", f"{100 * s['mfu']:.1f}%" if s["mfu"] is not None else "- (no peak FLOP/s known for this device)"),
        ("checkpoints on disk", ", ".join(map(str, s["checkpoints"])) or none),
        ("newest intact checkpoint", s["newest_intact_checkpoint"] or none),
        ("uploaded checkpoint", s["uploaded_checkpoint"] or none),
        ("export", s["export"] or "- (not exported yet)"),
        ("uploaded export", s["uploaded_export"] or none),
        ("loss curve", s["loss_png"] or none),
        ("W&B run id", s["wandb_run"] or none),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def report(args: argparse.Namespace) -> str:
    summary = summarize(Path(args.run_dir))
    return json.dumps(summary, indent=1) if args.json else table(summary)
