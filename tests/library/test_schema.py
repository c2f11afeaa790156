"""schema.json is what the provider infers from trainstack/components today, and every property says what it is.

The inference is the SDK's own, offline (no Pulumi CLI): a change to an Args class without `make schema`
fails here, and the committed diff of schema.json is what review sees of the change.
"""

import json
from pathlib import Path

import pytest
import tomllib
import yaml

from trainstack import schema
from trainstack.components import (
    HOSTED,
    EfsStorageArgs,
    EksClusterArgs,
    FilestoreShareArgs,
    GcsSnapshotBucketArgs,
    GkeClusterArgs,
    GkeGpuNodePoolArgs,
    Job,
    S3SnapshotBucketArgs,
)
from trainstack.components.tokens import TOKENS, index_token
from trainstack.components.tokens import token as token_of
from trainstack.provider import NAME, VERSION, TrainstackProvider

REPO = Path(__file__).resolve().parents[2]


def committed() -> dict:
    return json.loads(schema.SCHEMA_FILE.read_text())


def test_committed_schema_is_the_inferred_one():
    assert schema.SCHEMA_FILE == REPO / "schema.json"
    assert committed() == schema.inferred_schema(), "schema.json is stale: run `make schema` and commit the diff"


def test_the_provider_serves_the_committed_schema():
    # TrainstackProvider is what provider.main serves (test_provider_process.py): the SDK's schema, polished,
    # with the package metadata.
    served = TrainstackProvider(HOSTED, NAME, version=VERSION).schema
    assert json.loads(served) == committed()


def test_a_changed_args_field_changes_the_schema(monkeypatch):
    before = schema.rendered()
    monkeypatch.setitem(Job.__annotations__, "priority_class", str)
    after = schema.rendered()
    assert after != before and "priorityClass" in json.loads(after)["types"]["trainstack:index:Job"]["properties"]


@pytest.mark.parametrize("args_type", [GkeClusterArgs, GkeGpuNodePoolArgs, FilestoreShareArgs, GcsSnapshotBucketArgs,
                                       EksClusterArgs, EfsStorageArgs, S3SnapshotBucketArgs])
def test_a_changed_part_args_field_fails_the_check(args_type, monkeypatch):
    part = token_of(args_type.__name__.removesuffix("Args"))
    assert "nodeCount" not in committed()["resources"][part]["inputProperties"]
    monkeypatch.setitem(args_type.__annotations__, "node_count", int)
    assert "nodeCount" in json.loads(schema.rendered())["resources"][part]["inputProperties"]
    assert schema.main(["--check"]) == 1


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
    assert set(document["resources"]) == {t for c in HOSTED for t in (token_of(c.__name__), index_token(c.__name__))}
    missing = [path for path, prop in properties(document) if not prop.get("description", "").strip()]
    missing += [token for token, item in {**document["resources"], **document["types"]}.items()
                if not item.get("description", "").strip()]
    assert not missing, f"add a docstring under each of: {missing}"


def test_the_package_folder_is_what_the_python_host_runs(monkeypatch):
    # pulumi-language-python's RunPlugin runs `python <plugin folder>` when the folder has a __main__.py; the
    # repository root's __main__.py is the Pulumi program, so the package lives in provider/.
    folder = REPO / "provider"
    manifest = yaml.safe_load((folder / "PulumiPlugin.yaml").read_text())
    assert manifest == {"runtime": {"name": "python", "options": {"toolchain": "pip", "virtualenv": "venv"}}}
    assert "from trainstack.provider import main" in (folder / "__main__.py").read_text()
    # It serves the hosted components through TrainstackProvider (bad inputs as property errors), not the SDK's own.
    import pulumi.provider

    from trainstack import provider

    served = []
    monkeypatch.setattr(pulumi.provider, "main", lambda hosted, args: served.append((hosted, args)))
    monkeypatch.setattr("sys.argv", ["provider", "127.0.0.1:1"])
    provider.main()
    ((hosted, args),) = served
    assert type(hosted) is provider.TrainstackProvider and args == ["127.0.0.1:1"]
    assert json.loads(hosted.schema) == committed()
    assert (folder / "requirements.txt").read_text().splitlines()[-1] == "-r ../requirements.txt"
    assert not (REPO / "PulumiPlugin.yaml").exists()


def test_the_package_version_is_the_distributions():
    # `pulumi package add <repo>/provider@v<version>` fetches the git tag v<version> (pulumi
    # sdk/go/common/workspace/plugins.go, gitSource): the schema's version, the provider's and the
    # distribution's must be one number, the tag's.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert VERSION == project["version"] == committed()["version"]


