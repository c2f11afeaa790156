"""A stand-in for the production base image (pytorch/pytorch, CUDA), built here without a registry.

Debian (debootstrap from the machine's own apt mirror) + a Python venv on PATH with the CPU build of
torch==2.13.0 installed, as `python` and `pip` are in the PyTorch image. Registries and PyPI are out of
reach inside a build, so the base also carries a wheelhouse of images/requirements.lock and a
/etc/pip.conf that points pip at it: images/Dockerfile's `pip install` steps then run unchanged.
Cached in podman's store under a tag keyed by everything that goes into it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK = REPO_ROOT / "images" / "requirements.lock"
CACHE = REPO_ROOT / ".cache" / "image-tier"
SUITE = "bookworm"  # Python 3.11, like the host that downloads the wheels
TORCH = "torch==2.13.0"  # the CPU build this machine's package index serves
PACKAGES = ("python3", "python3-venv", "ca-certificates")
VENV_PATH = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(*command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, **kwargs)


def debian_mirror() -> str:
    """TRAINSTACK_DEBIAN_MIRROR, else the first Debian URI in this machine's apt sources."""
    if os.environ.get("TRAINSTACK_DEBIAN_MIRROR"):
        return os.environ["TRAINSTACK_DEBIAN_MIRROR"]
    sources = sorted(Path("/etc/apt").glob("sources.list.d/*.sources")) + [Path("/etc/apt/sources.list")]
    for source in sources:
        text = source.read_text() if source.exists() else ""
        for uri in re.findall(r"(?:^URIs:\s*|^deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.MULTILINE):
            if uri.rstrip("/").endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def tag() -> str:
    key = hashlib.sha256(LOCK.read_bytes() + Path(__file__).read_bytes() + TORCH.encode()).hexdigest()[:12]
    return f"localhost/trainstack-test-base:{key}"


def _rootfs() -> Path:
    """debootstrap once, kept as a tarball (about a minute from the mirror)."""
    tarball = CACHE / f"debian-{SUITE}-minbase.tar"
    if not tarball.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as work:
            root = Path(work) / "rootfs"
            run("debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root),
                debian_mirror(), stdout=subprocess.DEVNULL)
            run("tar", "-C", str(root), "-cf", str(tarball) + ".part", ".")
            os.replace(str(tarball) + ".part", tarball)
    return tarball


def _wheelhouse(target: Path) -> None:
    """torch (CPU) with its dependencies, and every locked wheel, checked against the lock's hashes."""
    pip = (sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(target))
    run(*pip, "--only-binary=:all:", TORCH)
    run(*pip, "--require-hashes", "--no-deps", "-r", str(LOCK))  # python-etcd comes as an sdist


def build() -> str:
    """The stand-in base's tag, building it when podman's store does not have it yet."""
    name = tag()
    if subprocess.run(["podman", "image", "exists", name]).returncode == 0:
        return name
    tarball = _rootfs()
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        root = Path(work) / "rootfs"
        root.mkdir()
        run("tar", "-C", str(root), "-xf", str(tarball))
        wheels = root / "opt" / "wheelhouse"
        _wheelhouse(wheels)
        # This machine's pip settings (its index and wheel folders) mean nothing inside the new root.
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        run("chroot", str(root), "python3", "-m", "venv", "/opt/venv", env=clean)
        run("chroot", str(root), "/opt/venv/bin/pip", "install", "--quiet", "--no-index", "--find-links",
            "/opt/wheelhouse", TORCH, env=clean)
        for wheel in wheels.glob("torch-*.whl"):
            wheel.unlink()  # installed; the image never installs torch
        (root / "etc" / "pip.conf").write_text("[global]\nno-index = true\nfind-links = /opt/wheelhouse\n")
        shutil.rmtree(root / "root" / ".cache", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        run("podman", "import", "--quiet", "--change", f"ENV PATH={VENV_PATH}", "--change", 'CMD ["python3"]',
            "-", name, stdin=tar.stdout, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise RuntimeError("tar of the stand-in base failed")
    return name


if __name__ == "__main__":
    print(build())
