"""provider/ as Pulumi's language host starts the package: `python provider <engine address>`.

The process prints its gRPC port; GetSchema over that port returns the committed schema.json. Started from
another folder, without the checkout on PYTHONPATH, as it is for `pulumi package add`.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

REPO = Path(__file__).resolve().parents[2]


def test_the_plugin_entry_point_serves_the_committed_schema(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.Popen([sys.executable, str(REPO / "provider"), "127.0.0.1:1"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = process.stdout.readline().strip()
        assert port.isdigit(), process.stderr.read() if process.poll() is not None else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            served = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60).schema
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert json.loads(served) == json.loads((REPO / "schema.json").read_text())
