"""A run keeps its compile cache: a start on a machine with empty compiler caches (a replacement pod
on a new node) unpacks RUN_DIR/compile_cache.tar.gz and says so; `auto` runs eagerly when the run is
too short to earn its compile back; the compile is kept out of the ETA."""

from __future__ import annotations

import tarfile
import time

import pytest
import torch

from tests.support.training_runs import losses, train
from training.compile_cache import blob, plan
from training.trainer.progress import Console


@pytest.mark.timeout(600)
def test_a_new_node_starts_warm_from_the_runs_cache(data_dir, tmp_path, monkeypatch):
    """One layer, compiled: the cold start saves the cache with the run and uploads it to --snapshot-uri; a
    replacement pod (empty RUN_DIR restored from the store, empty local caches) loads it before compiling."""
    bucket = f"file://{tmp_path / 'bucket'}"
    flags = ("--n-layer", "1", "--no-export", "--precision", "fp32", "--compile", "on", "--snapshot-uri", bucket)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "first-node"))
    code, out, err = train(data_dir, tmp_path / "run", "--max-steps", "2", *flags)
    assert code == 0, err
    assert "compiling the model (first start;" in out and "compiled the model in" in out, out
    assert (tmp_path / "run" / blob.BLOB).is_file()
    assert (tmp_path / "bucket" / blob.BLOB).read_bytes() == (tmp_path / "run" / blob.BLOB).read_bytes()
    with tarfile.open(tmp_path / "run" / blob.BLOB) as saved:  # the C++ header the kernels are built with
        assert any(name.startswith(f"cache/{blob.HEADERS}/") and name.endswith(".gch") for name in saved.getnames())

    new_node = tmp_path / "second-node"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(new_node))
    code, out, err = train(data_dir, tmp_path / "replacement", "--max-steps", "4", *flags)
    assert code == 0, err
    assert "compile cache from step 1: warm start" in out, out
    assert "compiling the model" not in out and "ignoring" not in err, (out, err)
    assert any(new_node.rglob("*.so")), "the run's cache was not unpacked into the empty local cache"
    assert sorted(losses(tmp_path / "replacement")) == [3, 4]


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.h = torch.nn.ModuleList([torch.nn.Linear(2, 2)])


def _plan(tmp_path, monkeypatch, max_steps):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    said = []
    compiled = []
    monkeypatch.setattr(plan, "compile_in_place", compiled.append)
    return plan.CompilePlan("auto", tmp_path, torch.device("cpu"), 0, max_steps, True, say=said.append), said, compiled


@pytest.mark.parametrize(("max_steps", "compiles"), [(50, False), (1_000_000, True)])
def test_auto_runs_eagerly_when_the_run_is_too_short_to_earn_the_compile(tmp_path, monkeypatch, max_steps, compiles):
    compiling, said, compiled = _plan(tmp_path, monkeypatch, max_steps)
    plan.record_cold_seconds(30.0)  # what a compile costs on this machine
    model = _Tiny()
    compiling.prepare(model)
    assert compiled == []  # cold on a CPU: the first step runs eagerly and is timed
    compiling.before_step()
    time.sleep(0.01)
    assert compiling.after_step(1, model) == 0.0
    assert (compiled == [model]) is compiles
    if compiles:
        assert said == ["compiling the model (first start; about 30 s on this machine, once: later starts of this run "
                        "reuse it); the progress ETA leaves it out"]
        compiling.before_step()
        assert compiling.after_step(2, model) > 0  # the compiling step's seconds leave the ETA
        assert compiling.after_step(3, model) == 0.0
    else:
        assert len(said) == 1 and said[0].startswith("running eagerly: the 49 steps left") and "30 s" in said[0]


def test_the_compile_is_left_out_of_the_eta():
    from types import SimpleNamespace

    cfg = SimpleNamespace(runtime=SimpleNamespace(progress=True), optim=SimpleNamespace(max_steps=100))
    console = Console(cfg, 0, SimpleNamespace(is_main=True))
    began = console.bar.start_t
    console.exclude(40.0)
    assert console.bar.start_t == began + 40.0
    console.close()


def test_the_compiling_step_leaves_the_window_throughput_unless_it_is_alone(tmp_path):
    from types import SimpleNamespace

    from training.trainer.progress import TrainLog

    cfg = SimpleNamespace(optim=SimpleNamespace(lr=1e-3, max_steps=100), cadence=SimpleNamespace(log_every=10))
    log = TrainLog(cfg, tmp_path, SimpleNamespace(device=torch.device("cpu")), None, None, None, 256, 1.0, False)
    began = log.window_start
    log.add(torch.tensor(1.0), 8)
    log.leave_out_step(40.0)  # alone in its window: its line shows what it took
    assert (log.window_steps, log.window_start) == (1, began)
    log.add(torch.tensor(1.0), 8)
    log.leave_out_step(40.0)
    assert (log.window_steps, log.window_start) == (1, began + 40.0)


@pytest.mark.parametrize("rank0_compiles", [True, False])
def test_every_rank_follows_rank_0s_choice(tmp_path, monkeypatch, rank0_compiles):
    """Under DDP the ranks agree (rank 0's choice, broadcast): this rank's own timing says the opposite."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    compiled, asked = [], []
    monkeypatch.setattr(plan, "compile_in_place", compiled.append)
    plan.record_cold_seconds(30.0)

    def agree(choice):  # rank 0 is cold too (no compile at once); its eager step decides otherwise
        asked.append(choice)
        return choice if len(asked) == 1 else ("in line" if rank0_compiles else None)  # rank 0's way, or eager

    max_steps = 50 if rank0_compiles else 1_000_000  # this rank alone would decide the other way
    compiling = plan.CompilePlan("auto", tmp_path, torch.device("cpu"), 0, max_steps, False, say=print, agree=agree)
    model = _Tiny()
    compiling.prepare(model)
    assert asked == [False] and compiled == []  # cold on a CPU: an eager first step, on every rank
    compiling.before_step()
    time.sleep(0.01)
    compiling.after_step(1, model)
    assert asked == [False, None if rank0_compiles else "in line"]  # this rank's own way (no child here)
    assert (compiled == [model]) is rank0_compiles
