"""Checkpoint cost as a share of step time (CPU, local disk), for `tiny` and for GPT-2 124M.

`train` checkpoints in the background (training/checkpoint_writer.py): the loop copies the state
to host memory, a thread writes it with `checkpoint.save` (atomic, checksummed) while training goes
on. What that costs the loop is measured, not assumed: steps run back to back (train's step at its
defaults for this CPU: the compiled model, bf16 where native), and checkpoints start exactly as
train.py's save() starts them. The cost of one checkpoint = the time of a window of steps that
starts with one (staging included) minus the time of as many steps without, in adjacent windows
under the same machine load, median over pairs. The synchronous save (what every checkpoint cost before, and what the SIGTERM path
and the last step still do) is timed too, with its parts: serialising, fsync, SHA-256.

    share = cost_of_one_checkpoint / (checkpoint_every * step_s)      at the default --checkpoint-every 200

tiny: `train --preset tiny` defaults (batch 8 x block 128) on the stdlib corpus (vocabulary 8192).
gpt2: 12 x 768, vocabulary 50304 (GPT-2's tokenizer, padded), batch 1 x block 128 on random token ids
(a full 1024-token step of 124M parameters takes many seconds on 2 cores; the checkpoint is the same size).

    .venv/bin/python bench/checkpoint_share.py          # ~4 minutes on 2 cores
    .venv/bin/python bench/checkpoint_share.py --quick  # tiny only
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import common
import numpy as np
import torch

from training import checkpoint
from training.checkpoint_writer import BackgroundCheckpointer
from training.data import TokenWindows
from training.model import config_for, create_gpt, resolve_shape
from training.optim import make_optimizer
from training.step import Stepper, resolve_compile, resolve_precision

CHECKPOINT_EVERY = 200  # train's default --checkpoint-every


def trainer_state(step: int) -> dict:
    """What train.py's save() puts next to the model and optimizer (one worker's RNG states)."""
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    return {"step": step, "rng": [rng], "run_config": {}, "schedule": {}}


def time_steps(stepper: Stepper, batches_for, warmup: int, steps: int) -> list[float]:
    took = []
    for i in range(warmup + steps):
        batches = batches_for(i)
        began = time.perf_counter()
        stepper.step(batches)
        if i >= warmup:
            took.append(time.perf_counter() - began)
    return took


def time_saves(model, optimizer, saves: int, keep: int = 3) -> dict:
    """`checkpoint.save` timings, plus its parts measured apart on the same states."""
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-", dir=common.CACHE) as tmp:
        run_dir = Path(tmp)
        total, serialise, fsync, digest = [], [], [], []
        for i in range(saves):
            states = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "trainer": trainer_state(100 * (i + 1))}
            began = time.perf_counter()
            path = checkpoint.save(run_dir, 100 * (i + 1), states, keep=keep)
            total.append(time.perf_counter() - began)
            size = sum(f.stat().st_size for f in path.iterdir())
            # The parts, on a scratch file: serialise, then fsync, then the manifest's re-read + SHA-256.
            scratch = run_dir / "scratch.pt"
            t0 = time.perf_counter()
            with open(scratch, "wb") as f:
                for state in states.values():
                    torch.save(state, f)
                t1 = time.perf_counter()
                f.flush()
                os.fsync(f.fileno())
            t2 = time.perf_counter()
            checkpoint._sha256(scratch)
            t3 = time.perf_counter()
            scratch.unlink()
            serialise.append(t1 - t0)
            fsync.append(t2 - t1)
            digest.append(t3 - t2)
        kept = len(list((run_dir / checkpoint.CHECKPOINTS).iterdir()))
    return {"save_s": common.spread(total), "bytes": size, "kept_checkpoints": kept,
            "parts_s": {"serialise": common.median(serialise), "fsync": common.median(fsync),
                        "sha256_reread": common.median(digest)}}


def background_cost(stepper: Stepper, model, optimizer, batches_for, window: int, pairs: int, first: int) -> dict:
    """What a background checkpoint costs the loop: pairs of `window`-step windows, one with a checkpoint
    started at its beginning (as train.py's save() does it), one without, next to each other so both
    see the same machine load (their order alternates, to cancel drifts). Cost = with - without."""
    costs, staging, writes, step = [], [], [], first
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-bg-", dir=common.CACHE) as tmp:
        saver = BackgroundCheckpointer(Path(tmp), keep=3)
        for n in range(pairs):
            seconds = {}
            for with_save in ((True, False) if n % 2 == 0 else (False, True)):
                began = time.perf_counter()
                if with_save:
                    saver.save(1000 + n, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                          "trainer": trainer_state(1000 + n)})
                    staging.append(time.perf_counter() - began)
                for _ in range(window):
                    stepper.step(batches_for(step))
                    step += 1
                if with_save and saver.writing:
                    raise SystemExit(f"a checkpoint write outlasted {window} steps; raise the window")
                seconds[with_save] = time.perf_counter() - began
            saver.wait()
            writes.append(saver.last_write_s)
            costs.append(seconds[True] - seconds[False])
    return {"cost_s": common.spread(costs), "staging_s": common.spread(staging), "write_s": common.spread(writes),
            "window_steps": window}


def measure(name: str, config, batches_for, batch: int, warmup: int, steps: int, pairs: int, window: int) -> dict:
    torch.manual_seed(common.SEED)
    model = create_gpt(config)
    model.train()
    optimizer = make_optimizer(model, common.LR, common.WEIGHT_DECAY, common.BETAS)
    precision, compiled = resolve_precision("auto", common.CPU), resolve_compile("auto")
    stepper = Stepper(torch.compile(model) if compiled else model, optimizer, common.CPU, precision,
                      common.GRAD_CLIP, 1, batch)
    step_s = time_steps(stepper, batches_for, warmup, steps)  # also creates the AdamW moments
    step_med = common.median(step_s)
    background = background_cost(stepper, model, optimizer, batches_for, window, pairs, warmup + steps)
    sync = time_saves(model, optimizer, max(2, pairs // 2))
    cost = background["cost_s"]["median"]
    entry = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
             "batch_x_block": [batch, config.n_positions if name != "gpt2" else 128], "precision": precision,
             "compile": compiled, "step_s": common.spread(step_s), "background": background, "synchronous": sync,
             "bytes": sync["bytes"], "checkpoint_every": CHECKPOINT_EVERY,
             "share_at_default": cost / (CHECKPOINT_EVERY * step_med),
             "share_at_default_if_synchronous": sync["save_s"]["median"] / (CHECKPOINT_EVERY * step_med)}
    print(f"{name}: step {step_med:.3f}s, checkpoint ({entry['bytes'] / 1e6:,.0f} MB) costs the loop {cost:.3f}s "
          f"in the background (write {background['write_s']['median']:.2f}s) vs {sync['save_s']['median']:.2f}s "
          f"synchronous -> {100 * entry['share_at_default']:.2f}% of step time at --checkpoint-every "
          f"{CHECKPOINT_EVERY} (synchronous: {100 * entry['share_at_default_if_synchronous']:.2f}%)", flush=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="a prepared DATA_DIR (default: stdlib corpus, cached)")
    parser.add_argument("--models", default="tiny,gpt2")
    parser.add_argument("--quick", action="store_true", help="tiny only")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/checkpoint_share.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.models = "tiny"

    result = {"benchmark": "checkpoint_share", "machine": common.machine(), "models": {}}
    common.CACHE.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        if name == "tiny":
            data_dir = Path(args.data) if args.data else common.prepared_data()
            setup = common.make_setup(data_dir, "tiny", preset="tiny")
            windows: TokenWindows = setup.windows
            loop = common.OurLoop(setup.fresh_model(), windows, 1, 8)  # for its SampleOrder only

            def batches_for(i, w=windows, order=loop.order):
                return [w.batch([order.window_of(g) for g in range(8 * i, 8 * i + 8)])]

            result["models"]["tiny"] = measure("tiny", setup.config, batches_for, 8, 4, 20, 6, 40)
        elif name == "gpt2":
            config = config_for(resolve_shape("gpt2"), 50257, 0.0, 50256)
            gen = torch.Generator().manual_seed(common.SEED)

            def batches_for(i, g=gen):
                tokens = torch.randint(0, 50257, (1, 129), generator=g)
                return [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]

            result["models"]["gpt2"] = measure("gpt2", config, batches_for, 1, 3, 8, 4, 40)
        else:
            raise SystemExit(f"unknown model {name}; use tiny or gpt2")
    result["machine"]["load_avg_1m_end"] = common.machine()["load_avg_1m"]
    path = common.write_result("checkpoint_share", result, args.out)
    print(json.dumps({n: {"step_s": round(m["step_s"]["median"], 3),
                          "background_cost_s": round(m["background"]["cost_s"]["median"], 3),
                          "synchronous_s": round(m["synchronous"]["save_s"]["median"], 2),
                          "share_at_200": round(m["share_at_default"], 5)} for n, m in result["models"].items()}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
