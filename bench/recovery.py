"""Seconds from a killed worker to the next finished step, and from SIGTERM to a saved checkpoint and exit.

Two local torchrun node agents form one elastic job (c10d rendezvous on 127.0.0.1, --nnodes 1:2, one
worker each, gloo on CPU), exactly as two pods of the training Job would. When both train and a
checkpoint exists, node 1 dies hard: kill -9 of its agent and of its worker (torchrun starts workers
in sessions of their own, so the whole process tree is walked). Node 0's worker fails its next
collective, its agent restarts it (--max-restarts), the rendezvous closes with the one node left,
and the new worker resumes from the newest checkpoint with world size 1 (the same global batch, by
accumulation). Measured from the kill:

    detect_s       node 0's agent reports its worker failed (by the time in the agent's log line)
    resumed_s      the new worker has loaded the checkpoint ("resumed from ...")
    recovery_s     the next finished step is logged ("step N/...")   <- the headline figure
    steps_lost     finished steps at the kill minus the resumed step (< --checkpoint-every)

Then SIGTERM goes to node 0's agent (what Kubernetes sends PID 1 of an evicted pod); it forwards the
signal to its worker, which finishes its step, checkpoints it and exits. Measured: SIGTERM -> the
"checkpoint of step N saved" line, and -> the agent's exit; and that N is the last finished step.

Env of the agents: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (torch's shared TCPStore deadlocks the
re-rendezvous, pytorch/pytorch#135712), OMP_NUM_THREADS=1 (two workers share the 2 cores).

    .venv/bin/python -m bench.recovery --repeat 2  # every variant (VARIANTS), twice each
    .venv/bin/python -m bench.recovery --quick     # the default variant once
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
import threading
import time
import uuid
from pathlib import Path

from bench import common
from testbed.processes import free_port, kill_tree

STEP = re.compile(r"^step (\d+)/\d+ \|")
RESUMED = re.compile(r"resumed from \S+ \(step (\d+),")
SAVED = re.compile(r"stop requested; checkpoint of step (\d+) saved")
AGENT_CLOCK = re.compile(r"^[EWI]\d{4} (\d\d):(\d\d):(\d\d\.\d+) ")  # torch's log prefix: E1123 10:58:58.315000


def agent_seconds_after(line: str, wall: float) -> float | None:
    """Seconds from the wall-clock time `wall` to the local time in an agent log line's own prefix."""
    m = AGENT_CLOCK.match(line)
    if m is None:
        return None
    day = time.localtime(wall)
    stamp = 3600 * int(m.group(1)) + 60 * int(m.group(2)) + float(m.group(3))
    return round((stamp - (3600 * day.tm_hour + 60 * day.tm_min + day.tm_sec + wall % 1)) % 86400, 2)


class Agent:
    """One torchrun node agent; every output line is kept with the monotonic time it was read."""

    def __init__(self, name: str, cmd: list[str], env: dict, log: Path):
        self.name = name
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                     env=env, cwd=common.ROOT, start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        self._log = open(log, "w")  # noqa: SIM115 - closed by the reader thread
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            now = time.monotonic()
            self.lines.append((now, line.rstrip("\n")))
            self._log.write(f"{now:.3f} {line}")  # the read time, to line the two nodes' logs up
            self._log.flush()
        self._log.close()

    def first(self, pattern: re.Pattern | str, after: float = 0.0) -> tuple[float, re.Match | str] | None:
        for t, line in list(self.lines):
            if t < after:
                continue
            if isinstance(pattern, str):
                if pattern in line:
                    return t, line
            elif (m := pattern.search(line)) is not None:
                return t, m
        return None

    def steps(self) -> list[int]:
        return [int(m.group(1)) for _, line in list(self.lines) if (m := STEP.search(line))]


def wait_for(predicate, timeout: float, what: str, agents: list[Agent]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    tails = "\n".join(f"--- {a.name}\n" + "\n".join(line for _, line in a.lines[-15:]) for a in agents)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}\n{tails}")


