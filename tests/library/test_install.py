"""`pip install` of trainstack without the training extras deploys: the components import and compose, no torch.

A fresh virtualenv gets the Pulumi lock (requirements.txt, what the package's dependencies resolve to; cached
by content like tests/venvs.py's) and then this checkout with --no-deps; `pip check` confirms the lock
satisfies every declared dependency. The composing script runs from a temporary folder in isolated mode,
so nothing of the checkout is on its path.
"""

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.venvs import venv_from

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.venv
def test_installed_without_training_extras_composes_a_component_outside_the_repo(request, tmp_path):
    python = venv_from(REPO / "requirements.txt", request.config.cache, "library")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    # From a copy without build output: pip builds in the source tree, and a stale build/ there would leak
    # removed modules into the wheel (and litter the checkout).
    source = source_copy(tmp_path / "source")
    subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(source)], check=True, cwd=tmp_path)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0

    script = shutil.copy(Path(__file__).with_name("compose_installed.py"), tmp_path / "compose.py")
    composed = subprocess.run([str(python), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300)
    assert composed.returncode == 0, composed.stdout[-3000:] + composed.stderr[-3000:]
    assert composed.stdout.strip().splitlines()[-1] == "composed default train"


def test_the_images_build_context_still_installs_the_trainer_alone(tmp_path):
    """images/Dockerfile copies only pyproject.toml and training/, then installs `.` with --no-deps and no build
    isolation: the package's new data-files and packages must not break that build."""
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(REPO / "pyproject.toml", context)
    shutil.copytree(REPO / "training", context / "training", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "installed"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                            "--no-build-isolation", "--target", str(target), "."], cwd=context, capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) == ["bin", "training"]


def source_copy(destination: Path) -> Path:
    """The checkout without build output or virtualenvs (pip builds in the source tree)."""
    return shutil.copytree(REPO, destination, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "venv", ".pytest_cache", ".ruff_cache", "build", "*.egg-info", "__pycache__"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source = source_copy(root / "source")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "-w", str(root / "dist"), str(source)], check=True, cwd=root,
                   timeout=300)
    (built,) = (root / "dist").glob("trainstack-*.whl")
    return built


def test_the_wheel_carries_every_file_of_the_chart(wheel):
    # Every file git tracks in the chart, at any depth, dotfiles (.helmignore) included.
    tracked = subprocess.run(["git", "ls-files", "workloads/charts/training-job"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    expected = sorted(p.replace("workloads/charts/", "trainstack/charts/", 1) for p in tracked)
    shipped = sorted(n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("trainstack/charts/"))
    assert shipped == expected


def test_the_wheel_carries_the_provisioning_request_crd(wheel):
    # The aws-p5 stack creates it from the package (trainstack/infra/aws/cluster_autoscaler.py).
    assert "trainstack/infra/aws/crds/provisioningrequests.autoscaling.x-k8s.io.yaml" in zipfile.ZipFile(wheel).namelist()


@pytest.mark.parametrize("scheme", ["--target", "--prefix"])
def test_an_installed_trainstack_finds_its_chart_and_refuses_a_stack_without_the_image_context(wheel, tmp_path,
                                                                                               scheme):
    # pip puts the package elsewhere with --target/--prefix (and --user): the chart is package data, found
    # through importlib.resources, not under sys.prefix. The image's build context is the checkout's and is
    # not in the wheel: AwsStack says so before registering anything.
    where = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    scheme, str(where), str(wheel)], check=True, cwd=tmp_path, timeout=300)
    site = where if scheme == "--target" else Path(sysconfig.get_path(
        "purelib", vars={"base": str(where), "platbase": str(where)}))
    script = shutil.copy(Path(__file__).with_name("installed_paths.py"), tmp_path / "paths.py")
    ran = subprocess.run([sys.executable, "-I", str(script), str(site)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines())
    chart = Path(lines["chart"])
    assert chart.is_relative_to(site) and (chart / "Chart.yaml").is_file() and (chart / ".helmignore").is_file()
    assert lines["stopped"].startswith("AwsStack 'training': the training image's build context")
    assert lines["registered"] == "0"
