"""The NCCL each GPUDirect mode's trainer runs, against the training image's own.

torch's cu12x wheels load their pip NCCL before anything on LD_LIBRARY_PATH (DT_RPATH with
FORCE_RPATH, pytorch .ci/manywheel/build_cuda.sh; torch/__init__.py _preload_cuda_deps loads
nvidia/nccl/lib/libnccl.so.* by absolute path), so the installer's NCCL runs only when LD_PRELOADed,
and only one the same major and at least the minor torch was built with may be (NCCL keeps its ABI
backward compatible within 2.x). The pairing is recorded once, in values.yaml
gpuNetworking.<mode>.nccl, and the image's in images/Dockerfile's label.
"""

from __future__ import annotations

import re

from .chart import chart_values
from .dockerfile import instructions
from .test_image import DOCKERFILE

VALUES = chart_values()


def image_nccl() -> tuple[int, ...]:
    labels = " ".join(arg for op, arg in instructions(DOCKERFILE) if op == "LABEL")
    match = re.search(r'org\.trainstack\.torch-nccl="(\d+(?:\.\d+)+)"', labels)
    assert match, "images/Dockerfile names the NCCL its torch bundles (LABEL org.trainstack.torch-nccl)"
    return tuple(int(part) for part in match.group(1).split("."))


def nccl_of(mode: str) -> tuple[int, ...]:
    return tuple(int(part) for part in VALUES["gpuNetworking"][mode]["nccl"].split("."))


def test_tcpxo_runs_the_installers_nccl_which_serves_the_image():
    # installer v1.0.15 ships NCCL 2.28 (qualified 2.28.7-1); PyTorch 2.10 on CUDA 12.8 bundles 2.27.5
    env = VALUES["gpuNetworking"]["tcpxo"]["ncclEnv"]
    assert env["LD_PRELOAD"] == env["NCCL_LIB_DIR"] + "/libnccl.so.2"
    assert nccl_of("tcpxo")[0] == image_nccl()[0] and nccl_of("tcpxo")[1] >= image_nccl()[1]


def test_tcpx_runs_the_images_own_nccl_with_the_plugin():
    # The TCPX installer's newest release (v3.1.12) still ships NCCL 2.19, older than torch's 2.27:
    # preloading it would leave torch calling symbols 2.19 lacks. So the image's NCCL runs, and the
    # chart's record says so; the check on A3 nodes is what proves the plugin works with it.
    assert "LD_PRELOAD" not in VALUES["gpuNetworking"]["tcpx"]["ncclEnv"]
    assert nccl_of("tcpx") == image_nccl()[:2]


def test_rdma_runs_the_images_own_nccl_with_the_gib_plugin():
    # As TCPX: torch's pip NCCL loads first, so gIB's transport (NCCL_NET_PLUGIN) runs with the image's
    # NCCL (no LD_PRELOAD of the installer's); the chart's record says so and the check on A4 nodes proves it.
    assert "LD_PRELOAD" not in VALUES["gpuNetworking"]["rdma"]["ncclEnv"]
    assert nccl_of("rdma") == image_nccl()[:2]
    # The check expects NCCL to log "Using network gIB"; NCCL_NET is not set (Google's pip-NCCL recipe).
    assert VALUES["gpuNetworking"]["rdma"]["ncclNet"] == "gIB"
    assert "NCCL_NET" not in VALUES["gpuNetworking"]["rdma"]["ncclEnv"]
    # container-engine-accelerators gpudirect-rdma/nccl-rdma-installer.yaml at 992db81 runs gIB v1.1.1.
    assert VALUES["gpuNetworking"]["rdma"]["plugin"]["tag"] == "v1.1.1"


def test_the_plugin_and_its_daemon_are_one_release():
    # Bumped together from the same release note (values.yaml comments name it).
    assert (VALUES["gpuNetworking"]["tcpx"]["plugin"]["tag"], VALUES["gpuNetworking"]["tcpx"]["rxdm"]["tag"]) == (
        "v3.1.12", "v2.0.15")
    assert (VALUES["gpuNetworking"]["tcpxo"]["plugin"]["tag"], VALUES["gpuNetworking"]["tcpxo"]["rxdm"]["tag"]) == (
        "v1.0.15", "v1.0.21")
