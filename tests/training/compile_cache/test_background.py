"""Compile behind eager steps (training/compile_cache/background.py): on a cold start `auto` trains eagerly
at once while a child process compiles, then switches to the compiled model; a failed child leaves the
run eager with one line; the child never outlives the trainer."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from testbed.processes import free_port
from tests.support.training_runs import losses, spawn, torchrun, train, train_args
from training.compile_cache import background, blob, plan
from training.model import memory
from training.trainer import train as train_module

SWITCH = re.compile(r"^(rank \d+: )?compiled: switching at step (\d+)$", re.M)


def _cold_caches(tmp_path: Path, monkeypatch) -> Path:
    """Empty compiler caches of this test's own, and a record that a compile costs 1 s here, so `auto`
    compiles a run of any length (the decision is test_warm_start's)."""
    cache = tmp_path / "inductor"
    cache.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (cache / plan.RECORD).write_text('{"cold_s": 1.0}')
    return cache


def _processes_with(cache: Path) -> list[int]:
    """Our processes whose environment names this test's compiler cache (the trainer's children)."""
    wanted = f"TORCHINDUCTOR_CACHE_DIR={cache}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _wait_for(log: Path, pattern: re.Pattern, proc: subprocess.Popen, count: int = 1, timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.findall(log.read_text())
        if len(found) >= count:
            return found
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.5)
    raise AssertionError(f"no {pattern.pattern!r} in {timeout} s: {log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen, log: Path, codes=(0, 143)) -> str:
    """SIGTERM (a preemption): the trainer saves, and exits; the child must go with it."""
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) in codes, log.read_text()[-3000:]
    return log.read_text()


@pytest.mark.timeout(600)
def test_the_losses_are_the_eager_runs_across_the_switch(data_dir, tmp_path, monkeypatch):
    """Same seed and data, eager throughout vs switching: the curve is the same within float tolerance."""
    _cold_caches(tmp_path, monkeypatch)
    (tmp_path / "inductor" / plan.RECORD).write_text('{"cold_s": 0.001}')
    flags = ("--max-steps", "40", "--precision", "fp32", "--no-export")
    assert train(data_dir, tmp_path / "eager", *flags)[0] == 0
    switches = []
    real_poll = plan.CompilePlan._poll

    def slow_steps(self, step, model):  # the tiny model's steps are faster than any compile: wait for it
        while self._child is not None and self._child.poll() is None:
            time.sleep(0.2)
        real_poll(self, step, model)
        if not self.pending:
            switches.append(step + 1)

    monkeypatch.setattr(plan.CompilePlan, "_poll", slow_steps)
    torch._dynamo.utils.counters.clear()
    code, out, err = train(data_dir, tmp_path / "switched", "--compile", "auto", *flags)
    assert code == 0, err
    assert switches and SWITCH.search(out), out
    # the trainer's own compile found every graph the child built (a thread count of its own missed them all)
    inductor = torch._dynamo.utils.counters["inductor"]
    assert inductor["fxgraph_cache_hit"] > 0 and inductor["fxgraph_cache_miss"] == 0, dict(inductor)
    torch._dynamo.reset()  # the switched model's graphs stay in this process otherwise, for later tests to find
    eager, switched = losses(tmp_path / "eager"), losses(tmp_path / "switched")
    assert sorted(eager) == sorted(switched) == list(range(1, 41))
    for step in eager:
        assert switched[step] == pytest.approx(eager[step], rel=2e-3, abs=2e-3), (step, eager[step], switched[step])


