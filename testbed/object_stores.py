"""Real object-store servers on 127.0.0.1 for the tests and the benchmark, and a throttling proxy.

S3: moto's server (`moto[server]`), in this process, on a free port. GCS: `gcp-storage-emulator`, in
memory. Both speak the real HTTP APIs that s3fs and gcsfs use; clients find them through the same
environment variables a cluster would set (AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST).
The proxy forwards TCP to a server at a chosen upload rate: a slow store, or (when `down`) a broken one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

from testbed.processes import free_port

# gcsfs asks GCS's control-plane gRPC API for the bucket type; the emulator has no such API and
# every call would wait 60 s for it. Real GCS answers it; the tests turn the lookup off.
GCS_TEST_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


@contextlib.contextmanager
def moto_s3(bucket: str) -> Iterator[dict]:
    """An S3 server with `bucket`; yields the environment a client needs (stopped at the end)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_MAX_ATTEMPTS": "2"}
    # moto keeps its buckets in this process's memory, shared by every server it runs (the audit tests'
    # too): start empty, and leave nothing behind.
    reset = urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=30).close()
    try:
        with patched_env(env):
            s3_client().mkdir(bucket)
        yield env
    finally:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(reset, timeout=30).close()
        server.stop()


@contextlib.contextmanager
def gcs_emulator(bucket: str) -> Iterator[dict]:
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    try:
        yield {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", **GCS_TEST_ENV}
    finally:
        server.stop()


@contextlib.contextmanager
def patched_env(values: dict) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def s3_client():
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True)


class ThrottledProxy:
    """TCP proxy 127.0.0.1:port -> 127.0.0.1:upstream; client-to-server bytes at most `rate` bytes/s."""

    def __init__(self, upstream_port: int, rate: float):
        self.upstream_port, self.rate = upstream_port, rate
        self.down = False  # when set, new connections are closed at once (the store is unreachable)
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, self.rate), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, None), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rate: float | None) -> None:
        chunk = 16 * 1024
        try:
            while True:
                data = src.recv(chunk)
                if not data:
                    break
                dst.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
