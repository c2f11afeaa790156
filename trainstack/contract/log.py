"""Plain, prefixed console messages (warnings go to stderr so logs stay greppable)."""

from __future__ import annotations

import sys


def info(message: str) -> None:
    print(f"[trainstack] {message}", flush=True)


def warn(message: str) -> None:
    print(f"[trainstack] warning: {message}", file=sys.stderr, flush=True)
