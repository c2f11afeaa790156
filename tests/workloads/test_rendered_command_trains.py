"""The chart's rendered torchrun command really trains: two elastic agents on this machine stand in
for two pods (only the rendezvous host differs: node 0's DNS name becomes 127.0.0.1)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.processes import free_port

from .chart import REPO_ROOT, deep_merge, load_values, render, trainer

JOB_UID = "0b5e7c1a-2d44-4f0e-9c61-7a3f1e2b9d08"
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "nodes", "rendezvous", "and", "checkpoints", "land"]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # two agents share two cores


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A tiny tokenized corpus made by the package's own `prepare` (offline BPE tokenizer)."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    (root / "text.txt").write_text("\n".join(" ".join(rng.choices(WORDS, k=12)) for _ in range(3000)))
    result = run([sys.executable, "-m", "training", "prepare", "--data", str(root / "text.txt"),
                  "--out", str(root / "data"), "--tokenizer", "train:512", "--val-fraction", "0.05"])
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "data"


def test_two_agents_run_the_rendered_command_to_completion(data_dir, tmp_path):
    run_dir = tmp_path / "run"
    values = deep_merge(load_values("cpu-single-node"), {
        "job": {"pods": {"min": 2, "max": 2}},
        "storage": {"pvc": "shared-runs"},
        "train": {"data": str(data_dir), "out": str(run_dir), "preset": "tiny", "maxSteps": 4,
                  "batchSize": 2, "checkpointEvery": 2,
                  "extraArgs": ["--block-size", "32", "--eval-every", "2", "--eval-samples", "2",
                                "--device", "cpu", "--compile", "off", "--no-progress"]},
    })
    port = free_port()
    # What the kubelet does ($(VAR) expansion) and what DNS does (node 0's name -> its address).
    args = [arg.replace("$(TRAINSTACK_JOB_UID)", JOB_UID) for arg in trainer(render(values))["args"]]
    args = [f"--rdzv-endpoint=127.0.0.1:{port}" if arg.startswith("--rdzv-endpoint=") else arg for arg in args]

    command = [sys.executable if part == "python" else part for part in trainer(render(values))["command"]]
    assert command[1:] == ["-m", "training.launch"]
    # Logs go to files, not pipes: an agent blocked on a full pipe would stall its peer's collectives.
    log_files = [tmp_path / f"agent{i}.log" for i in range(2)]
    agents = [subprocess.Popen([*command, *args], cwd=REPO_ROOT, env=ENV, stdout=log.open("w"),
                               stderr=subprocess.STDOUT) for log in log_files]
    try:
        for agent in agents:
            agent.wait(timeout=240)
    finally:
        for agent in agents:
            agent.kill()
    logs = [log.read_text() for log in log_files]
    assert [agent.returncode for agent in agents] == [0, 0], "\n".join(log[-2000:] for log in logs)

    assert "2 worker(s)" in "".join(logs)
    # What the TensorBoard Deployment and later jobs read from the run directory.
    assert list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert (run_dir / "export").is_dir()
    assert (run_dir / "checkpoints").is_dir()


def test_launcher_usage_errors_exit_2_which_the_job_treats_as_fatal():
    # podFailurePolicy FailJob on exit code 2: the launcher's own argument errors exit 2 (and the
    # trainer's bad-input exits pass through it, tests/training/test_launch.py).
    result = run([sys.executable, "-m", "training.launch", "--nnodes=1:1", "--no-such-flag", "-m", "training", "train"])
    assert result.returncode == 2, result.stderr[-2000:]
