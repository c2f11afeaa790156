"""GPU benchmarks in one command: GPT-2 124M tokens/s and MFU against nanoGPT and HF Trainer, gpt2-medium,
memory and the largest micro-batch, checkpoint save times, SIGTERM to exit.

Throughput peers (each a process of its own, run in turns: ours, nanoGPT, HF Trainer, ours, ...,
`--rounds` each, all on the same GPU in one session; same shape, batch, sequence length, bf16):

- `first_step` (run first): train's first step cold, warm, on a new node with and without the run's
  compile cache, and eager (bench/cold_start.py);
- `ours`: `python -m training bench` (train's step: training/model/gpt.py compiled by regions, each
  block and the head with its loss, bf16 autocast, fused AdamW, clipping, pinned asynchronous
  host-to-device copies, no host sync per step);
- `ours_whole`: the same with the whole model compiled instead (TRAINSTACK_COMPILE_REGIONS=0): the
  regions must keep the step within 3% of it (`ours_regional` is accepted as another name for `ours`);
- `hf_model`: the same step on transformers' GPT2LMHeadModel (compiled, loss outside), to show what
  the lean model buys;
- `nanogpt`: its own train.py (bench/nanogpt.py says how to get a checkout) with --compile=True,
  bf16, its fused AdamW, batch x block, no gradient accumulation, on synthetic tokens;
- `hf_trainer`: transformers.Trainer with bf16, torch_compile, adamw_torch_fused, on random tokens.

Every peer's step time is the wall time between two host-synchronised points `--steps` steps apart
after `--warmup` steps (compilation), so queued GPU work is counted exactly once. MFU uses the
formula of training/observability/metrics.py and the detected GPU's dense bf16 peak.

    python -m bench.gpu --out bench/results/gpu.json          # on a GPU machine
    python -m bench.gpu --device cpu --quick                  # the same code paths on a CPU, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

if not __package__:  # `python bench/gpu.py` (as its peers are run): the repository's packages on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import cold_start, common, nanogpt  # noqa: E402
from training.checkpoints import checkpoint  # noqa: E402
from training.checkpoints.writer import BackgroundCheckpointer  # noqa: E402
from training.compile_cache.regions import REGIONS, compile_in_place  # noqa: E402
from training.model.build import config_for, create_gpt, resolve_shape  # noqa: E402
from training.observability import metrics  # noqa: E402
from training.trainer.optim import make_optimizer  # noqa: E402
from training.trainer.step import Stepper  # noqa: E402

VOCAB = 50304


def timed_lines(cmd: list[str], pattern: re.Pattern, cwd: Path, env: dict, timeout: float) -> tuple[list, str]:
    """Run `cmd`; the (monotonic time, match) of each output line matching `pattern`, and the output."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    hits, out = [], []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        out.append(line)
        if (m := pattern.search(line)) is not None:
            hits.append((time.monotonic(), m))
        if time.monotonic() > deadline:
            proc.kill()
            break
    proc.wait()
    return hits, "".join(out[-40:])


def step_seconds(hits: list, first: int, last: int) -> float:
    by_step = {int(m.group(1)): t for t, m in hits}
    return (by_step[last] - by_step[first]) / (last - first)


# ------------------------------------------------------------------ peer: one process each
MARK = re.compile(r"^SYNCED (\d+)$")


def peer_ours(args, hf: bool) -> None:
    """train's step (or the same step on GPT2LMHeadModel), printing SYNCED n after host syncs."""
    device = torch.device(args.device)
    shape = resolve_shape(args.preset, block_size=args.block_size)
    config = config_for(shape, VOCAB, 0.0, 0)
    torch.manual_seed(0)
    if hf:
        from training.model.build import create_model

        model = HFLoss(create_model(config)).to(device)
    else:
        model = create_gpt(config).to(device)
    optimizer = make_optimizer(model, 6e-4, 0.1, (0.9, 0.95))
    precision = "bf16" if device.type == "cuda" else "fp32"
    stepper = Stepper(compile_in_place(model), optimizer, device, precision, 1.0, 1, args.batch_size)
    gen = torch.Generator().manual_seed(0)
    for i in range(args.warmup + args.steps + 1):
        tokens = torch.randint(0, VOCAB, (args.batch_size, shape.block_size + 1), generator=gen)
        loss, _ = stepper.step([(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())])
        if i in (args.warmup, args.warmup + args.steps):
            loss.item()
            print(f"SYNCED {i}", flush=True)


