"""UsageError: bad input to a job command; the CLI prints its one line and exits 2."""

from __future__ import annotations

USAGE_EXIT_CODE = 2


class UsageError(Exception):
    """One line naming the problem and the fix; raised before any call to the cluster."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}. Fix: {fix}")
