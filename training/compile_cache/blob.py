"""RUN_DIR/compile_cache.tar.gz: the compiler's cache files of this run, and their identity.

Layout: a gzip'd tar whose first member is meta.json (the fingerprint below, the step it was saved
at, the compile's seconds) and whose other members are cache/<path inside the compiler's cache
directory>. gzip's CRC and length trailer make a truncated or damaged blob fail to read; it is then
ignored, as is one made by another torch/Triton/Python or on another device (the compiler's cache
entries are only valid there: torch's caching tutorial, "caching validates that the cache artifacts
are used with the same PyTorch and Triton version, as well as, same GPU").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch

from trainstack.contract.log import warn

BLOB = "compile_cache.tar.gz"
META = "meta.json"
FORMAT = 1
MAX_BYTES = 1 << 30  # a larger cache is not saved: the run's directory is for checkpoints first
FREE_MARGIN_BYTES = 4 << 30  # ... nor when the disk would keep less than this free (checkpoints need it)
# Files of the compiler's cache that are not results: its locks, and what a writer has not finished.
SKIPPED_SUFFIXES = (".lock", ".tmp")
HEADERS = "precompiled_headers"  # in the compiler's cache directory (keep_headers_in_cache)
OURS = ("trainstack-", ".trainstack-")  # our own record and unpacking folder in the compiler's cache
READ_ERRORS = (OSError, EOFError, tarfile.TarError, zlib.error, ValueError, UnicodeDecodeError, KeyError)


def local_cache_dir() -> Path:
    """The compiler's cache directory in this process (TORCHINDUCTOR_CACHE_DIR or its default)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir())


def keep_headers_in_cache() -> None:
    """Build Inductor's precompiled C++ header inside the compiler's cache directory, so that it travels
    in the blob. Inductor puts it under the temp directory (torch/_inductor/codecache.py: `_HEADER_DIR =
    os.path.join(default_cache_dir(), "precompiled_headers")`, read when a kernel is loaded), and loads
    it before every kernel, even one whose library is cached: a new node with the run's kernels but
    not the header built it again, seconds of g++ before the first step. A torch without that name
    is left as it is."""
    from torch._inductor import codecache

    wanted = str(local_cache_dir() / HEADERS)
    if not isinstance(getattr(codecache, "_HEADER_DIR", None), str) or wanted == codecache._HEADER_DIR:
        return
    codecache._HEADER_DIR, codecache._HEADER_LOCK_DIR = wanted, os.path.join(wanted, "locks")
    forget = getattr(getattr(codecache, "_precompile_header", None), "cache_clear", None)
    if forget is not None:  # it remembers the header's path per process (functools.cache)
        forget()


