"""Distillation step time as a ratio of the student's plain training step, and against Hugging Face's
distillation example (`Distiller.step`, bench/hf_distiller.py) when a checkout of it is at hand.

Per model size, one frozen teacher (random weights in `train`'s construction, exported as `train`
exports and loaded by `distill.load_teacher`, so on a GPU it is bf16 as in a real run) and the
student `distill.make_student` cuts from it (half its layers). Then, on the same token windows in
the same order, the same batch, sequence length, precision and compile settings (`train`'s defaults
on this device unless --precision/--compile say otherwise):

- `plain`: the student trained alone, `Stepper` as `train` builds it;
- `distill`: the same student with `distill.stepper_factory(teacher, ...)`, which is what
  `train --distill-from` builds in Stepper's place (training/trainer/setup.py);
- `hf_example`: the example's `Distiller.step` on transformers' GPT2LMHeadModel with the same two
  models' weights (fp32 teacher as the example keeps it, both under our autocast; not compiled: the
  example has no such switch).

All run in one process, interleaved step by step (the order alternates every step) after `--warmup`
untimed steps each (compilation), so the shared machine's load hits all of them alike. Rounds repeat
this on fresh models. A step's time is taken between two host synchronisations (`--block-steps` steps
apart: 1 on CPU, 5 on a GPU so queued work is counted once without a sync per step). Reported: median
step time, distill / plain (medians, and the median of the per-step paired ratios), and the
FLOP ratio it would have if time followed FLOPs: (6 N_student + 2 N_teacher) / 6 N_student per
token, counted as train.py counts them for MFU (metrics.flops_per_token + distill.teacher_flops_per_token).

    .venv/bin/python -m bench.distill_step                       # CPU: tiny and mid
    .venv/bin/python -m bench.distill_step --quick               # CPU: tiny only, 2 short rounds
    python -m bench.distill_step --device cuda --out bench/results/distill_step_gpu.json   # GPU: gpt2, gpt2-medium
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench import common
from training.data.dataset import TokenWindows, load_meta
from training.model.build import config_for, create_gpt, resolve_shape
from training.model.export import export_model
from training.observability import metrics
from training.trainer import distill
from training.trainer.step import Stepper
from trainstack.contract.cli import build_parser
from trainstack.contract.config import TrainConfig

# Teachers, as `train` flags would build them; each student is the teacher with half its layers.
# tiny: the student is `train --preset tiny`; mid: the student is bench/cpu_vs_hf_trainer.py's mid;
# gpt2: GPT-2 124M -> DistilGPT2's 6 layers; gpt2-medium: 350M -> 12 layers. `test`: for the tests.
MODELS = {
    "test": {"preset": "tiny", "n_layer": 2, "n_embd": 32, "n_head": 2, "block_size": 32},
    "tiny": {"preset": "tiny", "n_layer": 4},
    "mid": {"preset": "tiny", "n_layer": 8, "n_embd": 256, "n_head": 4, "block_size": 256},
    "gpt2": {"preset": "gpt2"},
    "gpt2-medium": {"preset": "gpt2-medium"},
}
DEFAULT_MODELS = {"cpu": "tiny,mid", "cuda": "gpt2,gpt2-medium"}
QUICK_MODELS = {"cpu": "tiny", "cuda": "gpt2"}


def fail(message: str) -> None:
    """Bad flags: one line, exit code 2, before anything is prepared or written."""
    print(f"distill_step.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(loop: common.TimedLoop, steps: int, device: torch.device) -> float:
    """Seconds per step over `steps` steps between two host synchronisations."""
    sync(device)
    began = time.perf_counter()
    for _ in range(steps):
        loop.step()
    sync(device)
    return (time.perf_counter() - began) / steps


class Pair:
    """A teacher loaded as `train --distill-from` loads it, the student cut from it, the flags' defaults."""

    def __init__(self, data_dir: Path, name: str, device: torch.device, precision: str, compile_: str, tmp: Path):
        flags = MODELS[name]
        self.name, self.data = name, load_meta(data_dir)
        shape = resolve_shape(flags["preset"], flags.get("n_layer"), flags.get("n_embd"), flags.get("n_head"),
                              flags.get("block_size"))
        config = config_for(shape, self.data.vocab_size, 0.0, self.data.eos_token_id)
        torch.manual_seed(common.SEED)
        run_dir = tmp / f"teacher-{name}"
        shutil.copytree(self.data.tokenizer_dir, run_dir / "tokenizer")
        export_model(create_gpt(config).to_hf(), run_dir)  # RUN_DIR/export, as `train` leaves it
        self.args = build_parser().parse_args(
            ["distill", "--distill-from", str(run_dir), "--data", str(data_dir), "--out", str(tmp / "student"),
             "--precision", precision, "--compile", compile_])
        self.config = TrainConfig.from_args(self.args)
        self.teacher = distill.load_teacher(self.config.distill, self.data, device)
        self.student = distill.make_student(self.teacher, self.config.model, self.config.distill)  # on the CPU, as train.py gets it
        self.block_size = shape.block_size
        self.windows = TokenWindows(self.data.shards("train"), self.data.dtype, self.block_size)
        c = self.student.config
        self.flops_plain = metrics.flops_per_token(metrics.count_params(self.student), c.n_layer, c.n_embd,
                                                   self.block_size)
        self.flops_teacher = distill.teacher_flops_per_token(self.teacher, self.block_size)

    def describe(self) -> dict:
        t, s = self.teacher.config, self.student.config
        return {"teacher_flags": MODELS[self.name],
                "teacher": {"n_layer": t.n_layer, "n_embd": t.n_embd, "params": metrics.count_params(self.teacher),
                            "dtype": str(next(self.teacher.parameters()).dtype)},
                "student": {"n_layer": s.n_layer, "n_embd": s.n_embd, "params": metrics.count_params(self.student)},
                "block_size": self.block_size, "vocab_size": s.vocab_size,
                "flops_per_token": {"plain": self.flops_plain, "distill": self.flops_plain + self.flops_teacher},
                "flop_ratio": (self.flops_plain + self.flops_teacher) / self.flops_plain}


