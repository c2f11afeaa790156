"""Time to the first step of `train`: cold, warm, and on a new node with and without the run's compile cache.

Each start is a real `python -m training train` process (--preset tiny, --log-every 1, --compile on,
the CLI's defaults otherwise), timed from its launch to its "step N/..." line; the line's own ms/step
is kept too (at --log-every 1 the compiling step's line shows its whole time). Per --n-layer, one
cold start trains 2 steps into a RUN_DIR; copies of that RUN_DIR then resume to step 4 as:

    cold          (the first start itself) empty compiler cache, empty RUN_DIR (blocks and head compiled)
    cold-whole    the same, compiling the whole model instead (TRAINSTACK_COMPILE_REGIONS=0)
    warm          the cold start's compiler cache (a restart on the same machine)
    new-node      an empty compiler cache, RUN_DIR with its compile_cache.tar.gz (a replacement pod)
    new-node-bare an empty compiler cache, RUN_DIR without it (what a new node paid before)
    eager         --compile off, warm RUN_DIR, 12 steps (`later_ms`: the median step after the first)
    cold-background  empty compiler cache, empty RUN_DIR, `--compile auto` (the default) on a long run:
                  the first step eager at once, the compile behind eager steps; stopped (SIGTERM) 10
                  steps after "compiled: switching at step S". Recorded: S, the seconds to the switch,
                  the eager steps' ms while the child compiles and the compiled steps' ms after it

`--race SECONDS` answers what the first step's time does not: which start is further along after a
while. Three cold starts of a long run (empty compiler cache, empty RUN_DIR) run for SECONDS each,
interleaved, rotating their order per round: `on` (the compile blocks the first step), `auto` (the
compile behind eager steps) and `off` (eager throughout). Recorded: the seconds from launch at which
each step line came, the steps done at every 15 s, and the seconds to steps 10, 25, 50, 100, 200.

Each compiler cache comes with a temp directory of its own (TMPDIR), so that nothing of an earlier
start is found there either (Inductor's ISA probes and, before the run's cache kept it, its
precompiled header lived under the temp directory). The variants of one round run one after
another, rounds rotate their order, and each figure carries the 1-minute load average when it was
taken; ratios are against `warm` of the same round. `--step-time` also times train's step (CLI
defaults: batch 8, --precision auto) eager, compiled by regions (the default), and compiled whole,
interleaved in one process.

    .venv/bin/python -m bench.cold_start                        # tiny at 2 and 6 layers, one round
    .venv/bin/python -m bench.cold_start --layers 6 --rounds 3 --step-time
    .venv/bin/python -m bench.cold_start --rounds 0 --step-time --step-rounds 12 --out bench/results/step_time.json
    .venv/bin/python -m bench.cold_start --rounds 0 --race 120 --race-rounds 2 --layers 6 --out bench/results/cold_start_race.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common

STEP = re.compile(r"step (\d+)/\d+ \|.*\| ([\d.,]+) ms/step")
SWITCH = re.compile(r"compiled: switching at step (\d+)")
VARIANTS = ("cold-whole", "warm", "new-node", "new-node-bare", "eager", "cold-background")
# A GPU compiles in line under `auto` (training/compile_cache/plan.py): no switch would ever come
GPU_VARIANTS = tuple(v for v in VARIANTS if v != "cold-background")
LONG_RUN = 100_000  # steps: long enough for `auto` to find the compile worth it


def _launch(data: Path, run: Path, cache: Path, max_steps: int, extra: list[str], env_extra: dict | None = None):
    """(launch time, the train process) with its own compiler cache and temp directory."""
    tmp = cache.with_name(f"{cache.name}-tmp")  # a new node's temp directory is empty too
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=str(cache), TMPDIR=str(tmp),
               PYTHONPATH=str(common.ROOT), **(env_extra or {}))
    cmd = [sys.executable, "-m", "training", "train", "--data", str(data), "--out", str(run),
           "--max-steps", str(max_steps), "--log-every", "1", "--eval-every", "1000000", "--no-progress",
           "--no-export", *extra]
    return time.monotonic(), subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)


def start(data: Path, run: Path, cache: Path, max_steps: int, extra: list[str], env_extra: dict | None = None,
          timeout: float = 900) -> dict:
    """Launch train; seconds to its first step line, that line's ms/step, the load average at the end."""
    began, proc = _launch(data, run, cache, max_steps, ["--compile", "on", *extra], env_extra)
    first, lines, later = None, [], []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if first is not None and (m := STEP.search(line)):
                later.append(float(m.group(2).replace(",", "")))
            elif first is None and (m := STEP.search(line)):
                first = {"first_step_s": round(time.monotonic() - began, 2),
                         "printed_ms": float(m.group(2).replace(",", ""))}
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    if code != 0 or first is None:
        raise SystemExit(f"train exited with {code}:\n" + "\n".join(lines[-20:]))
    said = [line for line in lines if "compil" in line or "eagerly" in line]
    return {**first, "later_ms": common.median(later) if later else None,
            "load_avg_1m": round(os.getloadavg()[0], 2), "said": said}