def scenario(data_dir: Path, work: Path, args, rdzv_extra: str, mode: str = "kill", extra_env=None) -> dict:
    run = work / "run"
    port, rdzv_id = free_port(), f"bench-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
               PYTHONPATH=str(common.ROOT), **(extra_env or {}))
    train = ["-m", "training", "train", "--data", str(data_dir), "--out", str(run), "--preset", "tiny",
             "--block-size", str(args.block_size), "--batch-size", str(args.batch_size), "--max-steps", "1000000",
             "--checkpoint-every", str(args.checkpoint_every), "--eval-every", "1000000", "--log-every", "1",
             "--dist-timeout", str(args.dist_timeout), "--peer-timeout", str(args.peer_timeout), "--no-progress",
             "--no-export", *args.train_extra]

    def agent(index: int) -> Agent:
        launcher = [sys.executable, "-m", args.launcher, "--nnodes", "1:2", "--nproc-per-node", "1",
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rdzv_id,
                    "--rdzv-conf", f"is_host={'true' if index == 0 else 'false'},join_timeout=60,last_call_timeout=1"
                    + (f",{rdzv_extra}" if rdzv_extra else ""),
                    "--max-restarts", "5", "--monitor-interval", "0.5"]
        return Agent(f"node{index}", launcher + train, env, work / f"node{index}.log")

    node0, node1 = agent(0), agent(1)
    agents = [node0, node1]
    try:
        kill_at = 2 * args.checkpoint_every + args.checkpoint_every // 2  # mid-way between two checkpoints
        wait_for(lambda: any(a.first("on 2 worker(s)") for a in agents)
                 and max((s for a in agents for s in a.steps()), default=0) >= kill_at,
                 args.timeout, f"two workers at step {kill_at}", agents)
        step_at_kill = max(s for a in agents for s in a.steps())
        # kill: SIGKILL, the kernel resets its connections. freeze: SIGSTOP, its sockets stay open and
        # nothing tells node 0 (a node that lost power or network): only heartbeats can notice.
        killed = kill_tree(node1.proc.pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
        t_kill, wall_kill = time.monotonic(), time.time()
        if mode == "kill":
            node1.proc.wait()
        step_at_kill = max([step_at_kill, *node1.steps()])  # a line read in the meantime

        resumed = wait_for(lambda: node0.first(RESUMED, after=t_kill), args.timeout, "node 0 to resume", agents)
        next_step = wait_for(lambda: node0.first(STEP, after=resumed[0]), args.timeout, "the next step", agents)
        detected = node0.first("failed (exitcode", after=t_kill)  # the agent noticed its worker died
        peer_lost = node0.first("peer lost", after=t_kill)  # the heartbeat noticed (freeze)
        resumed_step = int(resumed[1].group(1))
        recovery = {
            "recovery_s": round(next_step[0] - t_kill, 2),
            # by the agent's own clock: its log lines can reach us late when the cores are busy
            "detect_s": agent_seconds_after(detected[1], wall_kill) if detected else None,
            "peer_lost_s": round(peer_lost[0] - t_kill, 2) if peer_lost else None,
            "resumed_s": round(resumed[0] - t_kill, 2),
            "step_at_kill": step_at_kill, "resumed_step": resumed_step,
            "first_step_after": int(next_step[1].group(1)), "steps_lost": step_at_kill - resumed_step,
            "processes_killed": len(killed), "load_avg_1m": round(os.getloadavg()[0], 2),
        }

        # SIGTERM: let the survivor finish a few steps, then evict it.
        before = len(node0.steps())
        wait_for(lambda: len(node0.steps()) >= before + 3, args.timeout, "three more steps", agents)
        t_term = time.monotonic()
        node0.proc.send_signal(signal.SIGTERM)
        code = node0.proc.wait(timeout=args.timeout)
        t_exit = time.monotonic()
        node0._reader.join(timeout=10)
        saved = node0.first(SAVED, after=t_term)
        if saved is None:
            raise SystemExit("node 0 exited without the checkpoint line:\n" +
                             "\n".join(line for _, line in node0.lines[-20:]))
        finished = max(int(m.group(1)) for t, line in list(node0.lines) if t > resumed[0] and (m := STEP.search(line)))
        saved_step = int(saved[1].group(1))
        on_disk = sorted(int(p.name[5:]) for p in (run / "checkpoints").glob("step_*") if p.name[5:].isdigit())
        sigterm = {"sigterm_to_checkpoint_s": round(saved[0] - t_term, 2),
                   "sigterm_to_exit_s": round(t_exit - t_term, 2), "agent_exit_code": code,
                   "saved_step": saved_step, "last_finished_step": finished,
                   "saved_step_on_disk": saved_step in on_disk, "finished_steps_lost": finished - saved_step}
        return {**recovery, **sigterm}
    finally:
        for a in agents:
            if a.proc.poll() is None:
                kill_tree(a.proc.pid, signal.SIGKILL)
                a.proc.wait()


# launcher, extra --rdzv-conf, how node 1 is lost, extra train flags, extra environment. "kill" and "freeze" run
# training.launch, the launcher the chart runs, with its defaults; "kill-torchrun" is plain torchrun with
# torch's defaults (keep-alive every 5 s, 3 misses, a fresh interpreter per worker), the figure before any of this.
VARIANTS = {
    "kill": ("training.launch", "", "kill", [], {}),
    "kill-exec": ("training.launch", "", "kill", [], {"TRAINSTACK_WORKER_START": "exec"}),  # fresh interpreters
    "kill-eager": ("training.launch", "", "kill", ["--compile", "off"], {}),  # without the restart's compilation
    "freeze": ("training.launch", "", "freeze", [], {}),
    "kill-torchrun": ("torch.distributed.run", "", "kill", [], {}),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="a prepared DATA_DIR (default: stdlib corpus, cached)")
    parser.add_argument("--variants", default="kill,kill-exec,kill-eager,freeze,kill-torchrun",
                        help=f"scenarios to measure, of: {', '.join(VARIANTS)}")
    parser.add_argument("--dist-timeout", type=int, default=600, help="train's --dist-timeout (its default)")
    parser.add_argument("--peer-timeout", type=int, default=10, help="train's --peer-timeout")
    parser.add_argument("--repeat", type=int, default=1, help="scenarios per variant (medians are reported)")
    parser.add_argument("--checkpoint-every", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4, help="per worker (global batch: 2x this)")
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=180, help="seconds any one phase may take")
    parser.add_argument("--keep-logs", default=None, help="directory to keep the agents' logs in")
    parser.add_argument("--quick", action="store_true", help="the kill variant only, once")
    parser.add_argument("--out", default=None, help="result JSON (default bench/results/recovery.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.variants, args.repeat = "kill", 1

    data_dir = Path(args.data) if args.data else common.prepared_data()
    keys = ("recovery_s", "detect_s", "peer_lost_s", "resumed_s", "steps_lost", "sigterm_to_checkpoint_s",
            "sigterm_to_exit_s")
    result = {"benchmark": "recovery", "machine": common.machine(), "checkpoint_every": args.checkpoint_every,
              "model": f"tiny, block {args.block_size}, batch {args.batch_size} per worker, 2 -> 1 workers",
              "dist_timeout": args.dist_timeout, "peer_timeout": args.peer_timeout,
              "variants": {}}
    for variant in args.variants.split(","):
        runs = []
        args.launcher, rdzv_extra, mode, args.train_extra, extra_env = VARIANTS[variant]
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
                work = Path(args.keep_logs) / f"{variant}-{i}" if args.keep_logs else Path(tmp)
                work.mkdir(parents=True, exist_ok=True)
                runs.append(scenario(data_dir, work, args, rdzv_extra, mode, extra_env))
            print(f"{variant} {i + 1}/{args.repeat}: {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
        result["variants"][variant] = {
            "launcher": args.launcher, "rdzv_conf_extra": rdzv_extra, "node_lost_by": mode,
            "train_extra": args.train_extra, "env": extra_env,
            **{k: common.median([r[k] for r in runs if r[k] is not None] or [float("nan")]) for k in keys},
            "runs": runs}
    common.write_result("recovery", result, args.out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
