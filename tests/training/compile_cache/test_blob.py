"""RUN_DIR/compile_cache.tar.gz: saved atomically within bounds, and a foreign, damaged or truncated one
is ignored with one line (no compiler needed: the cache directory is a folder of files here)."""

from __future__ import annotations

import gzip
import json
import os
import tarfile
import time

import pytest
import torch

from training.compile_cache import blob

CPU = torch.device("cpu")


@pytest.fixture
def cache(tmp_path):
    root = tmp_path / "inductor"
    (root / "ab").mkdir(parents=True)
    (root / "ab" / "kernel.so").write_bytes(b"\x7fELF" + os.urandom(2000))
    (root / "fxgraph" / "x").mkdir(parents=True)
    (root / "fxgraph" / "x" / "entry").write_bytes(b"graph")
    (root / "locks").mkdir()
    (root / "locks" / "ab.lock").write_text("")  # a lock is not a result
    return root


def _saved(tmp_path, cache):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    saved = blob.save(run, CPU, time.time() - 60, step=3, compile_s=12.5, cache=cache)
    return run, saved


def test_saved_then_loaded_into_an_empty_cache(tmp_path, cache, capsys):
    run, saved = _saved(tmp_path, cache)
    assert saved is not None and saved.files == 2
    assert not [p for p in run.iterdir() if p.name != blob.BLOB]  # no temporary file left
    fresh = tmp_path / "new-node"
    loaded = blob.load(run, CPU, cache=fresh)
    assert (loaded.step, loaded.compile_s, loaded.files) == (3, 12.5, 2)
    assert (fresh / "ab" / "kernel.so").read_bytes() == (cache / "ab" / "kernel.so").read_bytes()
    assert not (fresh / "locks").exists()
    assert not any(p.name.startswith(".trainstack") for p in fresh.iterdir())  # the unpacking folder is gone
    assert capsys.readouterr().err == ""


def test_a_warm_start_keeps_the_blob_and_a_new_compile_adds_to_it(tmp_path, cache):
    run, _ = _saved(tmp_path, cache)
    before = (run / blob.BLOB).stat().st_mtime_ns
    assert blob.save(run, CPU, time.time() + 60, step=9, compile_s=1.0, cache=cache) is None  # nothing new
    assert (run / blob.BLOB).stat().st_mtime_ns == before
    since = time.time()
    (cache / "cd").mkdir()
    (cache / "cd" / "other.so").write_bytes(b"new")
    os.utime(cache / "ab" / "kernel.so", (since - 100, since - 100))
    os.utime(cache / "fxgraph" / "x" / "entry", (since - 100, since - 100))
    assert blob.save(run, CPU, since, step=9, compile_s=1.0, cache=cache).files == 3  # 1 new + 2 carried over


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not a tar", "no meta"])
def test_a_damaged_blob_is_one_line_and_a_cold_compile(tmp_path, cache, capsys, damage):
    run, _ = _saved(tmp_path, cache)
    path = run / blob.BLOB
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":
        path.write_bytes(data[:200] + bytes(b ^ 0xFF for b in data[200:260]) + data[260:])
    elif damage == "not a tar":
        path.write_bytes(gzip.compress(b"hello"))
    else:
        with tarfile.open(path, "w:gz") as tar:
            tar.add(cache / "ab" / "kernel.so", arcname="cache/ab/kernel.so")
    fresh = tmp_path / "new-node"
    assert blob.load(run, CPU, cache=fresh) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged or truncated" in err[0] and "compiling afresh" in err[0], err
    assert not fresh.exists() or not any(p.is_file() for p in fresh.rglob("*"))  # nothing half-unpacked


def test_a_cache_from_another_torch_or_device_is_ignored_with_one_line(tmp_path, cache, capsys, monkeypatch):
    run, _ = _saved(tmp_path, cache)
    monkeypatch.setattr(blob, "device_identity", lambda device: "cuda NVIDIA H100 (sm_90)")
    fresh = tmp_path / "new-node"
    assert blob.load(run, CPU, cache=fresh) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ignoring" in err[0] and "NVIDIA H100" in err[0] and "compiling afresh" in err[0]
    assert not fresh.exists() or not any(p.is_file() for p in fresh.rglob("*"))


def test_a_cache_over_the_bound_is_not_saved(tmp_path, cache, capsys):
    run = tmp_path / "run"
    run.mkdir()
    assert blob.save(run, CPU, time.time() - 60, step=1, compile_s=1.0, max_bytes=1000, cache=cache) is None
    assert not (run / blob.BLOB).exists()
    err = capsys.readouterr().err
    assert "bound" in err and "not saved" in err


def test_a_failed_write_leaves_the_previous_blob(tmp_path, cache, monkeypatch, capsys):
    run, _ = _saved(tmp_path, cache)
    before = (run / blob.BLOB).read_bytes()
    (cache / "cd").mkdir()
    (cache / "cd" / "other.so").write_bytes(b"new")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(blob.os, "fsync", full_disk)
    assert blob.save(run, CPU, time.time() - 1, step=5, compile_s=1.0, cache=cache) is None
    assert (run / blob.BLOB).read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == [blob.BLOB]
    assert "No space left on device" in capsys.readouterr().err


def test_meta_names_versions_and_device(tmp_path, cache):
    run, _ = _saved(tmp_path, cache)
    with tarfile.open(run / blob.BLOB, "r:gz") as tar:
        first = tar.next()
        meta = json.loads(tar.extractfile(first).read())
    assert first.name == "meta.json"
    assert meta["fingerprint"]["torch"] == torch.__version__
    assert meta["fingerprint"]["device"].startswith("cpu")


def test_the_precompiled_header_is_built_in_the_cache_and_travels(tmp_path, monkeypatch):
    """Inductor loads its precompiled header before every kernel, a cached one too: a new node with the
    run's kernels but not the header (it lay under the temp directory) built it again before its first step."""
    from torch._inductor import codecache

    monkeypatch.setattr(codecache, "_HEADER_DIR", codecache._HEADER_DIR)  # put back after the test
    monkeypatch.setattr(codecache, "_HEADER_LOCK_DIR", codecache._HEADER_LOCK_DIR)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    blob.keep_headers_in_cache()
    headers = tmp_path / "inductor" / blob.HEADERS
    assert (str(headers), str(headers / "locks")) == (codecache._HEADER_DIR, codecache._HEADER_LOCK_DIR)
    headers.mkdir(parents=True)
    (headers / "cabc.h").write_text("#include <torch/csrc/inductor/cpp_prefix.h>\n")
    (headers / "cabc.h.gch").write_bytes(os.urandom(3000))
    run, saved = _saved(tmp_path, tmp_path / "inductor")
    fresh = tmp_path / "new-node"
    assert blob.load(run, CPU, cache=fresh).files == 2
    assert (fresh / blob.HEADERS / "cabc.h.gch").read_bytes() == (headers / "cabc.h.gch").read_bytes()