@pytest.mark.timeout(600)
def test_a_failed_background_compile_leaves_the_run_eager_with_one_line(data_dir, tmp_path, monkeypatch):
    cache = _cold_caches(tmp_path, monkeypatch)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))  # Inductor's C++ compiler (config.cpp.cxx)
    run, log = tmp_path / "run", tmp_path / "log"
    proc = spawn([sys.executable, *train_args(data_dir, run, "--compile", "auto", "--max-steps", "100000",
                                              "--log-every", "50", "--precision", "fp32", "--no-export")], log)
    try:
        _wait_for(log, re.compile(r"^the background compile failed", re.M), proc)
        time.sleep(2)  # a few eager steps after it
    finally:
        out = _stop(proc, log)
    failures = [line for line in out.splitlines() if "background compile failed" in line]
    assert len(failures) == 1 and "training on eagerly" in failures[0], out
    assert "switching" not in out and not (run / blob.BLOB).exists(), out
    assert _processes_with(cache) == []


def _remember_children(monkeypatch) -> list:
    children = []
    real_init = background.BackgroundCompile.__init__

    def remember(self, wanted):
        real_init(self, wanted)
        children.append(self.process)

    monkeypatch.setattr(background.BackgroundCompile, "__init__", remember)
    return children


def test_a_run_that_ends_before_the_switch_ends_the_child(data_dir, tmp_path, monkeypatch):
    """The last step comes before the compile is done: train exits 0, eager throughout, the child gone."""
    cache = _cold_caches(tmp_path, monkeypatch)
    (cache / plan.RECORD).write_text('{"cold_s": 1e-6}')  # worth it however short the run
    children = _remember_children(monkeypatch)
    code, out, err = train(data_dir, tmp_path / "run", "--compile", "auto", "--max-steps", "4", "--no-export")
    assert code == 0, err
    assert "compiling in the background" in out and "switching" not in out, out
    assert len(children) == 1 and children[0].returncode == -signal.SIGKILL
    assert _processes_with(tmp_path / "inductor") == []
    assert sorted(losses(tmp_path / "run")) == [1, 2, 3, 4]


def test_the_child_is_ended_when_the_trainer_fails(data_dir, tmp_path, monkeypatch):
    """An error in a step while the child compiles: train raises, and the child is gone."""
    _cold_caches(tmp_path, monkeypatch)
    children = _remember_children(monkeypatch)
    real_guard = train_module._first_step_guard
    steps = []

    def fail_at_step_3(*args):
        steps.append(1)
        if len(steps) == 3:
            raise RuntimeError("a step failed")
        return real_guard(*args)

    monkeypatch.setattr(train_module, "_first_step_guard", fail_at_step_3)
    with pytest.raises(RuntimeError, match="a step failed"):
        train(data_dir, tmp_path / "run", "--compile", "auto", "--max-steps", "1000", "--no-export")
    assert len(children) == 1 and children[0].poll() is not None
    assert _processes_with(tmp_path / "inductor") == []


def test_the_child_dies_with_a_killed_trainer(tmp_path, monkeypatch):
    """kill -9 of the trainer (no `finally` runs): the kernel ends the child (PR_SET_PDEATHSIG)."""
    cache = _cold_caches(tmp_path, monkeypatch)
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from transformers import GPT2Config; "
         "from training.compile_cache import background; "
         "c = background.BackgroundCompile(background.spec(GPT2Config(n_layer=1, n_embd=32, n_head=2, "
         "vocab_size=64, n_positions=16), 'cpu', 'fp32', [[2]], 16)); print(c.process.pid, flush=True); "
         "time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
    child = int(trainer.stdout.readline())
    time.sleep(1)  # past the child's prctl
    trainer.kill()
    trainer.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and child in _processes_with(cache):
        time.sleep(0.2)
    assert _processes_with(cache) == []


