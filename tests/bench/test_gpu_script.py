"""bench/gpu.py runs as a script too (`python bench/gpu.py`, as it runs its own peers), from any directory,
and names the first-step variants it records besides the throughput peers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench import cold_start

REPO = Path(__file__).resolve().parents[2]


def test_gpu_py_answers_help_as_a_script_from_anywhere(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu.py"), "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--parts" in done.stdout and "ours_whole" in done.stdout


def test_the_first_step_part_records_cold_cached_and_warm():
    assert {"cold-whole", "warm", "new-node", "new-node-bare", "eager"} == set(cold_start.GPU_VARIANTS)
    # `auto` compiles in line on a GPU: a background variant there would wait for a switch that never comes
    assert set(cold_start.VARIANTS) - set(cold_start.GPU_VARIANTS) == {"cold-background"}