class HFLoss(torch.nn.Module):
    """GPT2LMHeadModel behind the (input_ids, targets) -> loss call that Stepper makes."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, targets):
        logits = self.hf(input_ids=input_ids).logits
        return torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def peer_hf_trainer(args) -> None:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from training.model.build import create_model

    shape = resolve_shape(args.preset, block_size=args.block_size)
    torch.manual_seed(0)
    model = create_model(config_for(shape, VOCAB, 0.0, 0))
    n = (args.warmup + args.steps + 1) * args.batch_size
    data = torch.randint(0, VOCAB, (n, shape.block_size + 1))

    class Random(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"input_ids": data[i, :-1], "labels": data[i, 1:], "shift_labels": data[i, 1:]}

    class Sync(TrainerCallback):
        def on_step_end(self, a, state, control, **kw):
            if state.global_step - 1 in (args.warmup, args.warmup + args.steps):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                print(f"SYNCED {state.global_step - 1}", flush=True)

    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        targs = TrainingArguments(output_dir=tmp, max_steps=args.warmup + args.steps + 1,
                                  per_device_train_batch_size=args.batch_size, learning_rate=6e-4, weight_decay=0.1,
                                  adam_beta2=0.95, max_grad_norm=1.0, optim="adamw_torch_fused", bf16=cuda,
                                  torch_compile=True, use_cpu=not cuda, remove_unused_columns=False,
                                  dataloader_pin_memory=cuda, dataloader_num_workers=2 if cuda else 0,
                                  save_strategy="no", eval_strategy="no", report_to=[], disable_tqdm=True,
                                  logging_steps=10**6)
        Trainer(model=model, args=targs, train_dataset=Random(), callbacks=[Sync()]).train()


# ------------------------------------------------------------------ the driver
def throughput(args, peer: str, preset: str, batch: int) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(common.ROOT))
    if peer == "nanogpt":
        checkout = Path(args.nanogpt or nanogpt.DEFAULT_CHECKOUT)
        shape = resolve_shape(preset, block_size=args.block_size)
        data = checkout / "data" / "synthetic"
        if not (data / "train.bin").is_file():
            data.mkdir(parents=True, exist_ok=True)
            for i, split in enumerate(("train", "val")):
                np.random.default_rng(i).integers(0, 50257, 20_000_000, dtype=np.uint16).tofile(data / f"{split}.bin")
        last = args.warmup + args.steps
        cmd = [sys.executable, "train.py", "--dataset=synthetic", f"--batch_size={batch}",
               f"--block_size={shape.block_size}", f"--n_layer={shape.n_layer}", f"--n_head={shape.n_head}",
               f"--n_embd={shape.n_embd}", "--gradient_accumulation_steps=1", "--bias=True", "--dropout=0.0",
               f"--device={args.device}", f"--dtype={'bfloat16' if args.device.startswith('cuda') else 'float32'}",
               "--compile=True", f"--max_iters={last}", "--eval_iters=1", "--eval_interval=1000000",
               f"--log_interval={args.steps}", "--always_save_checkpoint=False", "--wandb_log=False",
               f"--out_dir={tempfile.mkdtemp(prefix='nanogpt-')}"]
        pattern = re.compile(r"^iter (\d+): loss")  # printed after its loss.item(): a host sync
        hits, out = timed_lines(cmd, pattern, checkout, env, args.timeout)
        first = args.warmup if args.warmup % args.steps == 0 else None
        if first is None:
            raise SystemExit("--warmup must be a multiple of --steps for nanoGPT's log interval")
    else:
        cmd = [sys.executable, __file__, "--peer", peer, "--device", args.device, "--preset", preset,
               "--batch-size", str(batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
        if args.block_size:
            cmd += ["--block-size", str(args.block_size)]
        hits, out = timed_lines(cmd, MARK, common.ROOT, env, args.timeout)
        first, last = args.warmup, args.warmup + args.steps
    try:
        seconds = step_seconds(hits, first, last)
    except KeyError:
        return {"error": out[-3000:]}
    return {"step_s": seconds}


def first_step(args) -> dict:
    """train's first step cold (empty compiler cache), warm (a restart), on a new node with and without
    the run's compile cache, and eager: bench/cold_start.py's round on this device and preset."""
    shape = ["--preset", args.preset, "--device", args.device, "--batch-size", str(args.batch_size)]
    if args.block_size:
        shape += ["--block-size", str(args.block_size)]
    with tempfile.TemporaryDirectory(prefix="bench-gpu-first-step-") as tmp:
        return cold_start.one_round(common.prepared_data(), shape, list(cold_start.GPU_VARIANTS), Path(tmp))


def mfu_of(preset: str, block: int, tokens_per_s: float, device: torch.device) -> float | None:
    shape = resolve_shape(preset, block_size=block)
    model = create_gpt(config_for(shape, VOCAB, 0.0, 0))
    flops = metrics.flops_per_token(metrics.count_params(model), shape.n_layer, shape.n_embd, shape.block_size)
    return metrics.mfu(tokens_per_s, flops, metrics.peak_flops(device))


def checkpoint_times(preset: str, device: torch.device, block: int | None) -> dict:
    """Synchronous save, and the step path's share of a background save (staging only), on local disk."""
    shape = resolve_shape(preset, block_size=block)
    model = create_gpt(config_for(shape, VOCAB, 0.0, 0)).to(device)
    optimizer = make_optimizer(model, 6e-4, 0.1, (0.9, 0.95))
    stepper = Stepper(model, optimizer, device, "bf16" if device.type == "cuda" else "fp32", 1.0, 1, 1)
    tokens = torch.randint(0, VOCAB, (1, 65))
    stepper.step([(tokens[:, :-1], tokens[:, 1:])])  # the AdamW moments exist from here on
    out = {}
    with tempfile.TemporaryDirectory(prefix="gpu-ckpt-", dir=common.CACHE) as tmp:
        states = lambda: {"model": model.state_dict(), "optimizer": optimizer.state_dict(),  # noqa: E731
                          "trainer": {"step": 1}}
        began = time.perf_counter()
        staged = BackgroundCheckpointer(Path(tmp), 3)._stage(states())
        checkpoint.save(Path(tmp), 1, staged, keep=3)
        out["synchronous_s"] = time.perf_counter() - began
        saver = BackgroundCheckpointer(Path(tmp), 3)
        stage = []
        for step in (2, 3, 4):
            began = time.perf_counter()
            saver.save(step, states())
            stage.append(time.perf_counter() - began)
            saver.wait()
        out.update(staging_s=common.median(stage), write_s=saver.last_write_s,
                   bytes=sum(f.stat().st_size for f in checkpoint.latest_valid(Path(tmp)).path.iterdir()))
    return out


