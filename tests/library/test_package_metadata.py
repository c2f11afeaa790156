"""trainstack's version, license and repository come from pyproject.toml alone (trainstack/package_metadata.py),
and the component schema carries the package metadata the Pulumi Registry shows."""

import importlib.metadata
import json
from pathlib import Path

import tomllib

from trainstack import package_metadata

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_schema_carries_the_package_metadata_from_pyproject():
    schema = json.loads((REPO / "schema.json").read_text())
    assert schema["version"] == PROJECT["version"]
    assert schema["license"] == PROJECT["license"] == "Apache-2.0"
    assert schema["repository"] == schema["homepage"] == PROJECT["urls"]["Repository"]
    assert "kind/component" in schema["keywords"] and schema["description"].strip() and schema["publisher"]
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License\n")


def test_a_checkout_reads_its_own_pyproject_not_an_installed_distribution(tmp_path, monkeypatch):
    # The provider plugin runs from a checkout with no trainstack distribution installed; and a checkout on
    # sys.path must not report the version of another trainstack installed beside it.
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((REPO / "pyproject.toml").read_text().replace(
        f'version = "{PROJECT["version"]}"', 'version = "9.8.7"', 1))
    monkeypatch.setattr(package_metadata, "PYPROJECT", pyproject)
    assert package_metadata._read()["version"] == "9.8.7"
    # Without tomllib (Python 3.10) the same three strings are read line by line.
    assert package_metadata._read_plain_keys(pyproject.read_text()) == {
        "version": "9.8.7", "license": "Apache-2.0", "repository": PROJECT["urls"]["Repository"]}


def test_an_installed_trainstack_reads_its_distributions_metadata(tmp_path, monkeypatch):
    monkeypatch.setattr(package_metadata, "PYPROJECT", tmp_path / "absent" / "pyproject.toml")
    facts = package_metadata._read()
    assert facts == {"version": importlib.metadata.version("trainstack"), "license": "Apache-2.0",
                     "repository": PROJECT["urls"]["Repository"]}
