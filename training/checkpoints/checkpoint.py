"""Atomic, verifiable checkpoints in RUN_DIR/checkpoints/step_XXXXXXXX/.

A checkpoint is written into a hidden temporary directory, every file fsynced, a manifest with each
file's size and SHA-256 written last, and only then renamed into place (rename is atomic on POSIX
filesystems, EFS and Filestore included). A crash at any point leaves either no new directory or a
temporary one that loading ignores, so the previous checkpoint stays loadable. Loading verifies the
manifest and falls back to the previous checkpoint, with a warning, when the newest is damaged.
Damaged checkpoints are never deleted; only retention (keep the newest K) removes anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch

from trainstack.contract.errors import UserError, storage_error, storage_failure
from trainstack.contract.log import warn

CHECKPOINTS = "checkpoints"
MANIFEST = "manifest.json"
PREFIX = "step_"
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int

    def load(self) -> dict:
        """model, optimizer and trainer state (step, RNG states, config), on the CPU.

        weights_only: tensors and plain containers only, so a file planted on the shared volume
        cannot run code in every trainer that resumes from it.
        """
        return {name: torch.load(self.path / f"{name}.pt", map_location="cpu", weights_only=True)
                for name in ("model", "optimizer", "trainer")}


class _HashingWriter:
    """A write-only file wrapper that hashes what passes through (no second read of the file)."""

    def __init__(self, file):
        self.file = file
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _step_dir(root: Path, step: int) -> Path:
    return root / CHECKPOINTS / f"{PREFIX}{step:08d}"


def save(run_dir: Path, step: int, states: dict[str, object], keep: int) -> Path:
    """Write `states` ({"model": ..., "optimizer": ..., "trainer": ...}) as the checkpoint of `step`."""
    final = _step_dir(run_dir, step)
    if final.is_dir() and verify(final) is None:
        return final  # this exact step is already safely on disk (e.g. SIGTERM right after a save)
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_writes(parent)
    tmp = parent / f"{TMP_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
    try:
        _write(tmp, step, states)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk gets its space back; the older checkpoints stay
        cause = storage_failure(exc)
        if cause is None:
            raise
        previous = latest_valid(run_dir, announce=False)
        kept = f"the previous checkpoint {previous.path} is untouched" if previous else "no checkpoint was lost"
        raise storage_error(cause, f"the checkpoint of step {step} to {parent}", kept) from exc
    if final.exists():
        # A damaged directory for this step: keep it for inspection, under another name.
        final.rename(parent / f"{final.name}.damaged-{uuid.uuid4().hex[:8]}")
    os.rename(tmp, final)
    _fsync_dir(parent)
    _prune(run_dir, keep, newest=step)
    return final


def _write(tmp: Path, step: int, states: dict[str, object]) -> None:
    tmp.mkdir()
    manifest = {"step": step, "files": {}}
    for name, state in states.items():
        file = tmp / f"{name}.pt"
        with open(file, "wb") as f:
            writer = _HashingWriter(f)
            torch.save(state, writer)
            f.flush()
            os.fsync(f.fileno())
        manifest["files"][file.name] = {"bytes": file.stat().st_size, "sha256": writer.digest.hexdigest()}
    with open(tmp / MANIFEST, "w") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)


def verify(path: Path) -> str | None:
    """None when the checkpoint at `path` is complete and intact, else the reason it is not."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (write never finished)"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8 (binary garbage)
        return f"unreadable manifest ({exc})"
    problem = manifest_problem(manifest)
    if problem is not None:
        return problem
    files = manifest["files"]
    for name, expected in files.items():
        file = path / name
        if not file.is_file():
            return f"{name} is missing"
        try:
            if file.stat().st_size != expected["bytes"]:
                return f"{name} has {file.stat().st_size} bytes, expected {expected['bytes']}"
            if _sha256(file) != expected["sha256"]:
                return f"{name} fails its checksum"
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror or exc})"
    if {"model.pt", "optimizer.pt", "trainer.pt"} - set(files):
        return "incomplete file list"
    return None


