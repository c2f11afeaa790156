"""The image's lock (images/requirements.lock) pins by hash exactly what the package needs (fast)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "images"
EXTRA_IMAGE_DEPS = {"python-etcd"}  # torchrun's etcd rendezvous backends import it
# The trainer and --wandb-project on the clusters (the pods install nothing at run time); not the package's
# own dependencies, which are the Pulumi components' (the image trains, it does not deploy).
IMAGE_EXTRAS = ("train", "wandb")


def requirements(path: Path) -> list[Requirement]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [Requirement(line) for line in lines if line]


def locked() -> dict[str, list[tuple[str, str, list[str]]]]:
    """name -> [(version, marker, hashes)], from the lock's `name==version ; marker \\` blocks."""
    entries: dict[str, list] = {}
    for block in re.split(r"\n(?=\S)", IMAGES.joinpath("requirements.lock").read_text()):
        head = re.match(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$", block.splitlines()[0])
        if head:
            name, version, marker = head.groups()
            entries.setdefault(canonicalize_name(name), []).append(
                (version, marker or "", re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    return entries


def test_lock_input_is_the_image_extras_less_torch():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    dependencies = [d for extra in IMAGE_EXTRAS for d in project["optional-dependencies"][extra]]
    wanted = {str(r) for r in map(Requirement, dependencies) if canonicalize_name(r.name) != "torch"}
    declared = {str(r) for r in requirements(IMAGES / "requirements.in")}
    assert declared - {r for r in declared if canonicalize_name(Requirement(r).name) in EXTRA_IMAGE_DEPS} == wanted


def test_lock_pins_every_input_within_its_range_by_hash():
    pins = locked()
    assert "torch" not in pins, "torch comes from the base image; keep it out of the lock"
    for requirement in requirements(IMAGES / "requirements.in"):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock: re-run the command in requirements.in"
        for version, _, _ in pins[name]:
            assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} vs {requirement}"
    assert all(hashes for entries in pins.values() for _, _, hashes in entries)
    assert {"setuptools"} <= set(pins), "the image builds the package without build isolation: lock setuptools"


def test_dockerfile_installs_the_lock_with_hashes_only():
    text = (IMAGES / "Dockerfile").read_text()
    assert "COPY images/requirements.lock" in text
    assert re.search(r"pip install --require-hashes --no-deps -r requirements.lock", text)
    assert "--no-build-isolation" in text
