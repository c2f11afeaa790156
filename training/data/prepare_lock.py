"""DATA_DIR/.prepare.lock: one `prepare` writes a data directory at a time.

Two at once would each commit their own meta.json and delete the other's generation folder, leaving
shards that do not match meta.json. The second one waits for the first (flock, released by the
kernel when its holder exits, even by kill -9; the holder removes the file when it is done), then
looks at DATA_DIR again: the same inputs are then up to date, other inputs replace the first one's
result whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from trainstack.contract.errors import UserError
from trainstack.contract.log import info

LOCK = ".prepare.lock"


@contextlib.contextmanager
def hold(out: Path) -> Iterator[None]:
    """Hold the lock of DATA_DIR `out` (an existing directory; anything else is left to the caller's checks)."""
    if not out.is_dir():
        yield
        return
    path = out / LOCK
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            info(f"another prepare (pid {holder}) is writing {out}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        # A first prepare that failed removes the folder it created, lock file and all: start over.
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
        out.mkdir(parents=True, exist_ok=True)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        # Removed while still held, so DATA_DIR ends as prepare leaves it; a prepare waiting on this file
        # then finds it gone (the inode check above) and takes a fresh one.
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                path.unlink()
        os.close(fd)


def _open(path: Path) -> int:
    """The lock file, or one line when something else sits at its name (as RUN_DIR/.lock does)."""
    try:
        if path.is_symlink():  # never follow a link out of DATA_DIR: it would lock (and remove) another file
            raise IsADirectoryError
        # O_NONBLOCK: opening a FIFO must not wait for a writer; a FIFO or device opens, and is refused below
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if isinstance(exc, PermissionError) or not (path.is_symlink() or path.exists()):
            raise
        raise _not_a_lock_file(path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_lock_file(path)
    return fd


def _not_a_lock_file(path: Path) -> UserError:
    what = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else "not a regular file"
    return UserError(f"{path} is {what}, not the lock file prepare writes there; remove it (or pick another --out)")
