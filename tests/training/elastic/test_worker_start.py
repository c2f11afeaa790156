"""training/worker.py, training/elastic/warm_imports.py and training/elastic/process_exit.py: how trainer processes start and end.

The launcher tests (test_launch.py) and bench/recovery.py run them for real under torchrun; these
check the pieces one at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.training_runs import REPO
from training.elastic.process_exit import exit_code
from training.worker import run, warm_start


class Config:
    start_method = "spawn"


def test_only_the_trainer_is_forked_warm(monkeypatch):
    monkeypatch.delenv("TRAINSTACK_WORKER_START", raising=False)
    config = Config()
    assert warm_start(config, sys.executable, ["-u", "-m", "training", "train", "--data", "d"]) == \
        (config, run, ["train", "--data", "d"])
    assert config.start_method == "forkserver"
    other = Config()
    for cmd, args in [(sys.executable, ["-u", "-m", "nemo.train"]), (sys.executable, ["-u", "script.py"]),
                      ("/bin/trainer", ["-m", "training"])]:
        assert warm_start(other, cmd, args) == (other, cmd, args)
    assert other.start_method == "spawn"


def test_exec_keeps_torchruns_own_way(monkeypatch):
    monkeypatch.setenv("TRAINSTACK_WORKER_START", "exec")
    config = Config()
    args = ["-u", "-m", "training", "train"]
    assert warm_start(config, sys.executable, args) == (config, sys.executable, args)


def test_exit_codes_are_what_python_would_exit_with(capsys):
    def raises(exc):
        def run():
            raise exc
        return run

    assert exit_code(lambda: 0) == 0
    assert exit_code(lambda: None) == 0
    assert exit_code(lambda: 75) == 75
    assert exit_code(raises(SystemExit(2))) == 2
    assert exit_code(raises(SystemExit(None))) == 0
    assert exit_code(raises(SystemExit("bad flag"))) == 1
    assert exit_code(raises(KeyboardInterrupt())) == 130
    assert exit_code(raises(RuntimeError("gloo: connection reset by peer"))) == 1
    err = capsys.readouterr().err
    assert "bad flag" in err
    assert "Traceback" in err and "RuntimeError: gloo: connection reset by peer" in err


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_exit_now_waits_for_a_write_in_flight_runs_atexit_and_flushes():
    done = python("""
        import atexit, sys, threading, time
        from training.elastic.process_exit import exit_now
        def write():  # a background checkpoint write still going when the trainer returns
            time.sleep(0.5)
            print("write committed")
        threading.Thread(target=write, daemon=False).start()
        atexit.register(lambda: print("atexit ran"))
        sys.stdout.write("buffered, no newline")
        exit_now(75)
    """)
    assert done.returncode == 75, done.stderr
    assert done.stdout.splitlines() == ["buffered, no newlinewrite committed", "atexit ran"]


def test_the_fork_servers_imports_start_no_thread_and_leave_cuda_alone():
    done = python("""
        import os, threading
        import numpy  # its BLAS starts a thread pool, which re-forms itself in a forked child (pthread_atfork)
        blas = len(os.listdir("/proc/self/task"))
        import training.elastic.warm_imports as warm
        import torch
        assert warm.skipped == {}, warm.skipped
        assert threading.active_count() == 1, threading.enumerate()
        assert len(os.listdir("/proc/self/task")) == blas, "a native thread was started"  # fork copies it half
        assert not torch.cuda.is_initialized()
        for name in warm.MODULES:
            __import__(name)
        print("ok")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_a_cpu_nodes_workers_inherit_inductors_choice_of_vector_instructions():
    """A restarted worker's first compiled step does not build and probe the ISA test programs again."""
    done = python("""
        import training.elastic.warm_imports
        from torch._inductor.cpu_vec_isa import valid_vec_isa_list  # what pick_vec_isa builds and probes, cached
        assert valid_vec_isa_list.cache_info().currsize == 1, valid_vec_isa_list.cache_info()
        print("ok")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_the_fork_server_leaves_the_vector_instructions_alone_when_nothing_compiles(monkeypatch):
    from types import SimpleNamespace

    from training import worker

    monkeypatch.setenv(worker.PICK_ISA_ENV, "")  # put back as it was after the test
    monkeypatch.delenv(worker.PICK_ISA_ENV)
    monkeypatch.setattr("multiprocessing.set_forkserver_preload", lambda modules: None)
    worker.warm_start(SimpleNamespace(), sys.executable, ["-u", "-m", "training", "train", "--compile", "on"])
    assert worker.PICK_ISA_ENV not in os.environ
    worker.warm_start(SimpleNamespace(), sys.executable, ["-u", "-m", "training", "train", "--compile", "off"])
    assert os.environ[worker.PICK_ISA_ENV] == "0"
    done = python("""
        import os
        os.environ["TRAINSTACK_PRELOAD_PICKS_ISA"] = "0"
        import training.elastic.warm_imports
        from torch._inductor.cpu_vec_isa import valid_vec_isa_list
        assert valid_vec_isa_list.cache_info().currsize == 0, valid_vec_isa_list.cache_info()
        print("ok")
    """)
    assert done.returncode == 0, done.stderr[-3000:]


def test_cuda_is_refused_while_preloading():
    import torch

    from training.elastic.warm_imports import CudaTouched, cuda_forbidden

    with cuda_forbidden(), pytest.raises(CudaTouched):
        torch.cuda.init()
    assert torch.cuda._lazy_init is not None and "refuse" not in torch.cuda._lazy_init.__name__


def test_exit_now_stops_thread_pools_as_python_does():
    """A ThreadPoolExecutor's idle workers (torch's compiler keeps one) end only when told to at exit."""
    done = python("""
        from concurrent.futures import ThreadPoolExecutor
        from training.elastic.process_exit import exit_now
        pool = ThreadPoolExecutor(2)
        pool.submit(print, "ran").result()
        exit_now(2)
    """)
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "ran"
