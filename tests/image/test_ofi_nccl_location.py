"""The image build fails when aws-ofi-nccl's libnccl-net.so is not where the chart's LD_LIBRARY_PATH points
(issue 28 item 10): NCCL would otherwise fall back to sockets without an error.

The EFA installer cannot run here (no network), so the Dockerfile's check itself is run, in bash, over a
stand-in /opt/amazon tree: found in lib or lib/x86_64-linux-gnu passes, only libnccl-net-ofi.so or no
plugin fails. And the directories it checks are exactly the chart's ofi-nccl directories.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
VALUES = REPO_ROOT / "workloads" / "charts" / "training-job" / "values.yaml"
OFI_NCCL = "/opt/amazon/ofi-nccl"


def check_snippet() -> str:
    """The Dockerfile's libnccl-net.so check, as one shell command."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"\{ \[ -e /opt/amazon/ofi-nccl/.*?exit 1; \}; \}", text)
    assert match, "images/Dockerfile has no libnccl-net.so check after the EFA installer"
    return match.group(0)


def chart_ofi_nccl_directories() -> list[str]:
    path = yaml.safe_load(VALUES.read_text())["gpuNetworking"]["efa"]["ncclEnv"]["LD_LIBRARY_PATH"]
    return [d for d in path.split(":") if d.startswith(OFI_NCCL)]


def test_the_check_looks_exactly_where_the_chart_points():
    checked = re.findall(r"\[ -e (\S+)/libnccl-net\.so \]", check_snippet())
    assert checked == chart_ofi_nccl_directories()
    # Ubuntu's packages put the plugin under the multiarch directory (the image's base is Ubuntu).
    assert f"{OFI_NCCL}/lib/x86_64-linux-gnu" in checked


def run_check(root: Path, files: list[str]) -> subprocess.CompletedProcess:
    for name in files:
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    command = check_snippet().replace("/opt/amazon", f"{root}/opt/amazon")
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("plugin", [f"{OFI_NCCL}/lib/libnccl-net.so", f"{OFI_NCCL}/lib/x86_64-linux-gnu/libnccl-net.so"])
def test_the_build_goes_on_when_the_plugin_is_where_the_chart_points(tmp_path, plugin):
    assert run_check(tmp_path, [plugin]).returncode == 0


@pytest.mark.parametrize("files", [[], [f"{OFI_NCCL}/lib64/libnccl-net.so"],
                                   [f"{OFI_NCCL}/lib/x86_64-linux-gnu/libnccl-net-ofi.so"]])
def test_the_build_fails_when_it_is_not(tmp_path, files):
    done = run_check(tmp_path, files)
    assert done.returncode == 1
    assert "aws-ofi-nccl: no libnccl-net.so" in done.stderr
    for name in files:  # what the installer did put there is listed, to fix the chart by
        assert name in done.stderr
