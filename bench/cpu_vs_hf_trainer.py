"""Tokens/s of our training loop vs Hugging Face `transformers.Trainer` and nanoGPT, same model, data and batch (CPU).

All peers get the same GPT-2 configuration and initial weights (`train`'s construction and seed), the
same token windows of a DATA_DIR made by `python -m training prepare` in the same order (our
SampleOrder), the same per-device batch and sequence length, AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8,
weight decay 0.1 on matrices only, clipping at 1.0), warmup + cosine to lr/10, no evaluation, no
checkpoints. Each peer runs at its best settings on this CPU:

- `ours`: `train`'s defaults for this machine (training/model/gpt.py compiled with its loss, bf16 autocast
  where the CPU has native bf16, fused AdamW), through `Stepper` as `train` runs it;
- `hf_trainer`: Trainer with its `bf16` switch (autocast) where ours uses bf16, its default fused AdamW,
  and `torch_compile` as `--hf-compile` says (default on: it was its faster setting on `tiny`, equal on `mid`);
- `nanogpt`: its model.py and train.py loop body (bench/nanogpt.py), bf16 autocast where ours uses it,
  `torch.compile`, fused AdamW.

Interleaving: the peers run in lockstep in one process. Trainer trains; after each of its steps a
callback runs one step of each other peer (each on its own copy of the model). So every HF step has
the other steps as neighbours a few milliseconds away and all see the same machine load, which matters
on a shared 2-core box where a neighbour's test run can slow a step 5x. Each peer's step time is
measured separately (HF's from the end of the other steps to its next `on_step_end`, so it includes
Trainer's data loading and bookkeeping); the first `--warmup` steps of every round (compilation) are
left out. Rounds repeat this on fresh models. Reported: median step time per peer as tokens/s, the
ratio of the medians, and the median of the per-step paired ratios (ratio > 1: ours is faster).

    .venv/bin/python -m bench.cpu_vs_hf_trainer            # tiny and mid
    .venv/bin/python -m bench.cpu_vs_hf_trainer --quick    # tiny only
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import torch

from bench import common, nanogpt
from training.data.dataset import SampleOrder, TokenWindows

# Model sizes: the `tiny` preset as `train --preset tiny` builds it, and a mid size where the matmuls
# weigh more than the per-step overheads (train flags: --preset tiny --n-layer 4 --n-embd 256
# --n-head 4 --block-size 256).
MODELS = {
    "tiny": {"preset": "tiny"},
    "mid": {"preset": "tiny", "n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256},
}


def peer_loops(setup: common.Setup, total: int, batch_size: int, nano_module) -> dict:
    """Our loop as `train` runs it by default here, and nanoGPT's at the same precision."""
    ours = common.OurLoop(setup.fresh_gpt(), setup.windows, total, batch_size)
    loops = {"ours": ours}
    if nano_module is not None:
        model = nanogpt.build(nano_module, setup.config, setup.block_size, setup.init_state)
        loops["nanogpt"] = nanogpt.NanoLoop(model, setup.windows, total, batch_size, common.CPU, ours.precision,
                                            compile_model=True)
    return loops


class OrderedWindows(torch.utils.data.Dataset):
    """Sample i = the window our loop trains on as global sample i (so both peers see the same batches).

    `shift_labels` are the next tokens, exactly our targets; HF's causal-LM loss uses them as given
    instead of shifting `labels` (which would drop the last target of every window). The first step's
    loss is reported for both peers: equal values show both computed the same thing."""

    def __init__(self, windows: TokenWindows, length: int, seed: int = common.SEED):
        self.windows, self.length, self.order = windows, length, SampleOrder(len(windows), seed)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict:
        x, y = self.windows.batch([self.order.window_of(i)])
        return {"input_ids": x[0], "labels": y[0], "shift_labels": y[0]}


def hf_arguments(out_dir: str, steps: int, batch_size: int, optim: str, bf16: bool = False,
                 torch_compile: bool = False):
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=out_dir, max_steps=steps, per_device_train_batch_size=batch_size,
        learning_rate=common.LR, weight_decay=common.WEIGHT_DECAY, adam_beta1=common.BETAS[0],
        adam_beta2=common.BETAS[1], adam_epsilon=1e-8, max_grad_norm=common.GRAD_CLIP, optim=optim,
        lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1},
        warmup_steps=common.default_schedule(steps).warmup_steps,
        train_sampling_strategy="sequential", seed=common.SEED, use_cpu=True, torch_compile=torch_compile,
        remove_unused_columns=False,  # else Trainer drops `shift_labels` (not in forward's signature)
        bf16=bf16, fp16=False, dataloader_num_workers=0, dataloader_pin_memory=False,
        eval_strategy="no", save_strategy="no", report_to=[], disable_tqdm=True,
        logging_strategy="steps", logging_steps=10**6, logging_first_step=True,  # the first loss, once
    )


