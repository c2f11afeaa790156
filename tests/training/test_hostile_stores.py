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


@pytest.mark.parametrize("content", ["not json\n", '{"type": "no-such-type"}', None, "dir"])
def test_unusable_google_credentials_are_one_line_at_once(data_dir, tmp_path, monkeypatch, content):
    """gcsfs falls back silently from a credentials file it cannot load to the metadata server and then
    to anonymous access: the user would wait out the bound and read about the network."""
    creds = tmp_path / "creds.json"
    if content == "dir":
        creds.mkdir()
    elif content is not None:  # None: the variable names a file that does not exist
        creds.write_text(content)
    for name, value in GCS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    began = time.monotonic()
    result = train(data_dir, tmp_path / "run", "--max-steps", "2", "--snapshot-uri", "gs://bucket/run")
    took = time.monotonic() - began
    one_line_error(result, f"GOOGLE_APPLICATION_CREDENTIALS={creds} cannot be used")
    assert "unset it" in result[2]
    assert took < 20, took  # no network question was asked
    assert not (tmp_path / "run").exists()


def test_a_loadable_credentials_file_passes_the_check(tmp_path, monkeypatch):
    creds = tmp_path / "adc.json"
    creds.write_text('{"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r"}')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    snapshots.check_google_credentials("gs://bucket/run")  # loads without network, raises nothing
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
    snapshots.check_google_credentials("gs://bucket/run")  # empty: as unset


def test_a_client_that_never_finishes_connecting_is_bounded(tmp_path, monkeypatch):
    """gcsfs asks the metadata server for credentials while the client is made: that counts in the bound."""
    import fsspec

    monkeypatch.setattr(snapshots, "REACH_TIMEOUT_S", 2.0)
    monkeypatch.setattr(fsspec.core, "url_to_fs", lambda *a, **k: time.sleep(30))
    began = time.monotonic()
    with pytest.raises(snapshots.UserError, match="no answer from the store within 2s"):
        snapshots.Store(f"file://{tmp_path}/snaps")
    assert time.monotonic() - began < 10
