"""Fresh virtualenvs built from a pinned requirements file, resolved by pip for real, cached by content.

A venv is keyed by the file's text and the interpreter's version: an unchanged lock reuses it (pytest's
cache directory), any change builds a new one. pip resolves the whole set (no --no-deps), so a lock
that is missing a dependency, or pins two that conflict, fails here rather than on a user's machine.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest


def pins(requirements: Path) -> dict[str, str]:
    """{normalized name: version} of a requirements file whose every entry is `name==version`."""
    found = {}
    for line in requirements.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            name, separator, version = entry.partition("==")
            assert separator and version, f"{requirements.name}: {entry!r} is not pinned with =="
            found[normalized(name)] = version
    return found


def normalized(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def installed(python: Path) -> dict[str, str]:
    """{normalized name: version} of what a venv holds, pip and its bootstrap tools left out."""
    frozen = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True,
                            check=True).stdout
    found = {normalized(n): v for n, _, v in (line.partition("==") for line in frozen.splitlines()) if v}
    return {n: v for n, v in found.items() if n not in ("pip", "setuptools", "wheel")}


def venv_from(requirements: Path, cache: pytest.Cache, label: str) -> Path:
    """The python of a venv holding exactly what pip resolves for `requirements`."""
    key = hashlib.sha256(requirements.read_bytes() + sys.version.encode()).hexdigest()[:16]
    root = cache.mkdir("venvs") / f"{label}-{key}"
    python = root / "bin" / "python"
    if (root / ".complete").exists():
        return python
    shutil.rmtree(root, ignore_errors=True)  # a build that was interrupted
    venv.EnvBuilder(with_pip=True).create(root)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", str(requirements)], check=True)
    (root / ".complete").touch()
    return python
