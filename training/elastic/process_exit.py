"""How a trainer process ends: with its exit code, and without the interpreter's own shutdown.

Python's shutdown tears down every imported module, 1-2 s once torch and its compiler are loaded.
A torchrun worker whose peer was lost is restarted by its node agent only after it has exited, so
that time adds to every recovery (bench/recovery.py). What Python's exit does that matters is done
here instead: the traceback of an uncaught exception, waiting for non-daemon threads (a checkpoint
write in flight), the atexit handlers, flushing stdout and stderr.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def exit_code(run: Callable[[], int | None]) -> int:
    """run()'s return value, or the code Python would exit with for what it raised (traceback printed)."""
    try:
        code = run()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        return 130  # what Python exits with on an uncaught Ctrl-C
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    if code is None:
        return 0
    if not isinstance(code, int):
        print(code, file=sys.stderr)
        return 1
    return code


def finish() -> None:
    """What Python does at exit before it tears the modules down."""
    # Python's own first step (multiprocessing's children call it too): ask thread pools to stop
    # (concurrent.futures registers that here, not with atexit), then join every non-daemon thread.
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()


def exit_now(code: int) -> NoReturn:
    finish()
    os._exit(code)
