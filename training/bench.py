"""`python -m training bench`: training throughput of the real step on this device, as one JSON line.

Random token ids (throughput does not depend on their values), the same model construction,
optimizer and Stepper as `train`, so the figure is the one a run would see.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from training import metrics
from training.distributed import pick_device
from training.model import config_for, create_model, resolve_shape
from training.optim import make_optimizer
from training.step import Stepper, resolve_precision


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench(args: argparse.Namespace) -> dict:
    device = pick_device(args.device)
    precision = resolve_precision(args.precision, device)
    shape = resolve_shape(args.preset, block_size=args.block_size)
    config = config_for(shape, args.vocab_size, dropout=0.0, eos_token_id=0)
    torch.manual_seed(0)
    model = create_model(config).to(device)
    optimizer = make_optimizer(model, 6e-4, 0.1, (0.9, 0.95))
    use_compile = args.compile == "on" or (args.compile == "auto" and device.type == "cuda")
    step_model = torch.compile(model) if use_compile else model
    stepper = Stepper(step_model, optimizer, device, precision, grad_clip=1.0, world_size=1,
                      global_batch=args.batch_size)
    tokens = torch.randint(0, args.vocab_size, (args.batch_size, args.block_size + 1))
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

    tokens_per_s = args.batch_size * args.block_size / step_s
    flops_token = metrics.flops_per_token(metrics.count_params(model), config.n_layer, config.n_embd,
                                          args.block_size)
    util = metrics.mfu(tokens_per_s, flops_token, metrics.peak_flops(device))
    result = {
        "preset": args.preset, "params_m": round(metrics.count_params(model) / 1e6, 1),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "precision": precision, "compile": use_compile, "batch_size": args.batch_size, "block_size": args.block_size,
        "step_ms": round(1000 * step_s, 2), "tokens_per_s": round(tokens_per_s, 1),
        "mfu": None if util is None else round(util, 4), "torch": torch.__version__,
    }
    print(json.dumps(result), flush=True)
    return result