def sigterm_to_exit(args) -> dict:
    """training.launch running train on GPT-2 124M; SIGTERM after some steps: to the saved checkpoint, to exit."""
    data = common.prepared_data()
    with tempfile.TemporaryDirectory(prefix="gpu-sigterm-", dir=common.CACHE) as run:
        cmd = [sys.executable, "-m", "training.launch", "--standalone", "--nproc-per-node=1", "--max-restarts=0",
               "-m", "training", "train", "--data", str(data), "--out", run, "--preset", args.preset,
               "--batch-size", str(args.batch_size), "--max-steps", "100000", "--log-every", "5",
               "--checkpoint-every", "100000", "--eval-every", "100000", "--no-progress", "--no-export",
               "--device", args.device] + (["--block-size", str(args.block_size)] if args.block_size else [])
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(common.ROOT))
        proc = subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        lines, t_term, saved = [], None, None
        for line in proc.stdout:
            lines.append(line)
            if t_term is None and line.startswith("step 20/"):
                t_term = time.monotonic()
                proc.send_signal(signal.SIGTERM)
            if t_term and saved is None and "checkpoint of step" in line:
                saved = time.monotonic() - t_term
        code = proc.wait()
        if t_term is None:
            return {"error": "".join(lines[-30:])}
        return {"sigterm_to_checkpoint_s": saved, "sigterm_to_exit_s": time.monotonic() - t_term, "exit_code": code}


