"""--snapshot-uri against real object-store servers on 127.0.0.1 (moto's S3 server, the GCS emulator)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from testbed.object_stores import ThrottledProxy, gcs_emulator, moto_s3, s3_client
from testbed.processes import kill_tree, wait_for
from tests.support.training_runs import REPO, TINY, env, one_line_error, train

pytestmark = pytest.mark.timeout(300)
CKPT = "checkpoints/step_{:08d}"


def serve(monkeypatch, server):
    """Run `server` for one test, with its client environment set in this process (and its children)."""
    with server as values:
        for key, value in values.items():
            monkeypatch.setenv(key, value)
        yield values


@pytest.fixture
def s3(monkeypatch):
    yield from serve(monkeypatch, moto_s3("ckpts"))


@pytest.fixture
def gcs(monkeypatch):
    yield from serve(monkeypatch, gcs_emulator("gbkt"))


def train_process(data, run, log, endpoint: str, *extra: str) -> subprocess.Popen:
    """`train` as a real process whose S3 endpoint is `endpoint` (e.g. a throttling proxy)."""
    e = env()
    e["AWS_ENDPOINT_URL"] = endpoint
    args = [sys.executable, "-m", "training", "train", "--data", str(data), "--out", str(run), *TINY, *extra]
    return subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=e, cwd=REPO,  # noqa: SIM115
                            start_new_session=True)


def remote_steps(fs, prefix: str) -> tuple[list[int], list[int]]:
    """(complete, in progress) checkpoint steps under s3://prefix, listed straight from the server."""
    fs.invalidate_cache()
    files = set(fs.find(prefix))
    complete, partial = [], []
    for path in files:
        parts = path.split("/")
        if len(parts) >= 2 and parts[-2].startswith("step_") and parts[-1] == "uploaded_by.json":
            step = int(parts[-2][5:])
            has_manifest = path.replace("uploaded_by.json", "manifest.json") in files
            (complete if has_manifest else partial).append(step)
    return sorted(complete), sorted(partial)


