"""Paths given on the command line that cannot be used as they stand: dangling symbolic links, link
loops, devices and FIFOs. Checked before anything resolves or creates them (pathlib's mkdir and
resolve would fail on them with an OSError or a RuntimeError, not a line naming the flag)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from trainstack.contract.errors import UserError


def check_usable(path: Path, flag: str) -> None:
    """One line for a path (or a folder above it) that is a link loop or a link to nothing."""
    try:
        os.stat(path)
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{flag} {path}: a symbolic link loop (a link that points back at itself); "
                            "fix the link or pick another path") from None
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return  # permissions and the like: the command's own checks word them
    for folder in (path, *path.parents):
        if folder.is_symlink() and not folder.exists():
            raise UserError(f"{flag} {path}: {folder} is a symbolic link to {os.readlink(folder)}, which does not "
                            "exist; create the target or pick another path")


def kind_of(path: Path) -> str | None:
    """'a FIFO', 'a character device', ... for an existing path that is neither a file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None