def largest_batch(args, preset: str) -> dict:
    """Micro-batches tried in turn, doubling until one does not fit; peak memory of each that did."""
    found, batch = {}, args.batch_size
    while batch <= args.max_batch:
        cmd = [sys.executable, "-m", "training", "bench", "--preset", preset, "--batch-size", str(batch),
               "--steps", "2", "--warmup", "2", "--device", args.device, "--vocab-size", str(VOCAB)]
        if args.block_size:
            cmd += ["--block-size", str(args.block_size)]
        done = subprocess.run(cmd, cwd=common.ROOT, capture_output=True, text=True, timeout=args.timeout,
                              env=dict(os.environ, PYTHONPATH=str(common.ROOT)))
        if done.returncode != 0:
            found["first_that_does_not_fit"] = batch
            break
        found[str(batch)] = json.loads(done.stdout.strip().splitlines()[-1])["max_memory_allocated_gib"]
        batch *= 2
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", default=None, help=argparse.SUPPRESS)  # internal: run one peer
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", default="gpt2")
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per peer run")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps (a multiple of --steps)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", default="ours,ours_whole,nanogpt,hf_trainer,hf_model",
                        help="throughput peers, comma-separated (default: ours,ours_whole,nanogpt,hf_trainer,hf_model)")
    parser.add_argument("--medium-batch", type=int, default=8, help="gpt2-medium micro-batch")
    parser.add_argument("--max-batch", type=int, default=128, help="largest micro-batch to try")
    parser.add_argument("--parts", default="first_step,throughput,medium,memory,checkpoint,sigterm")
    parser.add_argument("--nanogpt", default=None, help=f"a nanoGPT checkout (default {nanogpt.DEFAULT_CHECKOUT})")
    parser.add_argument("--timeout", type=float, default=400, help="seconds one peer run may take")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, 1 round (checks the code on a CPU)")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/gpu.json)")
    args = parser.parse_args(argv)
    if args.peer in ("ours_whole", "ours_regional"):  # the whole model compiled instead of its regions
        os.environ[REGIONS] = "0" if args.peer == "ours_whole" else "1"
    if args.peer:
        peer_hf_trainer(args) if args.peer == "hf_trainer" else peer_ours(args, hf=args.peer == "hf_model")
        return 0
    if args.quick:
        args.preset, args.block_size, args.batch_size, args.steps, args.warmup, args.rounds = "tiny", 64, 4, 3, 3, 1
        args.medium_batch, args.max_batch = 2, 8
    device = torch.device(args.device)
    common.CACHE.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "gpu", "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "peak_bf16_flops": metrics.peak_flops(device), "torch": torch.__version__,
              "machine": common.machine(), "preset": args.preset, "batch_size": args.batch_size,
              "block_size": args.block_size or resolve_shape(args.preset).block_size, "steps": args.steps,
              "warmup": args.warmup, "rounds": args.rounds, "runs": []}
    parts = args.parts.split(",")
    block = result["block_size"]
    if "first_step" in parts:
        result["first_step"] = first_step(args)
    if "throughput" in parts:
        for r in range(args.rounds):
            for peer in args.peers.split(","):
                run = {"peer": peer, "round": r + 1, "preset": args.preset,
                       **throughput(args, peer, args.preset, args.batch_size)}
                result["runs"].append(run)
                print(json.dumps(run)[:300], flush=True)
        summary = {}
        for peer in args.peers.split(","):
            times = [run["step_s"] for run in result["runs"] if run["peer"] == peer and "step_s" in run]
            if times:
                tok_s = args.batch_size * block / common.median(times)
                summary[peer] = {"step_ms": 1000 * common.median(times), "tokens_per_s": tok_s,
                                 "mfu": mfu_of(args.preset, block, tok_s, device)}
        if "ours" in summary:
            for entry in summary.values():
                entry["ours_vs_this"] = summary["ours"]["tokens_per_s"] / entry["tokens_per_s"]
        result["summary"] = summary
    if "medium" in parts:
        medium = "gpt2-medium" if not args.quick else "tiny"
        times = []
        for r in range(args.rounds):
            run = {"peer": "ours", "round": r + 1, "preset": medium, "batch_size": args.medium_batch,
                   **throughput(args, "ours", medium, args.medium_batch)}
            result["runs"].append(run)
            times += [run["step_s"]] if "step_s" in run else []
        if times:
            tok_s = args.medium_batch * block / common.median(times)
            result["medium"] = {"preset": medium, "batch_size": args.medium_batch, "tokens_per_s": tok_s,
                                "mfu": mfu_of(medium, block, tok_s, device)}
    if "memory" in parts:
        result["memory_gib_by_micro_batch"] = {p: largest_batch(args, p) for p in
                                              ([args.preset, "gpt2-medium"] if not args.quick else [args.preset])}
    if "checkpoint" in parts:
        result["checkpoint"] = {p: checkpoint_times(p, device, args.block_size) for p in
                                ([args.preset, "gpt2-medium"] if not args.quick else [args.preset])}
    if "sigterm" in parts:
        result["sigterm"] = sigterm_to_exit(args)
    path = common.write_result("gpu", result, args.out)
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "machine")}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