def hf_trainer(setup: common.Setup, steps: int, batch_size: int, optim: str, out_dir: str, callbacks=(),
               bf16: bool = False, torch_compile: bool = False):
    from transformers import PrinterCallback, Trainer

    trainer = Trainer(model=setup.fresh_model(),
                      args=hf_arguments(out_dir, steps, batch_size, optim, bf16, torch_compile),
                      train_dataset=OrderedWindows(setup.windows, steps * batch_size), callbacks=list(callbacks))
    trainer.remove_callback(PrinterCallback)  # it would print the one logged line; nothing else changes
    return trainer


def lockstep_round(setup: common.Setup, total: int, warmup: int, batch_size: int, optim: str,
                   nano_module, hf_compile: bool) -> dict:
    """One round: Trainer trains `total` steps; after each, every other peer takes one step."""
    from transformers import TrainerCallback

    loops = peer_loops(setup, total, batch_size, nano_module)

    class Lockstep(TrainerCallback):
        def __init__(self):
            self.times = {"hf_trainer": [], **{name: [] for name in loops}}
            self.first_loss, self.resumed = None, None

        def on_step_begin(self, args, state, control, **kwargs):
            if self.resumed is None:  # the first step: Trainer's set-up is behind us
                self.resumed = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times["hf_trainer"].append(time.perf_counter() - self.resumed)
            for name, loop in loops.items():
                self.times[name].extend(loop.run(1))
            self.resumed = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.first_loss is None and logs and "loss" in logs:
                self.first_loss = float(logs["loss"])

    clock = Lockstep()
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as tmp:
        trainer = hf_trainer(setup, total, batch_size, optim, tmp, [clock], bf16=loops["ours"].precision == "bf16",
                             torch_compile=hf_compile)
        trainer.train()
        written = sorted(p.name for p in Path(tmp).iterdir())
    if written:
        raise SystemExit(f"HF Trainer wrote {written}; it must not checkpoint during the benchmark")
    if any(len(t) != total for t in clock.times.values()):
        raise SystemExit(f"lockstep broke: {({k: len(v) for k, v in clock.times.items()})}, expected {total}")
    evals = {"hf_trainer": common.eval_loss(trainer.model, setup.windows),
             "ours": common.eval_loss(loops["ours"].model, setup.windows)}
    if "nanogpt" in loops:
        evals["nanogpt"] = common.eval_loss(loops["nanogpt"].model, setup.windows, loss_of=nanogpt.loss_of)
    return {"times": {name: t[warmup:] for name, t in clock.times.items()},
            "first_loss": {"hf_trainer": clock.first_loss, **{n: loop.losses[0][1] for n, loop in loops.items()}},
            "eval_loss": evals,
            "settings": {"ours": {"precision": loops["ours"].precision, "compile": loops["ours"].compiled},
                         "hf_trainer": {"bf16": loops["ours"].precision == "bf16", "torch_compile": hf_compile}}}