def loops(pair: Pair, total: int, batch_size: int, device: torch.device, hf_module) -> dict:
    """Fresh models: the plain student, the distilled student (its own copy) and the HF example's pair."""
    args = pair.args

    def ours(make_stepper):
        return common.OurLoop(copy.deepcopy(pair.student).to(device), pair.windows, total, batch_size,
                              precision=args.precision, compile=args.compile, device=device, make_stepper=make_stepper)

    made = {"plain": ours(Stepper), "distill": ours(distill.stepper_factory(pair.teacher, pair.config.distill, args.compile))}
    if hf_module is not None:
        from bench import hf_distiller

        made["hf_example"] = hf_distiller.HFDistillLoop(hf_module, pair.student, pair.teacher, pair.windows,
                                                        batch_size, total, device, made["plain"].precision,
                                                        pair.data.eos_token_id)
    return made


def interleaved_round(pair: Pair, args, device: torch.device, hf_module) -> dict:
    made = loops(pair, args.warmup + args.steps * args.block_steps, args.batch_size, device, hf_module)
    order = list(made.items())
    first = {}
    for i in range(args.warmup):
        for _, loop in order if i % 2 == 0 else order[::-1]:
            loop.step()
        if i == 0 and "hf_example" in made:  # its causal-LM term: shifted targets, so close to ours, not equal
            first["hf_example_clm"] = float(made["hf_example"].distiller.last_loss_clm)
    times = {name: [] for name in made}
    for i in range(args.steps):
        for name, loop in order if i % 2 == 0 else order[::-1]:
            times[name].append(timed(loop, args.block_steps, device))
    first.update({name: made[name].losses[0][1] for name in ("plain", "distill")})  # same student and batch
    if "hf_example" in made:
        made["hf_example"].close()
    return {"times": times, "first_step_lm_loss": first,
            "settings": {"precision": made["plain"].precision, "compile": made["plain"].compiled}}


def profile_distill(pair: Pair, args, device: torch.device, steps: int = 5) -> dict:
    """Where a distillation step's time goes (torch.profiler after warm-up), ms per step."""
    from torch.profiler import ProfilerActivity, profile

    loop = loops(pair, args.warmup + steps, args.batch_size, device, None)["distill"]
    for _ in range(args.warmup):
        loop.step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            loop.step()
        sync(device)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return {"self_cpu_ms_per_step": round(total / 1000 / steps, 2),
            "top_self_cpu_ms_per_step": [(e.key, round(e.self_cpu_time_total / 1000 / steps, 2))
                                         for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]]}