def background_start(data: Path, run: Path, cache: Path, extra: list[str], after_switch: int = 10,
                     timeout: float = 900) -> dict:
    """A cold start with `--compile auto` on a long run: first step, the switch, step times before and after."""
    began, proc = _launch(data, run, cache, LONG_RUN, ["--compile", "auto", *extra])
    first, switch, switch_s, steps, lines = None, None, None, {}, []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if m := STEP.search(line):
                steps[int(m.group(1))] = float(m.group(2).replace(",", ""))
                if first is None:
                    first = {"first_step_s": round(time.monotonic() - began, 2), "printed_ms": steps[int(m.group(1))]}
            elif switch is None and (m := SWITCH.search(line)):
                switch, switch_s = int(m.group(1)), round(time.monotonic() - began, 2)
            if (switch is not None and max(steps, default=0) >= switch + after_switch) or time.monotonic() - began > timeout:
                proc.terminate()  # a preemption: train saves and exits
                break
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if first is None or switch is None:
        raise SystemExit("no first step or no switch:\n" + "\n".join(lines[-20:]))
    overlap = [ms for step, ms in steps.items() if 1 < step < switch]
    compiled = [ms for step, ms in steps.items() if switch < step <= switch + after_switch]
    said = [line for line in lines if "compil" in line or "eagerly" in line]
    return {**first, "switch_step": switch, "switch_s": switch_s,
            "eager_ms_during_compile": common.median(overlap) if overlap else None,
            "compiled_ms_after": common.median(compiled) if compiled else None,
            "load_avg_1m": round(os.getloadavg()[0], 2), "said": said}


RACE_MARKS_S = 15  # steps done at every multiple of this
RACE_STEPS = (10, 25, 50, 100, 200)


def progress(data: Path, run: Path, cache: Path, compile_flag: str, shape: list[str], seconds: float) -> dict:
    """A cold start of a long run for `seconds`: when each step line came (seconds from launch)."""
    began, proc = _launch(data, run, cache, LONG_RUN, ["--compile", compile_flag, *shape])
    reached, said = [], []
    try:
        for line in proc.stdout:
            now = time.monotonic() - began
            if m := STEP.search(line):
                reached.append((round(now, 2), int(m.group(1))))
            elif "compil" in line or "eagerly" in line:
                said.append(line.rstrip())
            if now > seconds:
                break
    finally:
        proc.terminate()  # a preemption: train saves and exits
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
    if not reached:
        raise SystemExit(f"--compile {compile_flag}: no step in {seconds} s:\n" + "\n".join(said[-20:]))
    marks = range(RACE_MARKS_S, int(seconds) + 1, RACE_MARKS_S)
    return {"steps_at_s": {t: max((step for at, step in reached if at <= t), default=0) for t in marks},
            "s_to_step": {k: next((at for at, step in reached if step >= k), None) for k in RACE_STEPS},
            "first_step_s": reached[0][0], "reached": reached, "load_avg_1m": round(os.getloadavg()[0], 2),
            "said": said}


def race(data: Path, shape: list[str], seconds: float, rounds: int) -> dict:
    """--compile on / auto / off from cold, interleaved: which is further along, and when."""
    flags = ["on", "auto", "off"]
    runs = {flag: [] for flag in flags}
    for r in range(rounds):
        for flag in flags[r % 3:] + flags[:r % 3]:
            with tempfile.TemporaryDirectory(prefix="bench-race-") as tmp:
                runs[flag].append(progress(data, Path(tmp) / "run", Path(tmp) / "cache", flag, shape, seconds))
            print(f"race round {r + 1} --compile {flag}: {json.dumps(runs[flag][-1]['steps_at_s'])}",
                  file=sys.stderr, flush=True)
    marks = runs["on"][0]["steps_at_s"].keys()
    return {"seconds": seconds, "rounds": rounds,
            "median_steps_at_s": {flag: {t: common.median([run["steps_at_s"][t] for run in runs[flag]])
                                         for t in marks} for flag in flags},
            "runs": runs}


def one_round(data: Path, shape: list[str], order: list[str], work: Path) -> dict:
    """One cold start, then each variant of `order` from a copy of its RUN_DIR; `shape`: train's model flags."""
    cache = work / "cache-first"
    results = {"cold": start(data, work / "run", cache, 2, shape)}
    for variant in order:
        run = work / f"run-{variant}"
        shutil.copytree(work / "run", run)
        fresh = work / f"cache-{variant}"
        if variant == "cold-whole":
            shutil.rmtree(run)
            results[variant] = start(data, run, fresh, 2, shape, {"TRAINSTACK_COMPILE_REGIONS": "0"})
        elif variant == "cold-background":
            shutil.rmtree(run)
            results[variant] = background_start(data, run, fresh, shape)
        elif variant == "warm":
            results[variant] = start(data, run, cache, 4, shape)
        elif variant == "new-node":
            results[variant] = start(data, run, fresh, 4, shape)
        elif variant == "new-node-bare":
            (run / "compile_cache.tar.gz").unlink()
            results[variant] = start(data, run, fresh, 4, shape)
        else:
            results[variant] = start(data, run, cache, 14, [*shape, "--compile", "off"])  # 12 eager steps
    if "eager" in results and "cold-background" in results:  # the step time the overlap costs
        overlap = results["cold-background"]["eager_ms_during_compile"]
        results["cold-background"]["x_eager_step"] = round(overlap / results["eager"]["later_ms"], 2)
    return with_ratios(results)