def test_killed_mid_upload_resumes_from_s3_into_an_empty_run_dir(data_dir, tmp_path, s3):
    fs = s3_client()
    # Objects this run did not write, under its prefix: never deleted, never resumed from.
    fs.pipe_file("ckpts/r1/notes/readme.txt", b"someone's notes")
    fs.pipe_file("ckpts/r1/" + CKPT.format(1) + "/model.pt", b"someone else's checkpoint")
    moto_port = int(s3["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    slow = ThrottledProxy(moto_port, rate=250_000)  # 1.5 MB per checkpoint: about 6 s each
    first = tmp_path / "first"
    proc = train_process(data_dir, first, tmp_path / "first.log", f"http://127.0.0.1:{slow.port}", "--max-steps",
                         "100000", "--checkpoint-every", "4", "--keep-checkpoints", "2", "--snapshot-uri", "s3://ckpts/r1")
    try:
        def one_complete_and_one_uploading():
            complete, partial = remote_steps(fs, "ckpts/r1")
            return (complete, partial) if complete and any(p > max(complete) for p in partial) else None

        complete, partial = wait_for(one_complete_and_one_uploading, 180, "a complete upload and one under way",
                                     poll=0.1)
        kill_tree(proc.pid)
        proc.wait(timeout=30)
    finally:
        slow.close()
        if proc.poll() is None:
            kill_tree(proc.pid)
    assert (first / "loss.png").is_file(), "loss.png is drawn during training, not only at the end"
    newest = max(complete)

    second = tmp_path / "second"  # a new machine: nothing on disk
    code, out, err = train(data_dir, second, "--max-steps", str(newest + 8), "--checkpoint-every", "4",
                           "--keep-checkpoints", "2", "--snapshot-uri", "s3://ckpts/r1")
    assert code == 0, err
    assert f"restored the checkpoint of step {newest} from s3://ckpts/r1/{CKPT.format(newest)}" in out
    assert f"resumed from {second}/{CKPT.format(newest)} (step {newest}" in out
    complete, partial = remote_steps(fs, "ckpts/r1")
    assert complete == [newest + 4, newest + 8], "retention keeps the newest 2 of this run's checkpoints"
    assert partial == [], "this run's abandoned partial uploads are removed"
    assert fs.cat_file("ckpts/r1/notes/readme.txt") == b"someone's notes"
    assert fs.cat_file("ckpts/r1/" + CKPT.format(1) + "/model.pt") == b"someone else's checkpoint"
    local_manifest = (second / CKPT.format(newest + 8) / "manifest.json").read_bytes()
    assert fs.cat_file(f"ckpts/r1/{CKPT.format(newest + 8)}/manifest.json") == local_manifest
    assert json.loads(fs.cat_file("ckpts/r1/export/manifest.json"))["files"]["config.json"]["bytes"] > 0
    assert fs.exists("ckpts/r1/loss.png") and fs.exists("ckpts/r1/metrics.jsonl")
    uploads = [json.loads(line) for line in (second / "metrics.jsonl").read_text().splitlines() if '"upload"' in line]
    assert {u["what"] for u in uploads if u["ok"]} >= {"checkpoint", "export"}


def test_a_corrupted_object_in_gcs_is_detected_and_the_previous_checkpoint_used(data_dir, tmp_path, gcs):
    import gcsfs

    uri = "gs://gbkt/runs/r2"
    assert train(data_dir, tmp_path / "a", "--max-steps", "6", "--checkpoint-every", "2", "--no-export",
                 "--snapshot-uri", uri)[0] == 0
    fs = gcsfs.GCSFileSystem(skip_instance_cache=True)
    target = f"gbkt/runs/r2/{CKPT.format(6)}/model.pt"
    damaged = bytearray(fs.cat_file(target))
    damaged[len(damaged) // 2] ^= 0xFF
    fs.pipe_file(target, bytes(damaged))

    code, out, err = train(data_dir, tmp_path / "b", "--max-steps", "8", "--checkpoint-every", "2", "--no-export",
                           "--snapshot-uri", uri)
    assert code == 0, err
    assert f"{uri}/{CKPT.format(6)} is damaged (model.pt fails its checksum); trying the previous checkpoint" in err
    assert "restored the checkpoint of step 4" in out and "(step 4," in out
    # Training went on from step 4 and uploaded step 6 again, intact this time.
    fs.invalidate_cache()
    local = json.loads((tmp_path / "b" / CKPT.format(6) / "manifest.json").read_text())
    remote = json.loads(fs.cat_file(f"gbkt/runs/r2/{CKPT.format(6)}/manifest.json"))
    assert remote == local and fs.size(target) == local["files"]["model.pt"]["bytes"]
    assert bytes(damaged) != fs.cat_file(target)


def test_sigterm_waits_for_the_final_checkpoint_to_reach_the_store(data_dir, tmp_path, s3):
    fs = s3_client()
    slow = ThrottledProxy(int(s3["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]), rate=500_000)
    log = tmp_path / "log"
    proc = train_process(data_dir, tmp_path / "run", log, f"http://127.0.0.1:{slow.port}", "--max-steps", "100000",
                         "--checkpoint-every", "100000", "--snapshot-uri", "s3://ckpts/r3")
    try:
        wait_for(lambda: "step 20/" in log.read_text(), 120, "training to run")
        os.kill(proc.pid, signal.SIGTERM)
        sent = time.monotonic()
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        took = time.monotonic() - sent
    finally:
        slow.close()
        if proc.poll() is None:
            kill_tree(proc.pid)
    text = log.read_text()
    stopped = int(re.search(r"checkpoint of step (\d+) saved", text).group(1))
    complete, partial = remote_steps(fs, "ckpts/r3")
    assert complete == [stopped] and partial == [], text[-2000:]
    assert took > 2.0, "1.5 MB through a 0.5 MB/s link: the exit waited for the upload"


def test_a_failing_store_is_reported_and_never_fails_training(data_dir, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "checkpoints").write_text("a file where the checkpoints folder should be")
    code, out, err = train(data_dir, tmp_path / "run", "--max-steps", "4", "--checkpoint-every", "2", "--no-export",
                           "--snapshot-uri", f"file://{store}", "--snapshot-wait", "3")
    assert code == 0, err
    assert "uploading checkpoint step_00000002 to file://" in err and "retrying in 2s" in err
    assert "unfinished after 3s" in err
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["step_00000002", "step_00000004"]
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any(e.get("event") == "upload" and e["ok"] is False for e in events)


def test_bad_snapshot_uris_are_one_line_errors(data_dir, tmp_path, s3):
    for uri in ("ftp://host/path", "s3://", "bucket/path"):
        one_line_error(train(data_dir, tmp_path / "run", "--snapshot-uri", uri), "use s3://BUCKET/PREFIX")
    one_line_error(train(data_dir, tmp_path / "run", "--snapshot-uri", "s3://no-such-bucket/r"),
                   "bucket no-such-bucket does not exist")
    assert not (tmp_path / "run").exists(), "refused before anything is written"
    for name, uri in (("a", "s3://ckpts/shared"), ("b", "s3://ckpts/other")):
        assert train(data_dir, tmp_path / name, "--max-steps", "2", "--no-export", "--snapshot-uri", uri)[0] == 0
    # Run b pointed at run a's URI would overwrite a's checkpoints.
    one_line_error(train(data_dir, tmp_path / "b", "--max-steps", "4", "--no-export", "--snapshot-uri",
                         "s3://ckpts/shared"), "holds the snapshots of another run", "its own --snapshot-uri")