def summarise(pair: Pair, rounds: list[dict]) -> dict:
    times = {name: [s for r in rounds for s in r["times"][name]] for name in rounds[0]["times"]}
    plain, dist = times["plain"], times["distill"]
    entry = {**pair.describe(), "tokens_per_step": None, "settings": rounds[0]["settings"],
             "step_ms": {name: common.spread([1000 * s for s in t]) for name, t in times.items()},
             # distill / plain: > 1 means a distillation step takes that many plain steps' time
             "ratio_distill_vs_plain": common.median(dist) / common.median(plain),
             "ratio_distill_vs_plain_paired": common.median([d / p for d, p in zip(dist, plain, strict=True)]),
             "ratio_distill_vs_plain_per_round": [round(common.median(r["times"]["distill"]) /
                                                        common.median(r["times"]["plain"]), 3) for r in rounds],
             "first_step_lm_loss": rounds[0]["first_step_lm_loss"]}
    entry["measured_over_flop_ratio"] = entry["ratio_distill_vs_plain"] / entry["flop_ratio"]
    if "hf_example" in times:
        hf = times["hf_example"]
        # HF example / ours: > 1 means our distillation step is that many times faster
        entry["ratio_hf_vs_ours"] = common.median(hf) / common.median(dist)
        entry["ratio_hf_vs_ours_paired"] = common.median([h / d for h, d in zip(hf, dist, strict=True)])
        entry["ratio_hf_vs_ours_per_round"] = [round(common.median(r["times"]["hf_example"]) /
                                                     common.median(r["times"]["distill"]), 3) for r in rounds]
        entry["ratio_hf_example_vs_plain"] = common.median(hf) / common.median(plain)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--data", default=None, help="a prepared DATA_DIR (default: stdlib corpus, cached)")
    parser.add_argument("--vocab", type=int, default=8192, help="tokenizer size of the default corpus")
    parser.add_argument("--models", default=None, help=f"comma-separated teachers, of {', '.join(MODELS)} "
                                                       f"(default: {DEFAULT_MODELS})")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per model (fresh models each)")
    parser.add_argument("--steps", type=int, default=12, help="timed steps (blocks) per round and loop")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per round and loop (compilation); >= 1")
    parser.add_argument("--block-steps", type=int, default=None, help="steps between two host syncs "
                                                                      "(default: 1 on CPU, 5 on a GPU)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per step (train's default: 8)")
    parser.add_argument("--precision", default="auto", help="as train's --precision (default: its default)")
    parser.add_argument("--compile", default="auto", help="as train's --compile (default: its default)")
    parser.add_argument("--hf-distiller", default=None,
                        help="a checkout holding the HF distillation example (default: bench/.peers/"
                             "transformers-research-projects, used when present)")
    parser.add_argument("--no-hf", action="store_true", help="leave the HF example out")
    parser.add_argument("--quick", action="store_true", help="one model, 2 rounds of 6 timed steps")
    parser.add_argument("--profile", action="store_true", help="also profile our distillation step")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/distill_step.json)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: no CUDA GPU is visible to torch here; run it on a GPU machine or use --device cpu")
    if args.quick:
        args.rounds, args.steps = 2, 6
    args.models = args.models or (QUICK_MODELS if args.quick else DEFAULT_MODELS)[device.type]
    args.block_steps = args.block_steps or (5 if device.type == "cuda" else 1)
    if min(args.warmup, args.steps, args.rounds, args.block_steps) < 1:
        fail("--warmup, --steps, --rounds and --block-steps must be at least 1")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        fail(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(MODELS)}")

    from bench import hf_distiller

    hf_module, hf_note = None, None
    if args.no_hf:
        hf_note = "left out (--no-hf)"
    elif args.hf_distiller or hf_distiller.DEFAULT_CHECKOUT.exists():
        try:
            hf_distiller.example_dir(args.hf_distiller)
        except FileNotFoundError as exc:
            fail(str(exc))
        hf_module = hf_distiller.load_module(args.hf_distiller)
        hf_note = str(Path(hf_module.__file__).resolve())
    else:
        hf_note = f"not run: no checkout at {hf_distiller.DEFAULT_CHECKOUT} ({hf_distiller.GET})"
        print(f"HF example {hf_note}", flush=True)

    data_dir = Path(args.data) if args.data else common.prepared_data(vocab=args.vocab)
    machine = common.machine()
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    result = {"benchmark": "distill_step", "device": str(device), "machine": machine, "data": str(data_dir),
              "batch_size": args.batch_size, "rounds": args.rounds, "timed_steps_per_round": args.steps,
              "block_steps": args.block_steps, "warmup_steps_per_round": args.warmup,
              "peers": {"plain": "training.trainer.step.Stepper", "distill": "training.trainer.distill.stepper_factory",
                        "hf_example": hf_note}, "models": {}}
    with tempfile.TemporaryDirectory(prefix="distill-bench-") as tmp:
        for name in args.models.split(","):
            pair = Pair(data_dir, name, device, args.precision, args.compile, Path(tmp))
            rounds = []
            for r in range(args.rounds):
                rounds.append(interleaved_round(pair, args, device, hf_module))
                print(f"{name} round {r + 1}/{args.rounds}: " + ", ".join(
                    f"{peer} {1000 * common.median(t):.1f} ms" for peer, t in rounds[-1]["times"].items()), flush=True)
            entry = summarise(pair, rounds)
            entry["tokens_per_step"] = args.batch_size * pair.block_size
            if args.profile:
                entry["profile_distill"] = profile_distill(pair, args, device)
            result["models"][name] = entry
            print(f"{name}: distill / plain {entry['ratio_distill_vs_plain']:.2f}x "
                  f"(paired {entry['ratio_distill_vs_plain_paired']:.2f}x; FLOP ratio {entry['flop_ratio']:.2f}x)"
                  + (f" | HF example / ours {entry['ratio_hf_vs_ours']:.2f}x" if "ratio_hf_vs_ours" in entry else ""),
                  flush=True)
    result["machine"]["load_avg_1m_end"] = common.machine()["load_avg_1m"]
    path = common.write_result("distill_step", result, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
