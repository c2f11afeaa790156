"""Running the training CLI (in-process or as real processes) and reading what it leaves behind."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from training.__main__ import main

REPO = Path(__file__).resolve().parents[2]

# Tiny and fast, with a constant learning rate after a 2-step warmup: the schedule then does not
# depend on --max-steps, so "train to 8, then resume to 16" is the same run as "train to 16".
TINY_SHAPE = ["--preset", "tiny", "--n-layer", "2", "--n-embd", "64", "--n-head", "2"]
TINY = [*TINY_SHAPE, "--block-size", "32", "--lr", "3e-3", "--min-lr", "3e-3", "--warmup-steps", "2",
        "--log-every", "1", "--eval-every", "1000", "--eval-samples", "16", "--no-progress",
        "--compile", "off"]  # compiling costs 10-40 s per run on 2 cores; test_compiled_* covers it


def cli(argv: list[str]) -> tuple[int, str, str]:
    """Run `python -m training ...` in this process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def train(data: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    """The tiny run; a fine-tune (--init-from) takes its shape from the pretrained model instead."""
    flags = TINY[len(TINY_SHAPE):] if "--init-from" in extra else TINY
    return cli(["train", "--data", str(data), "--out", str(out), *flags, *extra])


def env() -> dict:
    e = dict(os.environ)
    e.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
             PYTHONPATH=str(REPO))
    return e


def spawn(args: list[str], log: Path) -> subprocess.Popen:
    """A real process in its own session (so a test can kill it and everything it started)."""
    return subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env(), cwd=REPO,  # noqa: SIM115
                            start_new_session=True)


def torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def losses(run_dir: Path, tag: str = "train/loss") -> dict[int, float]:
    """step -> scalar from the run's TensorBoard event files (the last write of a step wins)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values: dict[int, float] = {}
    for events in sorted((run_dir / "tensorboard").glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime):
        acc = EventAccumulator(str(events))
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                values[e.step] = e.value
    return values


def checkpoint_steps(run_dir: Path) -> list[int]:
    root = run_dir / "checkpoints"
    return sorted(int(p.name[5:]) for p in root.glob("step_*") if p.name[5:].isdigit()) if root.exists() else []


def one_line_error(result, *fragments: str) -> str:
    code, _, err = result
    progress_bar = ("it/s]", "examples/s]", "tok/s]")
    lines = [line for line in err.splitlines() if line and not line.startswith("[trainstack] warning")
             and not any(mark in line for mark in progress_bar)]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def train_args(data, run, *extra: str) -> list[str]:
    return ["-m", "training", "train", "--data", str(data), "--out", str(run), *TINY, "--batch-size", "4",
            "--global-batch-size", "8", "--dist-timeout", "30", *extra]
