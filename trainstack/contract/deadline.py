"""A call that may block for good (a network client's retries, a pipe's missing writer), given a deadline.

The call runs in a daemon thread: past the deadline it is left to end with the process, since neither a
blocked open() nor a client's own retry loop can be interrupted from outside.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NoAnswer(Exception):
    """The call had not returned when its deadline passed (not an OSError: callers catch those apart)."""


def call_within(seconds: float, call: Callable[[], T], name: str) -> T:
    """call()'s result, or its exception, raised in the caller's thread; NoAnswer past `seconds`."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise NoAnswer
    if "error" in box:
        raise box["error"]
    return box["result"]
