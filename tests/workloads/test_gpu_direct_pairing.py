"""The NCCL of the training image against the NCCL each GPUDirect plugin is qualified with.

On A3 nodes the chart puts the installer's NCCL first on the trainer's LD_LIBRARY_PATH, so the
image's torch runs on it: that works when the installer's NCCL is the same major and at least the
minor torch was built with (NCCL keeps its ABI backward compatible within 2.x). The pairing is
recorded once, in values.yaml gpuNetworking.<mode>.nccl (container-engine-accelerators
gpudirect-tcpx(o)/README.md, newest releases), and the image's in images/Dockerfile's label.
"""

from __future__ import annotations

import re

import pytest

from .chart import chart_values
from .dockerfile import instructions
from .test_image import DOCKERFILE

VALUES = chart_values()


def image_nccl() -> tuple[int, ...]:
    labels = " ".join(arg for op, arg in instructions(DOCKERFILE) if op == "LABEL")
    match = re.search(r'org\.trainstack\.torch-nccl="(\d+(?:\.\d+)+)"', labels)
    assert match, "images/Dockerfile names the NCCL its torch bundles (LABEL org.trainstack.torch-nccl)"
    return tuple(int(part) for part in match.group(1).split("."))


def installer_serves_the_image(mode: str) -> bool:
    installer = tuple(int(part) for part in VALUES["gpuNetworking"][mode]["nccl"].split("."))
    return installer[0] == image_nccl()[0] and installer[1] >= image_nccl()[1]


def test_tcpxo_installer_nccl_serves_the_training_image():
    # installer v1.0.15 ships NCCL 2.28 (qualified 2.28.7-1); PyTorch 2.10 on CUDA 12.8 bundles 2.27.5
    assert installer_serves_the_image("tcpxo")


@pytest.mark.xfail(strict=True, reason=(
    "no qualified pairing for A3 High: the TCPX installer's newest release (v3.1.12, Jun 22, 2026) still "
    "ships and qualifies NCCL 2.19, which PyTorch left at 2.2; the training package needs torch >= 2.4. "
    "The in-image NCCL check (profiles/nccl-allreduce.yaml) is the gate before training on TCPX."))
def test_tcpx_installer_nccl_serves_the_training_image():
    assert installer_serves_the_image("tcpx")


def test_the_plugin_and_its_daemon_are_one_release():
    # Bumped together from the same release note (values.yaml comments name it).
    assert (VALUES["gpuNetworking"]["tcpx"]["plugin"]["tag"], VALUES["gpuNetworking"]["tcpx"]["rxdm"]["tag"]) == (
        "v3.1.12", "v2.0.15")
    assert (VALUES["gpuNetworking"]["tcpxo"]["plugin"]["tag"], VALUES["gpuNetworking"]["tcpxo"]["rxdm"]["tag"]) == (
        "v1.0.15", "v1.0.21")
