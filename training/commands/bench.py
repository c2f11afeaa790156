"""`python -m training bench`: training throughput of the real step on this device, as one JSON line.

Random token ids (throughput does not depend on their values), the same model construction,
optimizer and Stepper as `train`, so the figure is the one a run would see.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from training.compile_cache.plan import expected_cold_seconds
from training.compile_cache.regions import compile_in_place
from training.elastic.distributed import pick_device
from training.model.build import config_for, create_gpt, resolve_shape
from training.observability import metrics
from training.trainer.optim import make_optimizer
from training.trainer.step import Stepper, resolve_compile, resolve_precision


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench(args: argparse.Namespace) -> dict:
    device = pick_device(args.device)
    precision = resolve_precision(args.precision, device)
    shape = resolve_shape(args.preset, args.n_layer, args.n_embd, args.n_head, args.block_size)
    config = config_for(shape, args.vocab_size, dropout=args.dropout, eos_token_id=0)
    block_size = shape.block_size
    torch.manual_seed(0)
    model = create_gpt(config).to(device)
    optimizer = make_optimizer(model, args.lr, args.weight_decay, (args.beta1, args.beta2))
    use_compile = resolve_compile(args.compile)
    step_model = compile_in_place(model) if use_compile else model  # as train compiles it
    if use_compile:
        expected = expected_cold_seconds()
        print("compiling the model (once; " + (f"about {expected:.0f} s on this machine" if expected else
              "the warm-up steps include it") + ")", file=sys.stderr, flush=True)
    stepper = Stepper(step_model, optimizer, device, precision, grad_clip=args.grad_clip, world_size=1,
                      global_batch=args.batch_size)
    tokens = torch.randint(0, args.vocab_size, (args.batch_size, block_size + 1))
    batch = [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]

    for _ in range(args.warmup):
        stepper.step(batch)
    _sync(device)
    began = time.perf_counter()
    for _ in range(args.steps):
        loss, _ = stepper.step(batch)
    loss.item()
    _sync(device)
    step_s = (time.perf_counter() - began) / args.steps

    tokens_per_s = args.batch_size * block_size / step_s
    memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    flops_token = metrics.flops_per_token(metrics.count_params(model), config.n_layer, config.n_embd,
                                          block_size)
    util = metrics.mfu(tokens_per_s, flops_token, metrics.peak_flops(device))
    result = {
        "preset": args.preset, "shape": {"n_layer": shape.n_layer, "n_embd": shape.n_embd, "n_head": shape.n_head},
        "params_m": round(metrics.count_params(model) / 1e6, 1),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "precision": precision, "compile": use_compile, "batch_size": args.batch_size, "block_size": block_size,
        "step_ms": round(1000 * step_s, 2), "tokens_per_s": round(tokens_per_s, 1),
        "mfu": None if util is None else round(util, 4), "torch": torch.__version__,
        "max_memory_allocated_gib": None if memory is None else round(memory / 2**30, 2),
    }
    print(json.dumps(result), flush=True)
    return result
