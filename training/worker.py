"""Trainer workers forked from a warm process instead of started cold (`python -m training.launch`).

torchrun starts `-m training ...` as a fresh interpreter for each worker and again at every restart,
and a fresh interpreter spends about 4 s importing torch, its compiler and transformers before it can
load a checkpoint: most of a restart after a lost node (bench/recovery.py). For the trainer, the
launcher runs the same command as a function instead (`run`) in processes forked by a multiprocessing
fork server that imported training/warm_imports.py once, when the first worker started.

Exit codes are the command's: torch's function workers count as succeeded only by returning a value,
so 0 is returned and anything else (2 bad input, 75 a peer was preempted) is the process's exit code.
TRAINSTACK_WORKER_START=exec keeps torchrun's own way (a new interpreter per worker).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence

from training.process_exit import exit_code, exit_now, finish

PRELOAD = "training.warm_imports"
ENV = "TRAINSTACK_WORKER_START"
# After returning 0 the worker waits for its agent to read the value; an agent that is itself
# shutting down (SIGTERM) no longer reads, so the worker ends on its own after this long.
EXIT_AFTER_RETURN_S = 1.0


def warm_start(config, cmd, cmd_args: Sequence[str]):
    """torchrun's (config, entrypoint, args) with the trainer run as a forked function when it is the command."""
    trainer = list(cmd_args[:3]) == ["-u", "-m", "training"] and cmd == sys.executable
    if not trainer or os.environ.get(ENV, "fork") == "exec":
        return config, cmd, cmd_args
    import multiprocessing

    multiprocessing.set_forkserver_preload([PRELOAD])
    config.start_method = "forkserver"
    return config, run, list(cmd_args[3:])


def run(*argv: str) -> int:
    """`python -m training *argv` in this process; see the module docstring for the exit codes."""
    from training.__main__ import main

    sys.argv = [sys.argv[0], *argv]
    code = exit_code(lambda: main(list(argv)))
    if code:
        exit_now(code)
    finish()  # a forked process ends with os._exit, which skips the atexit handlers
    timer = threading.Timer(EXIT_AFTER_RETURN_S, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    return 0
