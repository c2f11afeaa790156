"""Trainer workers forked from a warm process instead of started cold (`python -m training.launch`).

torchrun starts `-m training ...` as a fresh interpreter for each worker and again at every restart,
and a fresh interpreter imports torch, its compiler and transformers before it can load a
checkpoint: most of a restart after a lost node (docs/BENCHMARKS.md, bench/recovery.py). For the trainer, the
launcher runs the same command as a function instead (`run`) in processes forked by a multiprocessing
fork server that imported training/elastic/warm_imports.py once, when the first worker started.

Exit codes are the command's: torch's function workers count as succeeded only by returning a value,
so 0 is returned and anything else (2 bad input, 75 a peer was preempted) is the process's exit code.
A worker that returned ends as soon as the value is on its way to the agent: the agent reads it from
the pipe even after the process is gone, and an agent that is itself stopping (SIGTERM) would
otherwise wait for it.
TRAINSTACK_WORKER_START=exec keeps torchrun's own way (a new interpreter per worker).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from training.elastic.process_exit import exit_code, exit_now, finish

PRELOAD = "training.elastic.warm_imports"
ENV = "TRAINSTACK_WORKER_START"
PICK_ISA_ENV = "TRAINSTACK_PRELOAD_PICKS_ISA"  # read by warm_imports.pick_vector_isa


def _compile_off(cmd_args: Sequence[str]) -> bool:
    args = list(cmd_args)
    return "--compile=off" in args or any(a == "--compile" and b == "off" for a, b in zip(args, args[1:], strict=False))


def warm_start(config, cmd, cmd_args: Sequence[str]):
    """torchrun's (config, entrypoint, args) with the trainer run as a forked function when it is the command."""
    trainer = list(cmd_args[:3]) == ["-u", "-m", "training"] and cmd == sys.executable
    if not trainer or os.environ.get(ENV, "fork") == "exec":
        return config, cmd, cmd_args
    import multiprocessing

    if _compile_off(cmd_args):  # the fork server need not ask Inductor about the CPU's vector instructions
        os.environ[PICK_ISA_ENV] = "0"
    multiprocessing.set_forkserver_preload([PRELOAD])
    config.start_method = "forkserver"
    return config, run, list(cmd_args[3:])


def run(*argv: str) -> int:
    """`python -m training *argv` in this process; see the module docstring for the exit codes."""
    from training import __main__ as entry

    sys.argv = [entry.__file__, *argv]  # as `python -m training` sets it
    code = exit_code(lambda: entry.main(list(argv)))
    if code:
        exit_now(code)
    finish()  # a forked process ends with os._exit, which skips the atexit handlers
    _exit_once_returned()
    return 0


def _exit_once_returned() -> None:
    """End the process right after torch's wrapper has written the return value to its agent."""
    from multiprocessing.queues import SimpleQueue

    put = SimpleQueue.put

    def put_then_exit(self, obj) -> None:
        put(self, obj)
        os._exit(0)

    SimpleQueue.put = put_then_exit
