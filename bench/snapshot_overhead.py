"""Step-time overhead of --snapshot-uri when the object store is slow.

Three configurations of the same `python -m training train` run (one process, CPU), interleaved round
by round so machine load hits them alike:
    local   no --snapshot-uri (the peer)
    fast    --snapshot-uri s3://... on moto's S3 server on 127.0.0.1, full speed
    slow    the same server behind a proxy that passes uploads at --rate bytes/s (a slow store:
            slower than the checkpoint cadence, so the bounded queue drops superseded checkpoints)
Model `tiny` (--preset tiny: 2 x 128, block 128, vocabulary 8192: 1.46M parameters, a 17.6 MB
checkpoint with its AdamW moments), batch 8, on the stdlib corpus, a checkpoint every 10 steps.

Step time is what `train` logs as perf/step_ms in RUN_DIR/metrics.jsonl: the loop's time per step with
checkpoint time taken out (uploads run on a thread and would show up here if they slowed steps).
Checkpoint time (perf/checkpoint_s) is the local save, which the upload must not lengthen either.
The S3 server and the proxy run in this process, on the same 2 cores as the trainer, in all three
configurations (idle for `local`).

    .venv/bin/python -m bench.snapshot_overhead              # 3 rounds
    .venv/bin/python -m bench.snapshot_overhead --quick      # 1 round, fewer steps
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common
from testbed.object_stores import ThrottledProxy, moto_s3
from training.observability import run_log

MODEL = ["--preset", "tiny"]


def train_once(data: Path, run: Path, steps: int, env: dict, snapshot: str | None) -> dict:
    args = [sys.executable, "-m", "training", "train", "--data", str(data), "--out", str(run), *MODEL,
            "--batch-size", "8", "--max-steps", str(steps), "--checkpoint-every", "10", "--keep-checkpoints", "2",
            "--log-every", "5", "--eval-every", "1000000", "--no-progress", "--no-export"]
    if snapshot:
        args += ["--snapshot-uri", snapshot, "--snapshot-wait", "1"]
    began = time.perf_counter()
    done = subprocess.run(args, cwd=common.ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"train failed ({done.returncode}): {done.stderr[-2000:]}")
    log = run_log.read(run)
    step_ms = [v for s, _, v in log.series["perf/step_ms"] if s > 5]  # the first window includes warm-up
    uploads = [e for e in log.events if e["event"] == "upload" and e.get("what") == "checkpoint"]
    return {"step_ms": statistics.median(step_ms), "step_ms_windows": [round(v, 1) for v in step_ms],
            "checkpoint_s": statistics.median(v for _, _, v in log.series["perf/checkpoint_s"]),
            "wall_s": round(wall, 2),
            "uploads_ok": sum(1 for e in uploads if e.get("ok")),
            "uploads_superseded": sum(1 for e in uploads if e.get("skipped") == "superseded"),
            "upload_s": [e["seconds"] for e in uploads if e.get("ok")],
            "stderr_warnings": [line for line in done.stderr.splitlines() if "warning" in line][:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rate", type=float, default=2e6, help="slow store upload rate, bytes/s")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 1, 30

    data = common.prepared_data()
    load_start = round(os.getloadavg()[0], 2)
    runs: dict[str, list[dict]] = {"local": [], "fast": [], "slow": []}
    with moto_s3("bench") as s3_env, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **s3_env, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(common.ROOT)}
        port = int(s3_env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
        proxy = ThrottledProxy(port, rate=args.rate)
        slow_env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.port}"}
        try:
            for r in range(args.rounds):
                for name, run_env, uri in (("local", env, None), ("fast", env, f"s3://bench/fast{r}"),
                                           ("slow", slow_env, f"s3://bench/slow{r}")):
                    result = train_once(data, Path(tmp) / f"{name}{r}", args.steps, run_env, uri)
                    runs[name].append(result)
                    print(f"round {r + 1} {name:5s}: {result['step_ms']:.1f} ms/step, checkpoint "
                          f"{result['checkpoint_s']:.2f} s, {result['uploads_ok']} uploaded, "
                          f"{result['uploads_superseded']} superseded", flush=True)
        finally:
            proxy.close()
        newest = sorted((Path(tmp) / "local0" / "checkpoints").glob("step_*"))[-1]
        checkpoint_bytes = sum(f.stat().st_size for f in newest.iterdir())
    summary = {}
    for name, results in runs.items():
        step = statistics.median(r["step_ms"] for r in results)
        summary[name] = {"step_ms": round(step, 2), "checkpoint_s": round(statistics.median(
            r["checkpoint_s"] for r in results), 3), "ratio_to_local": None}
    for name in ("fast", "slow"):
        summary[name]["ratio_to_local"] = round(summary[name]["step_ms"] / summary["local"]["step_ms"], 3)
        summary[name]["per_round_ratio"] = [round(a["step_ms"] / b["step_ms"], 3)
                                            for a, b in zip(runs[name], runs["local"], strict=True)]
    result = {"benchmark": "snapshot_overhead", "command": "bench/snapshot_overhead.py" + (" --quick" if args.quick else ""),
              "model": " ".join(MODEL), "steps": args.steps, "checkpoint_every": 10, "slow_rate_bytes_s": args.rate,
              "checkpoint_bytes": checkpoint_bytes,
              "summary": summary, "runs": runs,
              "machine": {**common.machine(), "load_avg_1m_start": load_start}}
    path = common.write_result("snapshot_overhead", result, args.out)
    for name, s in summary.items():
        print(f"{name:5s} {s['step_ms']:8.1f} ms/step  checkpoint {s['checkpoint_s']:.2f} s  "
              f"ratio {s['ratio_to_local'] or 1.0:.3f}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