def manifest_problem(manifest) -> str | None:
    """None when `manifest` (parsed JSON) has the shape _write gives it: a list of plain file names
    (nothing outside the folder), each with its size and checksum. Anything else is damage, and a
    reader falls back to the previous checkpoint as it does for a bad checksum."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(
            "/" not in name and not name.startswith(".") and isinstance(e, dict)
            and isinstance(e.get("bytes"), int) and isinstance(e.get("sha256"), str) for name, e in files.items()):
        return "malformed manifest (no file list with sizes and checksums)"
    return None


def listed(run_dir: Path) -> list[Checkpoint]:
    """Every step_XXXXXXXX directory under RUN_DIR/checkpoints (intact or not), newest first."""
    root = run_dir / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        if entry.is_dir() and entry.name.startswith(PREFIX) and entry.name[len(PREFIX):].isdigit():
            found.append(Checkpoint(path=entry, step=int(entry.name[len(PREFIX):])))
    return sorted(found, key=lambda c: c.step, reverse=True)


def latest_valid(run_dir: Path, announce: bool = True) -> Checkpoint | None:
    """Newest intact checkpoint; damaged newer ones are reported and skipped (never deleted)."""
    found = listed(run_dir)
    for i, ckpt in enumerate(found):
        problem = verify(ckpt.path)
        if problem is None:
            return ckpt
        if announce:
            then = "falling back to the previous one" if i + 1 < len(found) else "there is no earlier one"
            warn(f"checkpoint {ckpt.path} is damaged ({problem}); {then}")
    return None


def resume_point(run_dir: Path) -> Checkpoint | None:
    """The checkpoint `train` resumes from; None for a new run.

    A RUN_DIR whose checkpoints are all damaged is an error, not a new run: starting again from
    step 0 would, at its end, replace the export of the run that was there.
    """
    latest = latest_valid(run_dir)
    if latest is not None:
        return latest
    damaged = listed(run_dir)
    if damaged:
        reasons = "; ".join(f"{c.path.name}: {verify(c.path)}" for c in damaged[:3])
        raise UserError(f"every checkpoint in {run_dir / CHECKPOINTS} is damaged ({reasons}{'; ...' if len(damaged) > 3 else ''}); "
                        "nothing to resume from, and they stay untouched; to start over on purpose, use a new "
                        f"--out (or move {run_dir / CHECKPOINTS} aside)")
    if (run_dir / "export" / "config.json").is_file():
        raise UserError(f"{run_dir} holds an export but no checkpoint to resume from; a new run there would replace "
                        f"the export at its end; use a new --out (or move {run_dir / 'export'} aside)")
    return None


def wait_for_step(run_dir: Path, step: int, timeout_s: float = 120.0) -> Checkpoint:
    """The checkpoint another rank chose; NFS may take a while to show a freshly renamed directory."""
    path = _step_dir(run_dir, step)
    deadline = time.monotonic() + timeout_s
    while not (path / MANIFEST).is_file():
        if time.monotonic() > deadline:
            raise RuntimeError(f"rank 0 resumes from {path}, which this node cannot see after {timeout_s:.0f}s; "
                               "is RUN_DIR on storage shared by all nodes?")
        time.sleep(1.0)
    return Checkpoint(path=path, step=step)


def _prune(run_dir: Path, keep: int, newest: int) -> None:
    """Keep the `keep` newest complete checkpoints up to `newest` (the one just written).

    Checkpoints of later steps exist only when they were found damaged and training fell back to
    an earlier one: they neither count towards `keep` (they cannot be resumed from) nor are removed.
    """
    complete = [c for c in listed(run_dir) if c.step <= newest and (c.path / MANIFEST).is_file()]
    for old in complete[keep:]:
        shutil.rmtree(old.path, ignore_errors=True)


def _remove_abandoned_writes(root: Path) -> None:
    """Temporary directories of writers that died mid-save (only rank 0 of one job ever writes here)."""
    for entry in root.glob(f"{TMP_PREFIX}*"):
        shutil.rmtree(entry, ignore_errors=True)