@pytest.mark.timeout(600)
def test_a_cold_start_trains_eagerly_then_every_rank_switches_at_the_same_step(data_dir, tmp_path, monkeypatch):
    """Two ranks under torchrun: eager steps at once, the child's compile on the node's rank 0, then both
    ranks switch together; the compile cache saved after the switch makes a later start of the run warm."""
    cache = _cold_caches(tmp_path, monkeypatch)
    # two one-thread ranks keep both cores of this machine busy: no core is spare, so the child is forced
    monkeypatch.setenv(background.SWITCH, "1")
    run, log = tmp_path / "run", tmp_path / "log"
    flags = ("--compile", "auto", "--max-steps", "100000", "--log-every", "1", "--precision", "fp32", "--no-export")
    launcher = torchrun("--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d",
                        f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--max-restarts=0")
    proc = spawn(launcher + train_args(data_dir, run, *flags), log)
    try:
        found = _wait_for(log, SWITCH, proc, count=2)
        _wait_for(log, re.compile(r"^saved the compile cache", re.M), proc)
    finally:
        out = _stop(proc, log, codes=(0, 1, 143))  # torchrun's agent exits 1 on SIGTERM
    assert sorted(prefix for prefix, _ in found) == ["", "rank 1: "], found
    assert len({step for _, step in found}) == 1, found  # the same step on both ranks
    switched = int(found[0][1])
    assert out.count("compiling in the background (first start; training eagerly meanwhile)") == 1, out
    assert "compiling the model (first start" not in out, out  # the first step did not wait for it
    before = out[:out.index("compiled: switching")]
    assert re.search(r"^step +1/", before, re.M), out  # a step printed before the compile was done
    assert out.index("compiling in the background") < out.index("compiled: switching") < out.index("compiled the model in")
    assert switched > 1 and (run / blob.BLOB).is_file()  # saved after the switch: a later start is warm
    assert _processes_with(cache) == []

    # the same run resumed: warm from its own cache, compiled at once
    proc = spawn([sys.executable, *train_args(data_dir, run, *flags)], log)
    try:
        _wait_for(log, re.compile(r"warm start", re.M), proc)
    finally:
        out = _stop(proc, log)
    assert "compiling in the background" not in out, out


def test_the_child_runs_only_where_a_core_can_be_its(monkeypatch):
    """An idle core, or one that local rank 0 gives up; none when every core steps with a one-thread rank."""
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(background, "_cpu_quota", lambda: None)
    monkeypatch.delenv(background.SWITCH, raising=False)
    assert background.spare(local_ranks=1, threads=2) == "free"
    assert background.spare(local_ranks=1, threads=4) == "take"  # torch's default: a thread per core
    assert background.spare(local_ranks=2, threads=2) == "take"
    assert background.spare(local_ranks=4, threads=1) is None  # torchrun's one thread per rank, every core
    monkeypatch.setattr(background, "_cpu_quota", lambda: 1.5)  # a pod's CPU limit: 2 of the 4 cores
    assert background.cores() == 2 and background.spare(local_ranks=1, threads=2) == "take"
    assert background.spare(local_ranks=2, threads=1) is None
    monkeypatch.setattr(background, "_cpu_quota", lambda: 0.5)
    assert background.cores() == 1 and background.spare(local_ranks=1, threads=4) is None  # one core: in line
    monkeypatch.setenv(background.SWITCH, "1")
    assert background.spare(local_ranks=1, threads=1) == "free"  # forced, at the child's lower priority
    monkeypatch.setenv(background.SWITCH, "0")
    monkeypatch.setattr(background, "_cpu_quota", lambda: None)
    assert background.spare(local_ranks=1, threads=1) is None


@pytest.mark.parametrize(("files", "cpus"), [
    ({"cpu.max": "150000 100000"}, 1.5), ({"cpu.max": "max 100000"}, None),
    ({"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}, 0.5),
    ({"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"}, None), ({}, None)])
def test_the_cpu_quota_is_read_from_cgroup_v2_and_v1(tmp_path, monkeypatch, files, cpus):
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    monkeypatch.setattr(background, "CPU_QUOTA_FILES", (str(tmp_path / "cpu.max"), str(tmp_path / "cpu.cfs_quota_us")))
    assert background._cpu_quota() == cpus


class _Child:  # the child's life is the other tests'; here only what the plan does around it
    def __init__(self, wanted):
        self.wanted, self.status, self.compile_s, self.closed = wanted, None, None, False

    def poll(self):
        return self.status

    def close(self):
        self.closed = True


@pytest.mark.parametrize(("spare", "during"), [("take", 3), ("free", 4)])
def test_the_child_takes_a_thread_only_when_no_core_is_idle_and_gives_it_back_when_done(
        tmp_path, monkeypatch, spare, during):
    _cold_caches(tmp_path, monkeypatch)
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(background, "_cpu_quota", lambda: None)
    monkeypatch.setattr(plan, "BackgroundCompile", _Child)
    monkeypatch.setattr(plan, "compile_in_place", lambda model: model)
    threads = torch.get_num_threads()
    said = []
    (tmp_path / "run").mkdir()
    try:
        torch.set_num_threads(4)
        compiling = plan.CompilePlan("auto", tmp_path / "run", torch.device("cpu"), 0, 10**6, True,
                                     say=said.append)
        compiling._start_background({"model": "spec"}, spare)
        assert compiling._child.wanted == {"model": "spec"} and torch.get_num_threads() == during
        compiling.after_step(5, None)
        assert torch.get_num_threads() == during and compiling.pending  # still compiling
        child = compiling._child
        child.status, child.compile_s = "", 12.5
        compiling.after_step(6, None)  # done: the core back at once, the switch at the next step
        assert child.closed and torch.get_num_threads() == 4 and not compiling.pending
        switching = said.index("compiled: switching at step 7")
        assert said[switching + 1] == "compiled the model in 12 s (behind eager steps)", said
        assert plan.expected_cold_seconds() == 12.5  # the child's own compile, not its wall time
        compiling.close()  # the trainer's `finally` after a switch: nothing more to give back
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(threads)


def test_a_child_that_cannot_start_leaves_the_run_eager_with_one_line(tmp_path, monkeypatch):
    _cold_caches(tmp_path, monkeypatch)

    def no_process_left(wanted):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(plan, "BackgroundCompile", no_process_left)
    said = []
    compiling = plan.CompilePlan("auto", tmp_path / "run", torch.device("cpu"), 0, 10**6, True,
                                 say=said.append)
    threads = torch.get_num_threads()
    compiling._start_background({"model": "spec"}, "take")
    compiling.after_step(2, None)
    assert not compiling.pending and torch.get_num_threads() == threads
    assert said[-1].startswith("the background compile failed (could not start it: [Errno 11]"), said


def test_every_kind_of_rank_has_its_micro_batch_sizes_compiled(monkeypatch):
    """8 samples over 3 ranks are 3, 3 and 2: a rank of 2 would miss a cache built only for 3."""
    from types import SimpleNamespace

    from transformers import GPT2Config

    start = SimpleNamespace(teacher=None, step=0, global_batch=8, block_size=16,
                            model=SimpleNamespace(config=GPT2Config(n_layer=1, n_embd=32, n_head=2)))
    cfg = SimpleNamespace(optim=SimpleNamespace(batch_size=2))
    dist_info = SimpleNamespace(world_size=3, device=torch.device("cpu"))
    wanted = train_module._background_compile(start, cfg, "fp32", dist_info)
    assert wanted["size_sequences"] == [[2, 1], [2]]
    assert wanted["threads"] == torch.get_num_threads()


def test_one_core_compiles_in_line(data_dir, tmp_path, monkeypatch):
    """No core to spare for a child: `auto`'s cold compile blocks a step, as before (no child started)."""
    cache = _cold_caches(tmp_path, monkeypatch)
    (cache / plan.RECORD).write_text('{"cold_s": 1e-6}')  # worth it however short the run
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: {0})
    children, compiled = _remember_children(monkeypatch), []
    monkeypatch.setattr(plan, "compile_in_place", compiled.append)  # the compile itself is other tests'
    code, out, err = train(data_dir, tmp_path / "run", "--compile", "auto", "--max-steps", "3", "--no-export")
    assert code == 0, err
    assert "compiling the model (first start" in out and "background" not in out, out
    assert children == [] and len(compiled) == 1


_RANK = """
import json, sys, torch
from transformers import GPT2Config
from training.compile_cache import blob
from training.compile_cache.regions import compile_in_place
from training.model.build import create_gpt
torch.set_num_threads(1)
blob.keep_headers_in_cache()
config = GPT2Config.from_dict(json.loads(sys.argv[1]))
config.use_cache = False
model = compile_in_place(create_gpt(config).train())
for size in json.loads(sys.argv[2]):
    x = torch.randint(0, config.vocab_size, (size, 16))
    model(x, x).backward()
print(json.dumps(dict(torch._dynamo.utils.counters["inductor"])))
"""


@pytest.mark.timeout(600)
def test_a_rank_with_other_micro_batch_sizes_finds_its_graphs_in_the_childs_cache(tmp_path, monkeypatch):
    """An uneven global batch: ranks of [3] and of [2]. The child builds both, each as a rank that has seen
    only its own sizes would (a Dynamo reset between), so neither kind of rank compiles at the switch."""
    from transformers import GPT2Config

    _cold_caches(tmp_path, monkeypatch)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    wanted = {**background.spec(config, "cpu", "fp32", [[3], [2]], 16), "threads": 1}
    child = background.BackgroundCompile(wanted)
    try:
        assert child.process.wait(timeout=500) == 0 and child.poll() == "", child._last_line()
        assert child.compile_s is not None and child.compile_s > 0
    finally:
        child.close()
    for sizes in ([2], [3]):
        done = subprocess.run([sys.executable, "-c", _RANK, json.dumps(config.to_dict()), json.dumps(sizes)],
                              capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[3])
        assert done.returncode == 0, done.stderr[-3000:]
        counters = json.loads(done.stdout.strip().splitlines()[-1])
        assert counters.get("fxgraph_cache_miss", 0) == 0 and counters.get("fxgraph_cache_hit", 0) > 0, (sizes, counters)


def test_the_child_starts_only_with_room_for_it_in_memory(tmp_path, monkeypatch):
    """cgroup v2 in a pod: limit less usage, capped by MemAvailable; a model that does not fit compiles in line."""
    from transformers import GPT2Config

    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    monkeypatch.setattr(memory, "CGROUP_MEMORY", ((str(limit), str(usage)),))
    limit.write_text("8589934592\n")  # 8 GiB
    usage.write_text(str(7 * 2**30) + "\n")
    assert 0 < memory.memory_free() <= 2**30
    small = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    assert not background.fits(small, 4, 16)  # 1 GiB left: not even the child's interpreter and torch
    usage.write_text(str(2**30) + "\n")
    assert background.fits(small, 4, 16) is (memory.memory_free() > background.CHILD_BASE + 10**6)
    gpt2 = GPT2Config()
    assert not background.fits(gpt2, 64, 1024)  # 64 x 1024 tokens of GPT-2's logits: tens of GiB
    limit.write_text("max\n")
    assert memory.memory_free() is not None  # no limit: what the machine has available


def test_a_bad_switch_value_is_one_line_before_anything_is_written(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(background.SWITCH, "yes")
    code, out, err = train(data_dir, tmp_path / "run", "--max-steps", "2", "--no-export")
    assert code == 2 and "TRAINSTACK_COMPILE_BACKGROUND='yes': use 0" in err, (out, err)
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_the_trainer_keeps_its_threads_within_the_cores_beside_the_child(monkeypatch):
    monkeypatch.setattr(background.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(background, "_cpu_quota", lambda: 4.0)  # torch's 64 threads under a 4-CPU limit
    assert background.threads_beside_child(64) == 3
    monkeypatch.setattr(background, "_cpu_quota", lambda: None)
    assert background.threads_beside_child(64) == 63 and background.threads_beside_child(2) == 1
