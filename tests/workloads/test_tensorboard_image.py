"""TensorBoard's own image (images/tensorboard/): small, pinned, and able to serve real event files.

No container engine here, so the image's pip set is installed into a fresh virtualenv (pip resolves
it; cached by the file's content) and its `tensorboard` serves event files this test writes, over
HTTP, as it would in the pod.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.stack_runs import REPO
from tests.venvs import installed, pins, venv_from

from .dockerfile import instructions

IMAGE_DIR = REPO / "images" / "tensorboard"
REQUIREMENTS = IMAGE_DIR / "requirements.txt"


def test_image_installs_exactly_the_pinned_set_and_runs_as_the_charts_user():
    steps = instructions(IMAGE_DIR / "Dockerfile")
    (base,) = [args for op, args in steps if op == "FROM"]
    name, _, tag = base.partition(":")
    assert name == "python" and tag.count(".") == 2 and "slim" in tag  # an exact patch release, slim
    assert ("COPY", "requirements.txt /tmp/requirements.txt") in steps
    (install,) = [args for op, args in steps if op == "RUN"]
    assert "pip install --no-deps -r /tmp/requirements.txt" in install and "pip check" in install
    assert ("USER", "10001:10001") in steps
    assert ("ENTRYPOINT", '["tensorboard"]') in steps
    # Nothing CUDA, nothing of the training stack.
    assert not {"torch", "transformers", "tensorflow"} & set(pins(REQUIREMENTS))


@pytest.mark.venv
def test_the_pinned_set_serves_a_runs_event_files(request, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    python = venv_from(REQUIREMENTS, request.config.cache, "tensorboard")
    assert installed(python) == pins(REQUIREMENTS)  # the lock is complete and consistent

    with SummaryWriter(log_dir=str(tmp_path / "run")) as writer:
        for step in range(3):
            writer.add_scalar("train/loss", 3.0 - step, step)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([str(python), "-m", "tensorboard.main", f"--logdir={tmp_path}", "--host=127.0.0.1",
                               f"--port={port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, tags = time.monotonic() + 60, {}
        while time.monotonic() < deadline and "train/loss" not in json.dumps(tags):
            time.sleep(1)
            assert server.poll() is None, server.stdout.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as reply:
                    tags = json.load(reply)
            except OSError:
                continue
        assert list(tags) == ["run"] and list(tags["run"]) == ["train/loss"]
        query = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=run&tag=train/loss"
        with urllib.request.urlopen(query, timeout=5) as reply:
            assert [(step, value) for _, step, value in json.load(reply)] == [(0, 3.0), (1, 2.0), (2, 1.0)]
    finally:
        server.terminate()
        server.wait(timeout=30)
