"""schema.json is what the provider infers from trainstack/components today, and every property says what it is.

The inference is the SDK's own, offline (no Pulumi CLI): a change to an Args class without `make schema`
fails here, and the committed diff of schema.json is what review sees of the change.
"""

import json
from pathlib import Path

import yaml
from pulumi.provider.experimental.component import ComponentProvider

from trainstack import schema
from trainstack.components import HOSTED, JobArgs
from trainstack.provider import NAME, VERSION

REPO = Path(__file__).resolve().parents[2]


def committed() -> dict:
    return json.loads(schema.SCHEMA_FILE.read_text())


def test_committed_schema_is_the_inferred_one():
    assert schema.SCHEMA_FILE == REPO / "schema.json"
    assert committed() == schema.inferred_schema(), "schema.json is stale: run `make schema` and commit the diff"


def test_the_provider_serves_the_committed_schema():
    served = ComponentProvider(HOSTED, NAME, version=VERSION).schema
    assert json.loads(served) == committed()


def test_a_changed_args_field_changes_the_schema(monkeypatch):
    before = schema.rendered()
    monkeypatch.setitem(JobArgs.__annotations__, "priority_class", str)
    after = schema.rendered()
    assert after != before and "priorityClass" in json.loads(after)["types"]["trainstack:index:JobArgs"]["properties"]


def test_check_mode_fails_on_a_stale_file(tmp_path, monkeypatch):
    stale = tmp_path / "schema.json"
    stale.write_text(schema.rendered().replace('"kubeconfig"', '"kubeConfig"'))
    monkeypatch.setattr(schema, "SCHEMA_FILE", stale)
    assert schema.main(["--check"]) == 1
    stale.write_text(schema.rendered())
    assert schema.main(["--check"]) == 0


def properties(document: dict):
    for token, resource in document["resources"].items():
        for kind in ("inputProperties", "properties"):
            for name, prop in resource.get(kind, {}).items():
                yield f"{token}.{kind}.{name}", prop
    for token, type_ in document["types"].items():
        for name, prop in type_.get("properties", {}).items():
            yield f"{token}.{name}", prop


def test_every_component_type_and_property_has_a_description():
    document = committed()
    assert set(document["resources"]) == {f"trainstack:index:{c.__name__}" for c in HOSTED}
    missing = [path for path, prop in properties(document) if not prop.get("description", "").strip()]
    missing += [token for token, item in {**document["resources"], **document["types"]}.items()
                if not item.get("description", "").strip()]
    assert not missing, f"add a docstring under each of: {missing}"


def test_the_package_folder_is_what_the_python_host_runs():
    # pulumi-language-python's RunPlugin runs `python <plugin folder>` when the folder has a __main__.py; the
    # repository root's __main__.py is the Pulumi program, so the package lives in provider/.
    folder = REPO / "provider"
    manifest = yaml.safe_load((folder / "PulumiPlugin.yaml").read_text())
    assert manifest == {"runtime": "python"}
    assert "from trainstack.provider import main" in (folder / "__main__.py").read_text()
    assert "component_provider_host(HOSTED, name=NAME" in (REPO / "trainstack" / "provider.py").read_text()
    assert (folder / "requirements.txt").read_text().splitlines()[-1] == "-r ../requirements.txt"
    assert not (REPO / "PulumiPlugin.yaml").exists()
