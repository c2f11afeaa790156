"""The exception types that reach the user as a single line (what is wrong, how to fix it), and exit 2.

Exit code 2 means "a retry cannot fix this": bad input, storage that is full or read-only, a loss
that diverged. The training-job chart's podFailurePolicy fails the Job on it at once instead of
restarting pods that would fail the same way (1 is a crash and is retried; 75 and 143 are
preemption, see training/elastic/preemption.py and training/launch.py).
"""

from __future__ import annotations

import errno
import os
import re

NO_RETRY_EXIT = 2

# Writes that fail for one of these reasons fail again on a retry: the volume needs attention first.
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM)


class UserError(Exception):
    """Bad input: printed as one line by the CLI, never as a traceback."""


class StorageError(UserError):
    """A write failed because the storage is full, read-only or not ours to write."""


def storage_failure(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` when it is a storage problem (torch and pyarrow wrap it in their own types)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError):
            if exc.errno in STORAGE_ERRNOS:
                return exc
            if exc.errno is None and any(os.strerror(code) in str(exc) for code in STORAGE_ERRNOS):
                return exc  # pyarrow raises OSError("... No space left on device") without an errno
        rust = re.search(r"\(os error (\d+)\)", str(exc))  # safetensors: "I/O error: ... (os error 28)"
        if rust and int(rust.group(1)) in STORAGE_ERRNOS:
            return OSError(int(rust.group(1)), os.strerror(int(rust.group(1))))
        exc = exc.__cause__ or exc.__context__
    return None


def storage_error(cause: OSError, what: str | None = None, kept: str | None = None) -> StorageError:
    """One line: what could not be written, why, what is still safe, and what to do."""
    reason = cause.strerror or str(cause)
    where = f" ({cause.filename})" if cause.filename else ""
    head = f"cannot write {what}: {reason}{where}" if what else f"{reason}{where}"
    return StorageError(f"{head}; {kept + '; ' if kept else ''}free space or make the volume writable, "
                        "then run the same command again")
