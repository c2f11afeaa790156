"""Issue 21 item 8: an object store that does not answer is one line within a bounded wait, without
the clients' retry tracebacks."""

from __future__ import annotations

import socket
import time

import pytest

from testbed.object_stores import GCS_TEST_ENV
from testbed.processes import free_port
from tests.support.training_runs import one_line_error, train
from training.checkpoints import snapshots


@pytest.fixture
def silent_server():
    """A port that accepts connections and never answers (a black-holed endpoint)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize("endpoint", ["silent", "refused"])
def test_an_unreachable_gcs_is_one_line_within_the_bound(data_dir, tmp_path, monkeypatch, silent_server, endpoint):
    url = silent_server if endpoint == "silent" else f"http://127.0.0.1:{free_port()}"
    for name, value in GCS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)  # gcsfs sends every request there, without credentials
    monkeypatch.setattr(snapshots, "REACH_TIMEOUT_S", 4.0, raising=False)  # raising=False: the old code runs too
    began = time.monotonic()
    result = train(data_dir, tmp_path / "run", "--max-steps", "2", "--snapshot-uri", "gs://bucket/run")
    took = time.monotonic() - began
    assert "Traceback" not in result[2] and "out of retries" not in result[2], result[2][:3000]
    one_line_error(result, "--snapshot-uri gs://bucket/run")
    assert took < 30, took
    assert not (tmp_path / "run").exists()
