"""RUN_DIR: where it may be, who writes it, and undoing a start that failed before it saved anything.

A start that fails (bad input found late, an out-of-memory first step, a full disk) before its
first checkpoint leaves RUN_DIR exactly as it found it: otherwise the run_config.json of the
failed attempt would refuse the very fix its error message suggested.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from training.data.ours import check_not_inside_a_run, is_prepared_data, is_run_dir, looks_like_a_run
from training.run_dir.lock import LOCK, RunLock
from trainstack.contract.errors import UserError
from trainstack.contract.paths import kind_of

RUN_CONFIG = "run_config.json"
# What `train` itself puts in RUN_DIR (also half-written, by a killed run).
OURS = {RUN_CONFIG, "model_config.json", "checkpoints", "tokenizer", "tensorboard", "export", LOCK,
        # the run's record, --snapshot-uri and W&B (recorder.py, snapshots.py, wandb_logger.py)
        "metrics.jsonl", "loss.png", "snapshot_run.json", "wandb_run.json", "wandb",
        "compile_cache.tar.gz"}  # training/compile_cache/blob.py


# The files train opens for writing in RUN_DIR (appends, rewrites): a symbolic link in their place
# would have train write into whatever file it points at, someone's own file outside the run.
WRITTEN_FILES = (RUN_CONFIG, "model_config.json", "metrics.jsonl", "loss.png", "snapshot_run.json",
                 "wandb_run.json", "compile_cache.tar.gz")


def _ours(name: str) -> bool:
    return (name in OURS or name.startswith((".export-", f"{LOCK}.", ".loss.png-", ".restore-"))
            or name.endswith(".tmp"))


def check_location(run_dir: Path, data_dir: Path) -> None:
    """Refuse an --out where checkpoints would land among the user's own files or inside the data."""
    check_creatable(run_dir)
    out, data = run_dir.resolve(), data_dir.resolve()
    if out == Path(out.anchor):
        raise UserError(f"--out {run_dir} is the root of the file system; pick a directory for this run, "
                        "e.g. --out runs/my-run")
    if out == data or data in out.parents:
        raise UserError(f"--out {run_dir} is inside the data directory {data_dir} (which `prepare` replaces as "
                        "a whole); pick a run directory outside it")
    check_not_inside_a_run(run_dir, "--out")
    for folder in out.parents:
        if is_prepared_data(folder):
            raise UserError(f"--out {run_dir} is inside the prepared data directory {folder} (which `prepare` "
                            "replaces as a whole); pick a run directory outside it")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {run_dir} is a file, not a directory; pick another --out")
    if (out / RUN_CONFIG).exists() and not is_run_dir(out) and not looks_like_a_run(out):
        # A run_config.json that is not train's, with nothing only train leaves beside it: another tool's
        # file, which train would take for an earlier start's and replace. A damaged one in a real run is
        # named by the resume instead.
        raise UserError(f"--out {run_dir} holds a {RUN_CONFIG} that train did not write, and no checkpoint or "
                        "model config of a run; refusing to replace it; pick an empty or new directory")
    if out.is_dir() and not (out / RUN_CONFIG).is_file():
        foreign = sorted(p.name for p in out.iterdir() if not _ours(p.name))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UserError(f"--out {run_dir} already holds other files ({shown}) and no {RUN_CONFIG}; refusing to "
                            "write a run among them; pick an empty or new directory")
    if out.is_dir():
        check_no_links(run_dir)
        check_kinds(run_dir)
        export = out / "export"
        # train replaces the export as a whole at the end (a rename): that would replace a link itself and
        # leave it as .export-previous-*, and fails on a mount point.
        if export.is_symlink():
            raise UserError(f"{run_dir / 'export'} is a symbolic link: train replaces the export as a whole at the "
                            "end, which would replace the link; remove it (the export then lands in RUN_DIR/export)")
        if export.is_dir() and os.path.ismount(export):
            raise UserError(f"{run_dir / 'export'} is a mount point: train replaces the export as a whole at the "
                            "end (a rename), which a mount point refuses; unmount it, or mount the volume at "
                            "RUN_DIR itself")
        check_folder_links(out)


def check_folder_links(out: Path) -> None:
    """A folder train makes (export aside, refused above when linked) may be a link to a folder elsewhere,
    a bigger disk, but not one train cannot write into, nor one inside another run or prepared data."""
    for name in MADE_FOLDERS:
        folder = out / name
        if name == "export" or not folder.is_symlink():
            continue
        if not folder.is_dir():  # dangling, or a link to a file: train would fail making its folder
            raise UserError(f"{folder} is a link to {os.readlink(folder)}, which is not a folder; remove the link "
                            "(or point it at a folder), then run the same command again")
        _check_writable(folder)
        target = folder.resolve()
        around = (target, *target.parents)
        other = next((f for f in around if f != out and (is_run_dir(f) or looks_like_a_run(f))), None)
        if other is not None:  # retention would delete its steps, or this run's events mix with its own
            raise UserError(f"{folder} is a link into the run {other}, whose files this run would delete or "
                            "mix with its own; remove the link (or pick another --out)")
        data = next((f for f in around if is_prepared_data(f)), None)
        if data is not None:  # as --out inside the data: prepare replaces that folder as a whole
            raise UserError(f"{folder} is a link into the prepared data directory {data}, which `prepare` "
                            "replaces as a whole; remove the link (or point it outside the data)")


