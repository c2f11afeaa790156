"""Step time of model/precision/compile variants on this CPU, interleaved step by step (how train's CPU
defaults were picked; docs/BENCHMARKS.md, "Why, and how the defaults were picked").

Variants are KIND-PRECISION-COMPILE: KIND hf (GPT2LMHeadModel, loss outside), ours (training/model/gpt.py),
nano (nanoGPT's model.py; bench/nanogpt.py says how to get it); PRECISION fp32 or bf16 (autocast);
COMPILE e (eager) or c (torch.compile). Each step: forward with the loss, backward, clipping, AdamW
(fused except for nanoGPT's default), on random tokens; the median over `steps` after 3 untimed ones.

    .venv/bin/python -m bench.cpu_variants tiny hf-fp32-e,hf-bf16-e,ours-bf16-c,nano-bf16-c
    .venv/bin/python -m bench.cpu_variants mid ours-bf16-c --sdpa     # ours with SDPA attention on CPU too
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import time

import torch

import training.model.gpt
from bench import common, nanogpt
from training.model.build import config_for, create_gpt, create_model, resolve_shape

SHAPES = {"tiny": {}, "mid": {"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256}}


def make_step(variant: str, config, block: int, nano_module):
    kind, precision, mode = variant.split("-")
    torch.manual_seed(0)
    if kind == "hf":
        model = create_model(copy.deepcopy(config))

        def loss_of(m, x, y):
            return torch.nn.functional.cross_entropy(m(input_ids=x).logits.float().flatten(0, 1), y.flatten())
    elif kind == "ours":
        model = create_gpt(copy.deepcopy(config))

        def loss_of(m, x, y):
            return m(x, y)
    else:
        model = nanogpt.build(nano_module, config, block, None)

        def loss_of(m, x, y):
            return m(x, y)[1]
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=kind != "nano")
    run = torch.compile(model) if mode == "c" else model
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

    def step(x, y):
        with autocast:
            loss = loss_of(run, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(SHAPES))
    parser.add_argument("variants", help="comma-separated KIND-PRECISION-COMPILE")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sdpa", action="store_true", help="ours uses SDPA attention on CPU too")
    parser.add_argument("--nanogpt", default=None)
    args = parser.parse_args()
    if args.sdpa:
        training.model.gpt.CPU_MATERIALISED_ATTENTION_MAX_T = 0
    shape = resolve_shape("tiny", **SHAPES[args.model])
    config = config_for(shape, 8192, 0.0, 0)
    variants = args.variants.split(",")
    nano_module = nanogpt.load_module(args.nanogpt) if any(v.startswith("nano") for v in variants) else None
    steps = {v: make_step(v, config, shape.block_size, nano_module) for v in variants}
    gen = torch.Generator().manual_seed(1)
    times = {v: [] for v in variants}
    for i in range(args.steps + 3):
        tokens = torch.randint(0, 8192, (args.batch_size, shape.block_size + 1), generator=gen)
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        for v, step in steps.items():
            began = time.perf_counter()
            step(x, y).item()
            if i >= 3:
                times[v].append(time.perf_counter() - began)
    print(f"load {common.machine()['load_avg_1m']}")
    for v in variants:
        ms = 1000 * statistics.median(times[v])
        print(f"{args.model} {v:14s} {ms:8.1f} ms/step  {args.batch_size * shape.block_size / ms * 1000:9.0f} tok/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