def test_no_schema_type_name_ends_in_args():
    # The TypeScript and Go generators append Args to input types (pulumi pkg/codegen/nodejs/gen.go):
    # GpuNodesArgs would reach a TypeScript program as inputs.GpuNodesArgsArgs.
    assert [token for token in committed()["types"] if token.endswith("Args")] == []


def test_cluster_name_takes_an_output_wherever_a_kubeconfig_does():
    # It only feeds the Kubernetes provider's cluster_identifier (an Input): another stack's clusterName fits.
    for token, resource in committed()["resources"].items():
        inputs = resource["inputProperties"]
        if "kubeconfig" in inputs:
            assert not inputs["clusterName"].get("plain"), token


def test_the_parts_call_each_quantity_what_the_platform_calls_it():
    # One word per quantity: what a pool or cluster part reports for TrainingPlatform's gpu is named as gpu names
    # it (gpusPerNode is a machine's GPU count, accelerator its GPU type; EksCluster prefixes gpu, having two
    # groups), or as the part's own input (a pool's max); the nodes' service account has one name in every part.
    resources = committed()["resources"]
    gpu = set(committed()["types"]["trainstack:index:GpuNodes"]["properties"])
    pool = set(resources[token_of("GkeGpuNodePool")]["properties"]) - {"poolName"}
    assert pool - gpu == {"max"} and "max" in committed()["types"]["trainstack:index:GkeGpuPool"]["properties"]
    eks = {name.removeprefix("gpu")[0].lower() + name.removeprefix("gpu")[1:] if name.startswith("gpu") and
           name != "gpusPerNode" else name for name in resources[token_of("EksCluster")]["properties"]}
    assert eks & gpu == gpu - {"podResources"}
    accounts = {name for resource in resources.values() for name in resource["inputProperties"]
                if name.endswith("ServiceAccountEmail") or name == "serviceAccountEmail"}
    assert accounts == {"nodeServiceAccountEmail"}


def test_kubeconfigs_are_secret_and_old_names_carry_a_deprecation_message():
    schema = committed()
    for token, resource in schema["resources"].items():
        for kind in ("inputProperties", "properties"):
            prop = resource.get(kind, {}).get("kubeconfig")
            if prop is not None:
                assert prop.get("secret") is True, (token, kind)
    job = schema["types"]["trainstack:index:Job"]["properties"]
    assert job["gpusPerNode"]["deprecationMessage"].startswith("The old name of gpusPerPod")
    assert "deprecationMessage" not in job["gpusPerPod"]
    # GpuNodes.gpusPerNode is per node, and not deprecated: one word per quantity (pods vs nodes).
    assert "deprecationMessage" not in schema["types"]["trainstack:index:GpuNodes"]["properties"]["gpusPerNode"]


METASCHEMA = Path(__file__).parent / "fixtures" / "pulumi-metaschema.json"


def test_the_schema_is_valid_under_pulumis_metaschema():
    # pkg/codegen/schema/pulumi.json of pulumi/pulumi at 1b5949891b3c (2026-08-21), its Go-style named groups
    # `(?<name>` written as Python's `(?P<name>`. Catches, for one, an alias that is not {"type": <token>}.
    import jsonschema

    metaschema = json.loads(METASCHEMA.read_text().replace("(?<", "(?P<"))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(metaschema).iter_errors(committed())]
    assert errors == []


def test_every_component_is_in_its_module_with_an_alias_from_its_index_token():
    resources = committed()["resources"]
    assert {t.split(":")[1] for t in TOKENS.values()} == {"aws", "gcp", "kubernetes"}
    assert [c.__name__ for c in HOSTED if c.__name__ not in TOKENS] == []
    for component, new_token in TOKENS.items():
        moved, old = resources[new_token], resources[index_token(component)]
        assert moved["aliases"] == [{"type": index_token(component)}], component
        assert "deprecationMessage" not in moved
        # The old token stays, deprecated, for programs written against it (YAML resolves only schema tokens).
        assert old["deprecationMessage"].startswith(f"{index_token(component)} is now {new_token}:")
        assert "aliases" not in old
        # The same component under both: the same inputs and outputs.
        assert {key: value for key, value in old.items() if key != "deprecationMessage"} == \
            {key: value for key, value in moved.items() if key != "aliases"}
    # Types stay in index: the schema has no alias for a type, so moving one would rename its class in every SDK.
    assert {t.split(":")[1] for t in committed()["types"]} == {"index"}