def fingerprint(device: torch.device) -> dict:
    """What the cached code depends on beyond its own keys: the versions and the device it was built for."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"format": FORMAT, "torch": torch.__version__, "triton": triton_version,
            "python": platform.python_version(), "device": device_identity(device)}


def device_identity(device: torch.device) -> str:
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"{torch.cuda.get_device_name(device)} (sm_{major}{minor})"
    # CPU: the generated C++ is built for the instruction set found here
    model, flags = platform.machine(), ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == platform.machine():
                model = f"{platform.machine()} {value.strip()}"
            elif key.strip() == "flags" and not flags:
                flags = hashlib.sha256(" ".join(sorted(value.split())).encode()).hexdigest()[:12]
    return f"cpu {model}" + (f" (flags {flags})" if flags else "")


@dataclass
class Saved:
    """What a blob says about itself."""

    step: int
    compile_s: float
    files: int


def _files_since(root: Path, since: float) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if (path.name.endswith(SKIPPED_SUFFIXES) or path.is_symlink() or not path.is_file()
                or any(part.startswith(OURS) for part in path.relative_to(root).parts)):
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_mtime >= since:
                found.append(path)
    return sorted(found)


def save(run_dir: Path, device: torch.device, since: float, step: int, compile_s: float,
         max_bytes: int = MAX_BYTES, cache: Path | None = None) -> Saved | None:
    """Pack the cache files written since `since` (with what an earlier blob of the same fingerprint
    held) into RUN_DIR/BLOB. Nothing new written (a warm start; or the local cache already had it all
    from another run of the same shape, then a later cold start elsewhere saves it): the blob stays
    as it is. Any failure is one line."""
    cache = cache or local_cache_dir()
    target = run_dir / BLOB
    new = _files_since(cache, since)
    if not new:
        return None
    tmp = run_dir / f".{BLOB}.{os.getpid()}.tmp"
    try:
        size = sum(p.stat().st_size for p in new)
        if size > max_bytes:
            warn(f"the compile cache ({size >> 20} MiB) is over the {max_bytes >> 20} MiB bound and is not saved "
                 f"to {target}; later starts on other machines compile afresh")
            return None
        if shutil.disk_usage(run_dir).free < size + FREE_MARGIN_BYTES:
            warn(f"the compile cache is not saved to {target}: it would leave less than "
                 f"{FREE_MARGIN_BYTES >> 30} GiB free for checkpoints")
            return None
        meta = {"fingerprint": fingerprint(device), "step": step, "compile_s": round(compile_s, 1), "saved": time.time()}
        names = {p.relative_to(cache).as_posix() for p in new}
        files = len(names)
        with tarfile.open(tmp, "w:gz", compresslevel=1) as out:
            _add_bytes(out, META, json.dumps(meta).encode())
            for path in new:
                out.add(path, arcname=f"cache/{path.relative_to(cache).as_posix()}", recursive=False)
            files += _carry_over(target, out, names, meta["fingerprint"])
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())
        os.replace(tmp, target)
        return Saved(step, compile_s, files)
    except OSError as exc:
        warn(f"the compile cache was not saved to {target} ({exc.strerror or exc}); training goes on")
        return None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _add_bytes(out: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    out.addfile(info, io.BytesIO(data))


def _carry_over(previous: Path, out: tarfile.TarFile, written: set[str], wanted: dict) -> int:
    """Copy an earlier blob's members that this start did not write again (a warm start compiles
    nothing, a changed batch size compiles a little more). A blob that cannot be read adds nothing."""
    if not previous.is_file():
        return 0
    added = 0
    try:
        with tarfile.open(previous, "r:gz") as old:
            first = old.next()
            if first is None or first.name != META or _read_json(old, first).get("fingerprint") != wanted:
                return 0
            for member in old:
                name = member.name.removeprefix("cache/")
                if member.isfile() and member.name.startswith("cache/") and name not in written:
                    out.addfile(member, old.extractfile(member))
                    added += 1
    except READ_ERRORS:
        return added
    return added


def _read_json(tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict:
    found = json.loads(tar.extractfile(member).read().decode())
    if not isinstance(found, dict):
        raise ValueError("meta.json is not an object")
    return found


def load(run_dir: Path, device: torch.device, cache: Path | None = None, say=warn) -> Saved | None:
    """Unpack RUN_DIR/BLOB into the local compiler cache (files already there are kept). None, with
    one line to `say`, when the blob is foreign or cannot be read; None, silently, when there is none."""
    path = run_dir / BLOB
    if not path.is_file():
        return None
    cache = cache or local_cache_dir()
    staging = cache / f".trainstack-unpack-{os.getpid()}"
    try:
        with tarfile.open(path, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != META:
                raise ValueError(f"its first member is not {META}")
            meta = _read_json(tar, first)
            here = fingerprint(device)
            if meta.get("fingerprint") != here:
                say(f"ignoring {path}: it was made by {_describe(meta.get('fingerprint'))}, this is {_describe(here)}; "
                     "compiling afresh")
                return None
            shutil.rmtree(staging, ignore_errors=True)
            members = tar.getmembers()  # reads to the end: gzip's CRC and length check every byte
            absent = [m for m in members if not (cache / m.name.removeprefix("cache/")).exists()]
            tar.extractall(staging, members=absent, filter="data")  # a restart here unpacks nothing
        moved = _move_absent(staging / "cache", cache)
        return Saved(int(meta.get("step", 0)), float(meta.get("compile_s", 0.0)), moved)
    except READ_ERRORS as exc:
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        say(f"ignoring {path}: it is damaged or truncated ({reason}); compiling afresh")
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_absent(source: Path, cache: Path) -> int:
    """Move each unpacked file into the cache unless the cache has it (rename: never half a file)."""
    moved = 0
    if not source.is_dir():
        return 0
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = cache / path.relative_to(source)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved += 1
    return moved


def _describe(found) -> str:
    if not isinstance(found, dict):
        return "an unknown version"
    return (f"torch {found.get('torch')}" + (f", Triton {found['triton']}" if found.get("triton") else "")
            + f", Python {found.get('python')} on {found.get('device')}")