def _check_writable(link: Path) -> None:
    """A linked folder train writes into must take a file: one it cannot (/proc, a read-only mount) would fail
    at the first checkpoint or event file, after training. Probed with a file removed at once."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainstack-probe-", dir=link)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{link} is a link to {os.readlink(link)}, where train cannot write ({exc.strerror}); remove "
                        "the link (or point it at a folder you can write to), then run the same command again") from None


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 80 else f"{text[:60]}...({len(text)} characters)"


def check_creatable(run_dir: Path) -> None:
    """An --out that cannot be a directory: a name too long, a file among the folders above it."""
    try:
        os.stat(run_dir)
        return
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise UserError(f"--out {_shown(run_dir)}: a name in it is too long for the file system "
                            "(most allow 255 bytes); pick a shorter --out") from None
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return  # permissions: RunDirClaim words a folder it cannot create
    for folder in run_dir.parents:
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                raise UserError(f"--out {run_dir}: {folder} is a file, not a directory; pick an --out under "
                                "a directory")
            return


# The folders train makes in RUN_DIR (tensorboard's writer, the checkpoints, ...): one that is a file or
# a pipe would end in a library's traceback, or block, minutes in.
# (tokenizer/ is not among them: a resume writes a damaged one again, a file included.)
MADE_FOLDERS = ("checkpoints", "tensorboard", "export", "wandb")


def check_kinds(run_dir: Path) -> None:
    """Refuse RUN_DIR when a file train writes is not a regular file (a FIFO blocks train forever, a
    folder fails late) or a folder train makes is not a folder."""
    for names, expected, test in ((WRITTEN_FILES, "a file", Path.is_file), (MADE_FOLDERS, "a folder", Path.is_dir)):
        for name in names:
            path = run_dir / name
            if (path.exists() or path.is_symlink()) and not path.is_symlink() and not test(path):
                actual = kind_of(path) or ("a folder" if path.is_dir() else "a file")
                raise UserError(f"{path} is {actual}, not {expected} as train writes there; move it aside or remove it "
                                "(or pick another --out), then run the same command again")


def check_no_links(run_dir: Path) -> None:
    """Refuse RUN_DIR when a file train writes there is a link, symbolic or hard (as a linked .lock is
    refused): train would append to or rewrite a file that is also someone's own, under another name."""
    for name in WRITTEN_FILES:
        path = run_dir / name
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link (to {os.readlink(path)}), not the file train writes "
                            "there: train would write into the file it points at; remove it (or pick "
                            "another --out), then run the same command again")
        with contextlib.suppress(OSError):
            links = path.stat().st_nlink
            if path.is_file() and links > 1:
                raise UserError(f"{path} is a hard link ({links} names for one file), not the file train writes "
                                "there: train would change the file under its other names too; replace it with "
                                f"a copy (cp {path} {path}.copy && mv {path}.copy {path}) or pick another --out, "
                                "then run the same command again")


class RunDirClaim:
    """Rank 0's hold on RUN_DIR: the lock, and a listing of what was there before, to undo a failed start."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        missing = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
        self._created_root = missing[-1] if missing else None
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only or special file system (/proc), no permission
            raise UserError(f"--out {_shown(run_dir)} cannot be created ({exc.strerror}); pick an --out in a "
                            "directory you can write to") from None
        self._before = self._listing()
        self.saved = False  # set once a checkpoint exists: from then on nothing is undone
        self._undo_hooks: list = []  # put back files this start changed but did not create (metrics.jsonl)
        self._lock = RunLock.acquire(run_dir)

    def _listing(self) -> set[Path]:
        return set(self.run_dir.rglob("*"))

    def on_undo(self, hook) -> None:
        """Call `hook` when a failed start is undone (before the files it created are removed)."""
        self._undo_hooks.append(hook)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def undo(self) -> None:
        """Remove what this start created, unless it saved a checkpoint (then it has results to keep)."""
        self.release()
        if self.saved:
            return
        for hook in self._undo_hooks:
            with contextlib.suppress(OSError):
                hook()
        for path in sorted(self._listing() - self._before, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        if self._created_root is not None:  # the folders mkdir made, if nothing else has appeared in them
            for folder in (self.run_dir, *self.run_dir.parents):
                with contextlib.suppress(OSError):
                    folder.rmdir()
                if folder == self._created_root:
                    break