def profile(setup: common.Setup, steps: int, batch_size: int, optim: str) -> dict:
    """Where each peer's time goes when it runs alone (torch.profiler, CPU), in ms per step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    def ours():
        common.OurLoop(setup.fresh_gpt(), setup.windows, steps, batch_size).run(steps)

    def hf():
        with tempfile.TemporaryDirectory(prefix="hf-trainer-") as tmp:
            hf_trainer(setup, steps, batch_size, optim, tmp).train()

    phases = {"optimizer_step": ("Optimizer.step#",), "zero_grad": ("Optimizer.zero_grad#",),
              "backward": ("autograd::engine::evaluate_function",)}
    report = {}
    for name, fn in (("ours", ours), ("hf_trainer", hf)):
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            began = time.perf_counter()
            fn()
            wall = time.perf_counter() - began
        events = prof.key_averages()
        row = {"wall_ms_per_step_incl_setup": round(1000 * wall / steps, 2)}
        for phase, prefixes in phases.items():
            us = sum(e.cpu_time_total for e in events if e.key.startswith(prefixes))
            row[f"{phase}_ms_per_step"] = round(us / 1000 / steps, 2)
        row["top_self_cpu_ms_per_step"] = [(e.key, round(e.self_cpu_time_total / 1000 / steps, 2))
                                           for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:10]]
        report[name] = row
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="a prepared DATA_DIR (default: stdlib corpus, cached)")
    parser.add_argument("--models", default="tiny,mid", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per model (fresh models each)")
    parser.add_argument("--steps", type=int, default=12, help="timed steps per round and peer")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps at the start of each round "
                                                               "(compilation)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per step (train's default: 8)")
    parser.add_argument("--hf-optim", default="adamw_torch_fused",
                        help="TrainingArguments.optim (default: Trainer's own default, fused AdamW)")
    parser.add_argument("--hf-compile", choices=("on", "off"), default="on", help="Trainer's torch_compile")
    parser.add_argument("--nanogpt", default=None, help=f"a nanoGPT checkout (default {nanogpt.DEFAULT_CHECKOUT})")
    parser.add_argument("--no-nanogpt", action="store_true", help="leave nanoGPT out")
    parser.add_argument("--quick", action="store_true", help="tiny only, 2 rounds of 8 timed steps")
    parser.add_argument("--profile", action="store_true", help="also profile each peer running alone")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/cpu_vs_hf_trainer.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.rounds, args.steps = "tiny", 2, 8
    logging.getLogger("transformers").setLevel(logging.ERROR)
    nano_module = None if args.no_nanogpt else nanogpt.load_module(args.nanogpt)
    peers = ("ours",) if nano_module is None else ("ours", "nanogpt")

    data_dir = Path(args.data) if args.data else common.prepared_data()
    result = {"benchmark": "cpu_vs_hf_trainer", "machine": common.machine(), "data": str(data_dir),
              "batch_size": args.batch_size, "rounds": args.rounds, "timed_steps_per_round": args.steps,
              "warmup_steps_per_round": args.warmup, "hf_optim": args.hf_optim,
              "peers": {"hf_trainer": "transformers.Trainer", "ours": "training.trainer.step.Stepper",
                        **({"nanogpt": str(nano_module.__file__)} if nano_module else {})},
              "models": {}}
    total = args.warmup + args.steps
    for name in args.models.split(","):
        setup = common.make_setup(data_dir, name, **MODELS[name])
        tokens = args.batch_size * setup.block_size
        rounds = []
        for r in range(args.rounds):
            rounds.append(lockstep_round(setup, total, args.warmup, args.batch_size, args.hf_optim, nano_module,
                                         args.hf_compile == "on"))
            print(f"{name} round {r + 1}/{args.rounds}: " + ", ".join(
                f"{peer} {tokens / common.median(t):,.0f}" for peer, t in rounds[-1]["times"].items()) + " tok/s",
                flush=True)
        times = {peer: [s for r in rounds for s in r["times"][peer]] for peer in rounds[0]["times"]}
        hf = times["hf_trainer"]
        entry = {
            "flags": MODELS[name], "block_size": setup.block_size, "vocab_size": setup.config.vocab_size,
            "params_m": round(sum(p.numel() for p in setup.fresh_gpt().parameters()) / 1e6, 2),
            "tokens_per_step": tokens,
            "tokens_per_s_median": {peer: tokens / common.median(t) for peer, t in times.items()},
            "step_ms": {peer: common.spread([1000 * s for s in t]) for peer, t in times.items()},
            # ratio = our tokens/s over HF Trainer's: > 1 means we are faster
            "ratio_vs_hf": {peer: common.median(hf) / common.median(t) for peer, t in times.items() if peer in peers},
            "ratio_vs_hf_paired": {peer: common.median([h / o for h, o in zip(hf, t, strict=True)])
                                   for peer, t in times.items() if peer in peers},
            "ratio_vs_hf_per_round": {peer: [round(common.median(r["times"]["hf_trainer"]) /
                                                   common.median(r["times"][peer]), 3) for r in rounds]
                                      for peer in peers},
            "ratio_vs_nanogpt": ({"ours": common.median(times["nanogpt"]) / common.median(times["ours"])}
                                 if "nanogpt" in times else None),
            "ratio_vs_nanogpt_paired": ({"ours": common.median([n / o for n, o in zip(times["nanogpt"], times["ours"],
                                                                                       strict=True)])}
                                        if "nanogpt" in times else None),
            "settings": rounds[0]["settings"],
            "first_step_loss": rounds[0]["first_loss"],
            "eval_loss_after": {peer: common.median([r["eval_loss"][peer] for r in rounds]) for peer in times},
        }
        if args.profile:
            entry["profile"] = profile(setup, args.steps, args.batch_size, args.hf_optim)
        result["models"][name] = entry
        print(f"{name}: " + ", ".join(f"{peer} {v:,.0f} tok/s" for peer, v in entry["tokens_per_s_median"].items())
              + " | ratio vs HF Trainer: " + ", ".join(f"{peer} {v:.2f}x" for peer, v in entry["ratio_vs_hf"].items()),
              flush=True)
    result["machine"]["load_avg_1m_end"] = common.machine()["load_avg_1m"]
    path = common.write_result("cpu_vs_hf_trainer", result, args.out)
    print(json.dumps({name: {**{f"{peer}_tok_s": round(v) for peer, v in m["tokens_per_s_median"].items()},
                             **{f"ratio_{peer}": round(v, 3) for peer, v in m["ratio_vs_hf"].items()}}
                      for name, m in result["models"].items()}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
