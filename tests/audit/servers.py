"""Local stand-ins for the clouds, started on 127.0.0.1 by the tests and stopped with them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from testbed.processes import free_port, kill_tree, wait_for

BIN = Path(sys.executable).parent


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError as error:
        return getattr(error, "code", None) is not None  # an HTTP error still means it is up


@contextlib.contextmanager
def serving(command: list[str], probe_path: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([*(c.replace("{port}", str(port)) for c in command)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: process.poll() is not None or _answers(url + probe_path), 60, f"{command[0]} on {url}")
        assert process.poll() is None, f"{command[0]} exited with {process.returncode}"
        yield url
    finally:
        kill_tree(process.pid)
        process.wait(timeout=10)


def moto() -> contextlib.AbstractContextManager[str]:
    return serving([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", "{port}"], "/moto-api/")


def gcs_emulator() -> contextlib.AbstractContextManager[str]:
    return serving([str(BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port", "{port}",
                    "--in-memory"], "/storage/v1/b?project=p")
