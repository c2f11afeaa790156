"""What trainstack says about itself, from one source: pyproject.toml's [project] table.

The version, license and repository URL are written once, in pyproject.toml. A checkout reads that file beside
the package (the provider plugin runs from a checkout with no trainstack distribution installed, and a
checkout on sys.path must not report the version of some other trainstack installed in the same
environment); an installed trainstack reads its distribution's metadata, which the build wrote from the same
table. The component schema (trainstack/schema.py) and the provider (trainstack/provider.py) take their package
metadata from here, so `pulumi package add` and the Pulumi Registry see the same facts as pip.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

DISTRIBUTION = "trainstack"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

# The Pulumi package's own words (pyproject's description is the whole project's, trainer included).
SCHEMA_DESCRIPTION = ("Pulumi components for GPU training on Kubernetes: EKS and GKE clusters with GPU node "
                      "pools, shared storage, snapshot buckets, Kueue and a multi-node torchrun training job.")
# `kind/component` marks a component package (pulumi-eks and awsx carry it); `category/cloud` is the
# Registry's category for infrastructure packages.
SCHEMA_KEYWORDS = ("pulumi", "kind/component", "category/cloud", "kubernetes", "eks", "gke", "gpu", "training")
PUBLISHER = "trainstack maintainers"


def _from_checkout() -> dict[str, str] | None:
    """version, license and repository from the checkout's pyproject.toml, or None outside a checkout."""
    if not PYPROJECT.is_file():
        return None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the three plain strings this needs, read line by line
        return _read_plain_keys(PYPROJECT.read_text())
    document = tomllib.loads(PYPROJECT.read_text())
    project = document.get("project", {})
    if project.get("name") != DISTRIBUTION:
        return None
    return {"version": project["version"], "license": project["license"],
            "repository": project["urls"]["Repository"]}


def _read_plain_keys(text: str) -> dict[str, str] | None:
    found = {key: re.search(rf'^{name} = "([^"]+)"', text, re.M)
             for key, name in (("name", "name"), ("version", "version"), ("license", "license"),
                               ("repository", "Repository"))}
    if any(match is None for match in found.values()) or found["name"].group(1) != DISTRIBUTION:
        return None
    return {key: match.group(1) for key, match in found.items() if key != "name"}


def _from_distribution() -> dict[str, str]:
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    return {"version": metadata["Version"], "license": metadata["License-Expression"],
            "repository": urls["Repository"]}


def _read() -> dict[str, str]:
    return _from_checkout() or _from_distribution()


_FACTS = _read()
VERSION: str = _FACTS["version"]
LICENSE: str = _FACTS["license"]
REPOSITORY: str = _FACTS["repository"]


def with_package_metadata(schema: dict[str, Any]) -> dict[str, Any]:
    """The inferred schema plus the package metadata the SDK's inference leaves out (pulumi 3.272's
    PackageSpec has name, version, displayName and language only): Pulumi's package schema fields
    description, keywords, homepage, license, repository and publisher."""
    return {**schema, "description": SCHEMA_DESCRIPTION, "keywords": list(SCHEMA_KEYWORDS), "homepage": REPOSITORY,
            "license": LICENSE, "repository": REPOSITORY, "publisher": PUBLISHER}