def with_ratios(results: dict) -> dict:
    """Each start against the round's warm one: from launch to the line (x_warm) and as printed."""
    warm = results["warm"]
    for r in results.values():
        r["x_warm"] = round(r["first_step_s"] / warm["first_step_s"], 2)
        r["x_warm_printed"] = round(r["printed_ms"] / warm["printed_ms"], 3)
    return results


def step_times(n_layer: int, rounds: int, steps: int) -> dict:
    """train's step at the CLI defaults (batch 8, block 128 for tiny, --precision auto), interleaved."""
    import torch

    from training.compile_cache import regions
    from training.model.build import config_for, create_gpt, resolve_shape
    from training.trainer.optim import make_optimizer
    from training.trainer.step import Stepper, resolve_precision

    precision = resolve_precision("auto", torch.device("cpu"))
    shape = resolve_shape("tiny", n_layer, None, None, None)
    tokens = torch.randint(0, 8192, (8, shape.block_size + 1))
    batch = [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]
    steppers = {}
    for name in ("eager", "regional", "whole"):
        torch.manual_seed(0)
        model = create_gpt(config_for(shape, 8192, dropout=0.0, eos_token_id=0))
        if name != "eager":
            os.environ[regions.REGIONS] = "1" if name == "regional" else "0"
            regions.compile_in_place(model)
        steppers[name] = Stepper(model, make_optimizer(model, common.LR, common.WEIGHT_DECAY, common.BETAS),
                                 torch.device("cpu"), precision, common.GRAD_CLIP, 1, 8)
        for _ in range(3):  # compile and warm up
            steppers[name].step(batch)
    times = {name: [] for name in steppers}
    for r in range(rounds):
        for name in list(steppers)[r % 3:] + list(steppers)[:r % 3]:
            began = time.perf_counter()
            for _ in range(steps):
                loss, _ = steppers[name].step(batch)
            loss.item()
            times[name].append((time.perf_counter() - began) / steps)
    os.environ.pop(regions.REGIONS, None)
    ms = {name: round(1000 * common.median(t), 2) for name, t in times.items()}
    return {"n_layer": n_layer, "precision": precision, "batch_size": 8, "block_size": shape.block_size,
            "median_ms": ms, "regional_over_whole": round(ms["regional"] / ms["whole"], 3),
            "regional_over_eager": round(ms["regional"] / ms["eager"], 3),
            "load_avg_1m": round(os.getloadavg()[0], 2), "rounds": rounds, "steps_per_round": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="a prepared DATA_DIR (default: stdlib corpus, cached)")
    parser.add_argument("--layers", default="2,6", help="--n-layer values of --preset tiny")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of: {', '.join(VARIANTS)} (cold always runs)")
    parser.add_argument("--step-time", action="store_true", help="also time the step eager/by regions/whole")
    parser.add_argument("--step-rounds", type=int, default=6, help="interleaved rounds of 5 steps per variant")
    parser.add_argument("--race", type=float, default=0, help="also race --compile on/auto/off from cold for SECONDS")
    parser.add_argument("--race-rounds", type=int, default=1)
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/cold_start.json)")
    args = parser.parse_args(argv)

    data = Path(args.data) if args.data else common.prepared_data()
    variants = args.variants.split(",")
    result = {"benchmark": "cold_start", "machine": common.machine(), "preset": "tiny", "layers": {}}
    for n_layer in (int(n) for n in args.layers.split(",") if args.rounds > 0):
        rounds = []
        for r in range(args.rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            with tempfile.TemporaryDirectory(prefix="bench-cold-start-") as tmp:
                rounds.append(one_round(data, ["--preset", "tiny", "--n-layer", str(n_layer)], order, Path(tmp)))
            print(f"n_layer {n_layer} round {r + 1}: {json.dumps(rounds[-1])}", file=sys.stderr, flush=True)
        names = rounds[0].keys()
        result["layers"][str(n_layer)] = {
            "median_first_step_s": {v: common.median([r[v]["first_step_s"] for r in rounds]) for v in names},
            "median_x_warm": {v: common.median([r[v]["x_warm"] for r in rounds]) for v in names},
            "median_x_warm_printed": {v: common.median([r[v]["x_warm_printed"] for r in rounds]) for v in names},
            "rounds": rounds}
    if args.race:
        result["race"] = [race(data, ["--preset", "tiny", "--n-layer", n], args.race, args.race_rounds)
                          for n in args.layers.split(",")]
    if args.step_time:
        result["step_time"] = [step_times(int(n), args.step_rounds, steps=5) for n in args.layers.split(",")]
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    common.write_result("cold_start", result, args.out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
