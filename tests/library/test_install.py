"""`pip install` of trainstack without the training extras deploys: the components import and compose, no torch.

A fresh virtualenv gets the Pulumi lock (requirements.txt, what the package's dependencies resolve to; cached
by content like tests/venvs.py's) and then this checkout with --no-deps; `pip check` confirms the lock
satisfies every declared dependency. The composing script runs from a temporary folder in isolated mode,
so nothing of the checkout is on its path.
"""

import email.message
import email.parser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.venvs import pins, venv_from

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.venv
@pytest.mark.source_tree
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


@pytest.mark.source_tree
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
    """The wheel under test: the release's (TRAINSTACK_WHEEL, .github/release/test-wheel.sh), or one built here."""
    if os.environ.get("TRAINSTACK_WHEEL"):
        return Path(os.environ["TRAINSTACK_WHEEL"])
    root = tmp_path_factory.mktemp("wheel")
    source = source_copy(root / "source")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "-w", str(root / "dist"), str(source)], check=True, cwd=root,
                   timeout=300)
    (built,) = (root / "dist").glob("trainstack-*.whl")
    return built


@pytest.mark.source_tree
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
    before = this_environments_trainstack()
    site = install_elsewhere(wheel, scheme, tmp_path / "installed", tmp_path / "venv")
    lines = installed_paths(site, tmp_path)
    chart = Path(lines["chart"])
    assert chart.is_relative_to(site) and (chart / "Chart.yaml").is_file() and (chart / ".helmignore").is_file()
    assert lines["stopped"].startswith("AwsStack 'training': the training image's build context")
    assert lines["registered"] == "0"
    assert lines["version"] == wheel.name.split("-")[1]
    # The environment running the tests keeps its own trainstack (make's .venv: the editable checkout).
    assert this_environments_trainstack() == before


def test_installing_with_a_prefix_leaves_this_environments_trainstack_installed(wheel, tmp_path):
    """`pip install --prefix` run by this environment's own python uninstalls the trainstack installed here first
    (pip only ignores what is installed with --target): after `make test`, .venv/bin/trainstack was gone. The
    install goes through a virtualenv of its own (`pip --python`), so nothing here is touched."""
    before = this_environments_trainstack()
    if before is None:
        pytest.skip("no trainstack distribution is installed in this environment")
    install_elsewhere(wheel, "--prefix", tmp_path / "installed", tmp_path / "venv")
    assert this_environments_trainstack() == before
    found = subprocess.run([sys.executable, "-I", "-c", "import trainstack, sys; print(trainstack.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert found.returncode == 0, found.stderr[-2000:]


def this_environments_trainstack() -> tuple[str, str, str] | None:
    """(dist-info folder, version, direct_url.json) of the trainstack installed where the tests run, read in a
    fresh process outside the checkout."""
    script = ("import importlib.metadata as m\n"
              "try:\n    d = m.distribution('trainstack')\nexcept m.PackageNotFoundError:\n    print('none')\n"
              "else:\n    print(d._path, d.version, d.read_text('direct_url.json'), sep='\\n')")
    out = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(tempfile.gettempdir())).stdout
    if out.strip() == "none":
        return None
    path, version, direct_url = out.split("\n", 2)
    return path, version, direct_url


def install_elsewhere(wheel: Path, scheme: str, where: Path, venv_dir: Path) -> Path:
    """`wheel` installed with `scheme` into `where` by pip running in a bare virtualenv of its own (no pip,
    no packages: `pip --python` runs this pip's code under that interpreter, so only that venv is looked at).
    Returns the folder Python imports it from."""
    where.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=False).create(venv_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv_dir / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", "--no-deps", scheme, str(where), str(wheel)], check=True,
                   cwd=where.parent, timeout=300)
    if scheme == "--target":
        return where
    return Path(sysconfig.get_path("purelib", vars={"base": str(where), "platbase": str(where)}))


