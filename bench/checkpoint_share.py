"""Checkpoint cost as a share of step time (CPU, local disk), for `tiny` and for GPT-2 124M.

`train` checkpoints in the background (training/checkpoints/writer.py): the loop copies the state
into reused host buffers, a thread writes it with `checkpoint.save` (atomic, checksummed) while
training goes on. Steps run (train's step at its defaults for this CPU: the compiled model, bf16 where
native); checkpoints start exactly as train.py's save() starts them, and training continues while
each is written. Per checkpoint: the staging (on the step path), the write's wall time and the CPU
time of the writing thread. The loop pays the staging; on cores that training keeps busy it also
loses up to the writer's CPU time (the thread runs niced, so less when training leaves cores idle);
a wall-clock A/B of this was tried and drowned in the shared machine's noise. The synchronous save
(what every checkpoint cost before, and what the SIGTERM path and the last step still do) is timed
too, with its parts: serialising, fsync, SHA-256.

    share = staging_s / (checkpoint_every * step_s)                 (upper bound: staging_s + write_cpu_s)

tiny: `train --preset tiny` defaults (batch 8 x block 128) on the stdlib corpus (vocabulary 8192).
gpt2: 12 x 768, vocabulary 50304 (GPT-2's tokenizer, padded), batch 1 x block 128 on random token ids
(a full 1024-token step of 124M parameters takes many seconds on 2 cores; the checkpoint is the same size).

    .venv/bin/python -m bench.checkpoint_share
    .venv/bin/python -m bench.checkpoint_share --quick  # tiny only
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench import common
from training.checkpoints import checkpoint
from training.checkpoints.writer import BackgroundCheckpointer
from training.data.dataset import TokenWindows
from training.model.build import config_for, create_gpt, resolve_shape
from training.trainer.optim import make_optimizer
from training.trainer.step import Stepper, resolve_compile, resolve_precision

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


def background_cost(stepper: Stepper, model, optimizer, batches_for, saves: int, first: int) -> dict:
    """Background checkpoints started as train.py's save() starts them, training on while each is written.

    Measured per checkpoint: the staging (the only part on the step path), the write's wall time, and
    the CPU time of the writing thread. On a machine whose cores the training keeps busy, that CPU time
    is taken from training (an upper bound: the thread runs at a lower priority and gets idle time
    first); on a GPU machine with cores to spare it costs the loop nothing."""
    staging, writes, cpu, steps_during, step = [], [], [], [], first
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-bg-", dir=common.CACHE) as tmp:
        saver = BackgroundCheckpointer(Path(tmp), keep=3)
        for n in range(saves):
            began = time.perf_counter()
            saver.save(1000 + n, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                  "trainer": trainer_state(1000 + n)})
            staging.append(time.perf_counter() - began)
            during = 0
            while saver.writing:
                stepper.step(batches_for(step))
                step, during = step + 1, during + 1
            saver.wait()
            writes.append(saver.last_write_s)
            cpu.append(saver.last_write_cpu_s)
            steps_during.append(during)
    return {"staging_s": common.spread(staging), "write_s": common.spread(writes),
            "write_cpu_s": common.spread(cpu), "steps_during_the_write": steps_during}


def measure(name: str, config, batches_for, batch: int, warmup: int, steps: int, saves: int) -> dict:
    torch.manual_seed(common.SEED)
    model = create_gpt(config)
    model.train()
    optimizer = make_optimizer(model, common.LR, common.WEIGHT_DECAY, common.BETAS)
    precision, compiled = resolve_precision("auto", common.CPU), resolve_compile("auto")
    stepper = Stepper(torch.compile(model) if compiled else model, optimizer, common.CPU, precision,
                      common.GRAD_CLIP, 1, batch)
    step_s = time_steps(stepper, batches_for, warmup, steps)  # also creates the AdamW moments
    step_med = common.median(step_s)
    background = background_cost(stepper, model, optimizer, batches_for, saves, warmup + steps)
    sync = time_saves(model, optimizer, max(2, saves // 2))
    staged, write_cpu = background["staging_s"]["median"], background["write_cpu_s"]["median"]
    entry = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
             "batch_x_block": [batch, config.n_positions if name != "gpt2" else 128], "precision": precision,
             "compile": compiled, "step_s": common.spread(step_s), "background": background, "synchronous": sync,
             "bytes": sync["bytes"], "checkpoint_every": CHECKPOINT_EVERY,
             # the loop pays the staging for sure, and at most the writer's CPU time on top
             "share_at_default": staged / (CHECKPOINT_EVERY * step_med),
             "share_at_default_upper_bound": (staged + write_cpu) / (CHECKPOINT_EVERY * step_med),
             "share_at_default_if_synchronous": sync["save_s"]["median"] / (CHECKPOINT_EVERY * step_med)}
    print(f"{name}: step {step_med:.3f}s, checkpoint {entry['bytes'] / 1e6:,.0f} MB: staging {staged:.3f}s on the "
          f"step path, write {background['write_s']['median']:.2f}s in the background using {write_cpu:.2f}s CPU, "
          f"synchronous save {sync['save_s']['median']:.2f}s -> share at --checkpoint-every {CHECKPOINT_EVERY}: "
          f"{100 * entry['share_at_default']:.2f}% to {100 * entry['share_at_default_upper_bound']:.2f}% "
          f"(synchronous: {100 * entry['share_at_default_if_synchronous']:.2f}%)", flush=True)
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

            result["models"]["tiny"] = measure("tiny", setup.config, batches_for, 8, 4, 20, 5)
        elif name == "gpt2":
            config = config_for(resolve_shape("gpt2"), 50257, 0.0, 50256)
            gen = torch.Generator().manual_seed(common.SEED)

            def batches_for(i, g=gen):
                tokens = torch.randint(0, 50257, (1, 129), generator=g)
                return [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]

            result["models"]["gpt2"] = measure("gpt2", config, batches_for, 1, 3, 8, 3)
        else:
            raise SystemExit(f"unknown model {name}; use tiny or gpt2")
    result["machine"]["load_avg_1m_end"] = common.machine()["load_avg_1m"]
    path = common.write_result("checkpoint_share", result, args.out)
    print(json.dumps({n: {"step_s": round(m["step_s"]["median"], 3),
                          "staging_s": round(m["background"]["staging_s"]["median"], 3),
                          "write_cpu_s": round(m["background"]["write_cpu_s"]["median"], 3),
                          "synchronous_s": round(m["synchronous"]["save_s"]["median"], 2),
                          "share_at_200": round(m["share_at_default"], 5)} for n, m in result["models"].items()}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
