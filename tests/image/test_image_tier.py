"""images/Dockerfile really built (buildah, --isolation chroot) on a stand-in base with CPU torch, and
run the way the chart runs it: as the image's non-root user, read-only root filesystem, writable
/tmp and /dev/shm (the chart's emptyDirs), the shared volume mounted, no network.

What this proves: the Dockerfile builds; the lock installs with its hashes and is complete (pip check);
torch from the base survives; the entrypoint (training.launch -> torchrun) and `python -m training`
work as uid 10001 on a read-only root; data preparation, two training steps, a checkpoint and the export
work inside the image, and so does W&B's offline mode. What it does not: CUDA, NCCL and the GPU base image itself (its Python, its
torch build); the image here differs from production in the base layer only.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from tests.support.wandb_files import history, wandb_records
from training.observability import wandb_logger

from . import stand_in_base

pytestmark = pytest.mark.image_tier

IMAGE = "localhost/trainstack-training:test"
USER = "10001"  # images/Dockerfile USER = the chart's securityContext.runAsUser
# The chart's writable mounts and environment for a read-only root (workloads/charts/training-job).
CHART_ENV = {"HOME": "/tmp", "XDG_CACHE_HOME": "/tmp/.cache", "HF_HOME": "/tmp/huggingface"}
CORPUS = ["textwrap.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py", "heapq.py"]
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def image() -> str:
    for tool in ("podman", "buildah", "debootstrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: `make test-image` installs it (apt-get install podman buildah debootstrap)")
    start = time.monotonic()
    base = stand_in_base.build()
    TIMINGS["base"] = time.monotonic() - start
    start = time.monotonic()
    subprocess.run(["buildah", "bud", "--isolation", "chroot", "--pull=never", "--build-arg", f"BASE_IMAGE={base}",
                    "-f", "images/Dockerfile", "-t", IMAGE, "."], cwd=stand_in_base.REPO_ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    TIMINGS["build"] = time.monotonic() - start
    yield IMAGE
    print("\nimage tier: " + ", ".join(f"{step} {seconds:.0f}s" for step, seconds in TIMINGS.items()))


def podman_run(image: str, *args: str, entrypoint: str | None = None, shared: Path | None = None) -> subprocess.CompletedProcess:
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    command = ["podman", "run", "--rm", "--read-only", "--runtime", "runc", "--network", "none",
               "--tmpfs", "/tmp:rw,size=1g", "--tmpfs", "/dev/shm:rw,size=256m",
               # Only limits at or below this machine's: an unprivileged container cannot raise them.
               "--ulimit", f"nofile={nofile[0]}:{nofile[1]}", "--ulimit", "nproc=4096:4096"]
    command += [f"--env={key}={value}" for key, value in CHART_ENV.items()]
    if shared is not None:
        command += ["--volume", f"{shared}:/mnt/shared"]
    if entrypoint is not None:
        command += ["--entrypoint", entrypoint]
    return subprocess.run([*command, image, *args], capture_output=True, text=True, timeout=300)


def test_runs_as_the_non_root_user_on_a_read_only_root(image):
    done = podman_run(image, "-c", "id -u; id -g; touch /opt/trainstack/probe 2>&1; touch /tmp/probe && echo tmp-ok",
                      entrypoint="sh")
    lines = done.stdout.splitlines()
    assert lines[:2] == [USER, USER], done.stdout + done.stderr
    assert "Read-only file system" in done.stdout and "tmp-ok" in lines


def test_default_command_runs_the_launcher(image):
    done = podman_run(image)  # ENTRYPOINT training.launch -> torchrun -> `-m training --help`
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "train" in done.stdout


def test_the_launchers_torch_hooks_work_in_the_images_torch(image):
    # training/launch.py patches torch's private c10d rendezvous functions (_create_tcp_store,
    # C10dRendezvousBackend._call_store): a node whose store host is not there yet waits for it.
    # This runs it against the image's torch; the GPU base image's own torch (images/Dockerfile
    # BASE_IMAGE) is checked only where that image is built.
    done = podman_run(image, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                      "--rdzv-endpoint=127.0.0.1:29999", "--rdzv-conf=join_timeout=8,read_timeout=2,is_host=0",
                      "-m", "training", "--help")
    assert done.returncode != 0
    assert "waiting up to join_timeout=8s" in done.stderr, done.stderr[-3000:]
    hooks = podman_run(image, "-c", "from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as b; "
                       "print(callable(b._create_tcp_store), callable(b.C10dRendezvousBackend._call_store))",
                       entrypoint="python")
    assert hooks.stdout.split() == ["True", "True"], hooks.stderr


def test_python_m_training_help(image):
    done = podman_run(image, "-m", "training", "--help", entrypoint="python")
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_locked_dependencies_are_complete_and_torch_is_the_base_images(image):
    done = podman_run(image, "-c", "pip check && python -c 'import torch; print(torch.__version__)'", entrypoint="sh")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No broken requirements found." in done.stdout
    assert done.stdout.strip().splitlines()[-1] == stand_in_base.TORCH.split("==")[1] + "+cpu"


@pytest.fixture(scope="module")
def shared(image, tmp_path_factory) -> Path:
    """The shared volume, owned by the image's user, with a data set prepared inside the image."""
    shared = tmp_path_factory.mktemp("image") / "shared"
    (shared / "corpus").mkdir(parents=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in CORPUS:
        shutil.copy(stdlib / name, shared / "corpus" / name.replace(".py", ".txt"))
    shutil.chown(shared, 10001, 10001)
    for path in shared.rglob("*"):
        shutil.chown(path, 10001, 10001)
    start = time.monotonic()
    prepared = podman_run(image, "-m", "training", "prepare", "--data", "/mnt/shared/corpus", "--out",
                          "/mnt/shared/data", "--tokenizer", "train:512", "--val-fraction", "0.05", "--num-proc", "1",
                          entrypoint="python", shared=shared)
    TIMINGS["prepare"] = time.monotonic() - start
    assert prepared.returncode == 0, prepared.stderr
    return shared


def train_two_steps(image: str, shared: Path, name: str, *flags: str) -> Path:
    """As the chart runs it: the launcher (torchrun) with the trainer as its module."""
    start = time.monotonic()
    trained = podman_run(image, "--nproc-per-node=1", "-m", "training", "train", "--data", "/mnt/shared/data",
                         "--out", f"/mnt/shared/runs/{name}", "--preset", "tiny", "--max-steps", "2", "--batch-size",
                         "2", "--checkpoint-every", "2", "--eval-every", "2", "--eval-samples", "4", "--log-every", "1",
                         "--device", "cpu", "--compile", "off", "--no-progress", *flags, shared=shared)
    TIMINGS[f"train {name}"] = time.monotonic() - start
    assert trained.returncode == 0, trained.stdout + trained.stderr
    output = trained.stdout + trained.stderr
    assert "step 1/2" in output and "step 2/2" in output
    run_dir = shared / "runs" / name
    assert all(p.lstat().st_uid == 10001 for p in run_dir.rglob("*")), "files written by someone other than 10001"
    return run_dir


def test_prepare_and_two_training_steps_inside_the_image(image, shared):
    run_dir = train_two_steps(image, shared, "t")
    assert (run_dir / "checkpoints" / "step_00000002" / "manifest.json").is_file()
    assert any(run_dir.rglob("*.safetensors")), "the Hugging Face export is missing"


def test_wandb_offline_inside_the_image(image, shared):
    """W&B is in the image and logs offline with no network, as uid 10001 on a read-only root: the
    offline run (for a later `wandb sync`) lands in the run directory and holds the step metrics."""
    run_dir = train_two_steps(image, shared, "w", "--wandb-project", "trainstack-image", "--wandb-mode", "offline",
                              "--no-export")
    saved = json.loads((run_dir / wandb_logger.RUN_FILE).read_text())
    (offline,) = list((run_dir / "wandb").glob(f"offline-run-*-{saved['id']}"))
    records = list(wandb_records(offline / f"run-{saved['id']}.wandb"))
    (meta,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (meta.run_id, meta.project) == (saved["id"], "trainstack-image")
    rows = history(records)
    assert sorted(s for s, row in rows.items() if "train/loss" in row) == [1, 2]
    assert all(math.isfinite(rows[s]["train/loss"]) for s in (1, 2)) and "val/loss" in rows[2]