def installed_paths(site: Path, project: Path) -> dict[str, str]:
    """installed_paths.py's report for the trainstack installed in `site`, run with `project` as the Pulumi
    project (the working directory)."""
    script = shutil.copy(Path(__file__).with_name("installed_paths.py"), project / "paths.py")
    ran = subprocess.run([sys.executable, "-I", str(script), str(site)], capture_output=True, text=True,
                         cwd=project, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return dict(line.split(" ", 1) for line in ran.stdout.splitlines())


def test_the_release_records_the_same_chart_path_wherever_trainstack_is_installed(wheel, tmp_path):
    """Two installs (another virtualenv, another Python version's layout) under one Pulumi project: the Helm
    release's `chart` input must be the same string, or every other machine and every upgrade shows a diff and a
    Helm upgrade. Before, it was the install's path relative to the project (`../a/lib/python3.11/...`)."""
    project = tmp_path / "project"
    project.mkdir()
    reports = []
    for root in ("a/lib/python3.11/site-packages", "b/lib/python3.12/site-packages"):
        site = install_elsewhere(wheel, "--target", tmp_path / root, tmp_path / f"venv-{root[0]}")
        reports.append(installed_paths(site, project))
    recorded = reports[0]["release-chart"]
    assert recorded == reports[1]["release-chart"] and recorded.startswith(".trainstack/charts/training-job-")
    copy = project / recorded
    shipped = Path(reports[1]["chart"])
    def chart_files(root: Path) -> list[Path]:  # bytecode of the NCCL check's script is no part of the chart
        return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)

    assert chart_files(copy) == chart_files(shipped)
    assert (project / ".trainstack" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_the_wheel_carries_py_typed_and_the_license(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "trainstack/py.typed" in names  # mypy/pyright read the components' annotations (PEP 561)
    metadata = wheel_metadata(wheel)
    assert metadata["License-Expression"] == "Apache-2.0"
    assert f"{wheel.name.split('-')[0]}-{metadata['Version']}.dist-info/licenses/LICENSE" in names
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert urls["Repository"].startswith("https://") and "Typing :: Typed" in metadata.get_all("Classifier")


def wheel_metadata(wheel: Path) -> email.message.Message:
    archive = zipfile.ZipFile(wheel)
    (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(archive.read(name).decode())


def test_the_trainstack_under_test_is_the_one_expected():
    """When the release tests its wheel (TRAINSTACK_UNDER_TEST=wheel), every import must be the wheel's, never
    a checkout's sources on sys.path; otherwise the checkout's."""
    import trainstack
    import trainstack.components

    where = Path(trainstack.components.__file__).resolve()
    if os.environ.get("TRAINSTACK_UNDER_TEST") == "wheel":
        assert where.is_relative_to(Path(sys.prefix).resolve()) and "site-packages" in where.parts, where
    else:
        assert where.is_relative_to(REPO), where


PULUMI_PACKAGES = {"pulumi", "pulumi-kubernetes", "pulumi-aws", "pulumi-eks", "pulumi-docker-build", "pulumi-gcp"}
DEPLOY_PACKAGES = PULUMI_PACKAGES | {"pyyaml"}


def extra_requirements(metadata: email.message.Message, extra: str) -> dict[str, SpecifierSet]:
    """What `pip install 'trainstack[<extra>]'` asks for, by package, following the extras that name trainstack's
    own (`trainstack[kubernetes]` in `[aws]`) as pip does."""
    found: dict[str, SpecifierSet] = {}
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None or not requirement.marker.evaluate({"extra": extra}):
            continue
        if canonicalize_name(requirement.name) == "trainstack":
            for inner in requirement.extras:
                for name, specifier in extra_requirements(metadata, inner).items():
                    found[name] = found.get(name, SpecifierSet()) & specifier
        else:
            name = canonicalize_name(requirement.name)
            found[name] = found.get(name, SpecifierSet()) & requirement.specifier
    return found


def test_the_infra_extra_takes_ranges_that_admit_a_programs_own_versions_and_the_lock(wheel):
    """`pip install 'trainstack[infra]' pulumi-aws==7.50.0` conflicted with `pulumi-aws==7.51.1`. Ranges with a
    floor and a ceiling (the next major) instead; requirements.txt, the exact lock, inside them."""
    infra = extra_requirements(wheel_metadata(wheel), "infra")
    assert set(infra) == DEPLOY_PACKAGES
    for name, specifier in infra.items():
        operators = {s.operator for s in specifier}
        assert "==" not in operators and ">=" in operators and "<" in operators, f"{name}{specifier}"
    assert infra["pulumi-aws"].contains("7.50.0") and not infra["pulumi-aws"].contains("8.0.0")
    locked = pins(REPO / "requirements.txt")
    assert {name: locked[name] for name in infra if locked[name] not in infra[name]} == {}
    # Nor does pulumi-aws 7.50.0 conflict through what the extra pulls in: the locked pulumi-eks accepts it too.
    eks_needs = [Requirement(r) for r in importlib.metadata.requires("pulumi-eks") or []]
    assert importlib.metadata.version("pulumi-eks") == locked["pulumi-eks"]
    assert all(r.specifier.contains("7.50.0") for r in eks_needs if canonicalize_name(r.name) == "pulumi-aws")


def test_each_cloud_has_an_extra_and_the_kubernetes_one_brings_neither_clouds_sdk(wheel):
    metadata = wheel_metadata(wheel)
    kubernetes = set(extra_requirements(metadata, "kubernetes"))
    aws = set(extra_requirements(metadata, "aws"))
    gcp = set(extra_requirements(metadata, "gcp"))
    assert kubernetes == {"pulumi", "pulumi-kubernetes", "pyyaml"}
    assert aws == kubernetes | {"pulumi-aws", "pulumi-eks", "pulumi-docker-build"}
    assert gcp == kubernetes | {"pulumi-gcp", "pulumi-docker-build"}
    assert aws | gcp == set(extra_requirements(metadata, "infra"))


def test_training_platform_composes_without_either_clouds_sdk(tmp_path):
    """`[kubernetes]` installs neither cloud's SDK: importing trainstack.components used to import pulumi_aws
    (and pulumi_gcp, pulumi_eks, pulumi_docker_build) for every component. Now each cloud part is imported
    on first use, and asking for one without its SDK names the extra to install."""
    script = Path(__file__).with_name("compose_without_clouds.py")
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert "composed default train" in lines and "cloud modules none" in lines
    assert lines[-1] == ("asked for EksCluster: EksCluster needs pulumi_aws, which this environment lacks. Fix: "
                         "install trainstack with the extra of its cloud ([aws], [gcp] or [infra] for both; "
                         "docs/library.md, Install)")


def test_the_install_commands_in_docs_library_md_name_what_exists():
    """There is no trainstack on PyPI: `pip install 'trainstack[infra]'` fetches nothing of this project (or a
    stranger's package of that name). Every pip command docs/library.md shows is the git URL at a release tag
    of pyproject's Repository, a checkout's path, or the checkout's editable install, each with extras pyproject
    defines; `pulumi package add` names the same repository and tag."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    repository, tag = project["urls"]["Repository"], f"v{project['version']}"
    text = (REPO / "docs" / "library.md").read_text()
    commands = re.findall(r"pip install ((?:-e )?'[^']+')", text)
    assert len(commands) >= 4, commands
    for command in commands:
        target = command.removeprefix("-e ").strip("'")
        if "@ git+" in target:
            requirement = Requirement(target)
            assert requirement.name == "trainstack" and requirement.url == f"git+{repository}@{tag}", command
            extras = requirement.extras
        else:
            path, _, rest = target.partition("[")
            assert path.startswith(("/", ".")) and path.rstrip("/").endswith(("trainstack", ".")), command
            extras = set(rest.rstrip("]").split(","))
        assert extras <= set(project["optional-dependencies"]), command
    assert not re.search(r"pip install ['\"]?trainstack(\[[^\]]*\])?['\"]?(?!\s*@)(\s|$)", text)  # bare
    host_path = repository.removeprefix("https://")
    assert f"pulumi package add {host_path}.git/provider@{tag}" in text


def test_the_provider_serves_the_committed_schema_with_its_package_metadata():
    """The schema `pulumi package add` gets is the committed schema.json, metadata included, also from an installed
    trainstack (the release runs this against its wheel)."""
    import json

    from trainstack.components import HOSTED
    from trainstack.provider import NAME, VERSION, TrainstackProvider

    served = json.loads(TrainstackProvider(HOSTED, NAME, version=VERSION).schema)
    assert served == json.loads((REPO / "schema.json").read_text())
    assert "kind/component" in served["keywords"] and served["license"] == "Apache-2.0"
