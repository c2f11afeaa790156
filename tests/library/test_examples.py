"""The examples/ consumers: the Python one runs under mocks, the YAML one is checked against schema.json."""

import json
import os
import re
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml

from tests.aws import stack_runs as aws_runs
from tests.library.wire import over_the_wire, resolved
from tests.pulumi_harness import run_program
from trainstack.components.tokens import TOKENS, index_token, token

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEMA = json.loads((REPO / "schema.json").read_text())


def test_each_example_has_its_project_file_and_readme():
    for example in ("python-existing-vpc", "yaml-gke", "yaml-gke-parts", "yaml-eks-parts"):
        assert (EXAMPLES / example / "Pulumi.yaml").is_file() and (EXAMPLES / example / "README.md").is_file()


def test_python_example_builds_the_stack_in_the_existing_vpc_under_mocks():
    example = EXAMPLES / "python-existing-vpc"
    project = yaml.safe_load((example / "Pulumi.yaml").read_text())["name"]
    config = {f"{project}:vpcId": "vpc-0abc", f"{project}:privateSubnetIds": json.dumps(["subnet-a", "subnet-b"]),
              f"{project}:apiAccessCidr": "203.0.113.7/32"}
    cwd = os.getcwd()
    os.chdir(example)  # where `pulumi up` runs it
    try:
        result = run_program(lambda: runpy.run_path(str(example / "__main__.py"), run_name="__main__"),
                             config=config, stack="dev", project=project, outputs=aws_runs.provider_outputs,
                             calls=aws_runs.provider_calls)
    finally:
        os.chdir(cwd)

    types = {r.type for r in result.registrations}
    assert not types & {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway"}
    facade = result.one(token("AwsStack"), "training")
    assert result.one("trainstack:aws:AwsStack", "training").parent == facade.urn  # the infra stack in it
    # The infra stack's platform (trainstack/infra/kubernetes/platform.py keeps its own token).
    assert "trainstack:index:TrainingPlatform" in types and aws_runs.EKS_CLUSTER in types
    assert {args["id"] for token, args in result.invokes if token == aws_runs.GET_SUBNET} == {"subnet-a", "subnet-b"}
    requirements = [line for line in (example / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    # This checkout, editable (the image builds from it), with the components' [infra] extra, no [train].
    assert requirements == ["-e ../..[infra]"]
    assert (example / requirements[0].removeprefix("-e ").removesuffix("[infra]") / "images" / "Dockerfile").is_file()


def schema_errors(value: Any, spec: dict, path: str) -> list[str]:
    """`value` (a YAML property) against a schema property or type; ${...} interpolations are taken on trust."""
    if isinstance(value, str) and re.fullmatch(r"\$\{[^}]+\}", value):
        return []
    if "$ref" in spec:
        ref = spec["$ref"]
        if ref == "pulumi.json#/Any":
            return []
        type_ = SCHEMA["types"][ref.removeprefix("#/types/")]
        return object_errors(value, type_.get("properties", {}), type_.get("required", []), path)
    kind = spec.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [e for i, item in enumerate(value) for e in schema_errors(item, spec["items"], f"{path}[{i}]")]
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        return [e for k, item in value.items() for e in schema_errors(item, spec["additionalProperties"], f"{path}.{k}")]
    expected = {"string": str, "integer": int, "number": (int, float), "boolean": bool}[kind]
    if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool)):
        return [f"{path}: expected {kind}, got {value!r}"]
    return []


def object_errors(value: Any, properties: dict, required: list[str], path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    errors = [f"{path}.{key}: not a property (known: {sorted(properties)})" for key in value if key not in properties]
    errors += [f"{path}.{key}: required" for key in required if key not in value]
    return errors + [e for key, item in value.items() if key in properties
                     for e in schema_errors(item, properties[key], f"{path}.{key}")]


def yaml_example_errors(program: dict) -> list[str]:
    errors = []
    for name, resource in program["resources"].items():
        if not resource["type"].startswith("trainstack:"):
            continue  # another package's resource (the user's own provider, VPC, subnets): its schema is not here
        component = SCHEMA["resources"].get(resource["type"])
        if component is None:
            errors.append(f"{name}: {resource['type']} is not in the package")
            continue
        errors += object_errors(resource.get("properties", {}), component["inputProperties"],
                                component.get("requiredInputs", []), name)
    for output, expression in program.get("outputs", {}).items():
        resource, _, attribute = expression.strip("${}").partition(".")
        outputs = SCHEMA["resources"][program["resources"][resource]["type"]]["properties"]
        if attribute not in outputs:
            errors.append(f"outputs.{output}: {resource} has no output {attribute!r}")
    return errors


def test_yaml_example_declares_the_gke_stack_as_the_schema_says():
    program = yaml.safe_load((EXAMPLES / "yaml-gke" / "Pulumi.yaml").read_text())
    assert program["runtime"] == "yaml"
    assert (EXAMPLES / "yaml-gke" / program["packages"]["trainstack"] / "PulumiPlugin.yaml").is_file()
    assert [r["type"] for r in program["resources"].values()] == [token("GcpStack")]
    assert yaml_example_errors(program) == []


def test_a_yaml_program_written_with_an_index_token_still_resolves_and_builds_the_same():
    # pulumi-yaml resolves a type only among the schema's resources (pkg/pulumiyaml/packages.go ResolveResource;
    # a schema alias is not looked up): the old token stays a resource, deprecated, and the provider builds the
    # same component for it, under its new token.
    from tests.gcp import stack_runs as gcp_runs
    from tests.library.test_facades import construct

    program = yaml.safe_load((EXAMPLES / "yaml-gke" / "Pulumi.yaml").read_text())
    program["resources"]["training"]["type"] = index_token("GcpStack")
    assert yaml_example_errors(program) == []
    assert SCHEMA["resources"][index_token("GcpStack")]["deprecationMessage"].startswith(
        f"{index_token('GcpStack')} is now {token('GcpStack')}")
    properties = resolved(program["resources"]["training"]["properties"], {"gcpProject": "ml-research-123"})
    graphs = [construct(type_token, properties, stack="gcp", outputs=gcp_runs.provider_outputs,
                        calls=gcp_runs.provider_calls)[0] for type_token in (index_token("GcpStack"), token("GcpStack"))]
    old, new = ([(r.urn, r.inputs, r.aliases) for r in graph.registrations] for graph in graphs)
    assert old == new
    assert [r.name for r in graphs[0].by_type(token("GcpStack"))] == ["trainstack"]


def test_the_docs_token_table_is_the_components_tokens():
    text = (REPO / "docs" / "library.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `([\w:]+)` \| `([\w:]+)` \|$", text, flags=re.M)
    assert {component: (new, old) for component, new, old in rows} == {
        component: (new, index_token(component)) for component, new in TOKENS.items()}


def test_the_yaml_check_catches_a_wrong_property():
    program = yaml.safe_load((EXAMPLES / "yaml-gke" / "Pulumi.yaml").read_text())
    program["resources"]["training"]["properties"]["gpuPools"]["t4"]["acceleratorCnt"] = 2
    # (project is no longer required: a given gcp provider's is used; a nested required property is)
    program["resources"]["training"]["properties"]["existingNetwork"] = {"network": "n", "subnetwork": "s",
                                                                         "servicesRangeName": "services"}
    program["resources"]["training"]["properties"]["job"]["podsMax"] = "two"
    assert sorted(e.split(":")[0] for e in yaml_example_errors(program)) == [
        "training.existingNetwork.podsRangeName", "training.gpuPools.t4.acceleratorCnt", "training.job.podsMax"]


def test_bring_your_own_cluster_snippet_in_the_docs_matches_the_schema():
    text = (REPO / "docs" / "library.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]
    (program,) = [b for b in blocks if "resources" in b]
    assert [r["type"] for r in program["resources"].values()] == [token("TrainingPlatform")]
    assert yaml_example_errors(program) == []


def test_yaml_example_and_docs_snippet_construct_as_sent_over_the_wire():
    # Numbers cross the wire as doubles (acceleratorCount 2 arrives as 2.0): the components must take them.
    from tests.gcp import stack_runs as gcp_runs
    from tests.library.test_facades import construct

    program = yaml.safe_load((EXAMPLES / "yaml-gke" / "Pulumi.yaml").read_text())
    properties = resolved(program["resources"]["training"]["properties"], {"gcpProject": "ml-research-123"})
    result, constructed = construct(token("GcpStack"), properties, stack="gcp",
                                    outputs=gcp_runs.provider_outputs, calls=gcp_runs.provider_calls)
    assert constructed[0].urn and result.by_type("gcp:container/nodePool:NodePool")

    text = (REPO / "docs" / "library.md").read_text()
    (snippet,) = [b for b in map(yaml.safe_load, re.findall(r"```yaml\n(.*?)```", text, flags=re.S))
                  if "resources" in b]
    properties = resolved(snippet["resources"]["platform"]["properties"], {"kubeconfig": "apiVersion: v1\n"})
    result, _ = construct(token("TrainingPlatform"), properties, stack="byo",
                          outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})
    values = result.one("kubernetes:helm.sh/v3:Release", "train").inputs["values"]
    assert values["train"]["maxSteps"] == 1000 and type(values["train"]["maxSteps"]) is int


PARTS_CONFIG = {"gcpProject": "ml-research-123", "network": "research-vpc", "subnetwork": "research-nodes",
                "nodeServiceAccount": "nodes@ml-research-123.iam.gserviceaccount.com",
                "jobServiceAccount": "training@ml-research-123.iam.gserviceaccount.com",
                "bucketUri": "gs://research-data", "imageRef": "us-docker.pkg.dev/p/r/trainstack:1"}
# What the parts' outputs resolve to, for constructing the ones that take them.
PARTS_OUTPUTS = {"cluster.clusterName": "research", "cluster.location": "us-central1-a",
                 "cluster.nodeZone": "us-central1-a", "cluster.kubeconfig": "apiVersion: v1\nkind: Config\n",
                 "share.volumeName": "default-train-shared"}


def test_yaml_parts_example_composes_the_gke_parts_as_the_schema_says():
    example = EXAMPLES / "yaml-gke-parts"
    program = yaml.safe_load((example / "Pulumi.yaml").read_text())
    assert program["runtime"] == "yaml"
    assert (example / program["packages"]["trainstack"] / "PulumiPlugin.yaml").is_file()
    assert [r["type"] for r in program["resources"].values()] == [
        token("GkeCluster"), token("GkeGpuNodePool"), token("FilestoreShare"), token("TrainingPlatform")]
    assert yaml_example_errors(program) == []
    # Every ${resource.output} it wires is an output that resource has, and every ${name} a config key.
    references = re.findall(r"\$\{([^}]+)\}", (example / "Pulumi.yaml").read_text())
    for reference in references:
        resource, _, attribute = reference.partition(".")
        if attribute:
            assert attribute in SCHEMA["resources"][program["resources"][resource]["type"]]["properties"], reference
        else:
            assert reference in program["config"] or reference in program["resources"], reference


def construct_with_outputs(token: str, properties: dict, outputs: dict) -> tuple:
    """Construct `token` as the engine reaches a provider that accepts outputs (provider/server.py answers
    Configure with acceptOutputs=True, pulumi 3.272): literals cross the wire as a Struct, and each value
    wired from another resource's output arrives as an Output in its place (ProviderServicer._select_value
    returns an input that already contains outputs as it is)."""
    from tests.gcp import stack_runs as gcp_runs
    from trainstack.components import HOSTED
    from trainstack.provider import NAME, TrainstackProvider

    marker = "output-of:"
    constructed: list = []

    def as_outputs(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: as_outputs(item) for key, item in value.items()}
        if isinstance(value, list):
            return [as_outputs(item) for item in value]
        if isinstance(value, str) and value.startswith(marker):
            return pulumi.Output.from_input(outputs[value.removeprefix(marker)])
        return value

    def program() -> None:
        wired = resolved(properties, {**PARTS_CONFIG, **{key: marker + key for key in outputs}})
        inputs = as_outputs(over_the_wire(wired))
        constructed.append(TrainstackProvider(HOSTED, NAME).construct("part", token, inputs, None))
        for key, value in constructed[-1].state.items():
            pulumi.export(key, value)

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_program(program, config={}, stack="parts", project="trainstack",
                             outputs=gcp_runs.provider_outputs, calls=gcp_runs.provider_calls)
    finally:
        os.chdir(cwd)
    return result, constructed


def test_yaml_parts_example_constructs_each_part_with_its_wired_inputs_as_outputs():
    program = yaml.safe_load((EXAMPLES / "yaml-gke-parts" / "Pulumi.yaml").read_text())
    built = {}
    for name, resource in program["resources"].items():
        result, constructed = construct_with_outputs(resource["type"], resource["properties"], PARTS_OUTPUTS)
        assert constructed and constructed[0].urn, name
        built[name] = result
    # The pool's outputs are the values written out for the platform's gpu.
    gpu = program["resources"]["platform"]["properties"]["gpu"]
    assert built["t4"].exports["nodeSelector"] == gpu["nodeSelector"]
    assert built["t4"].exports["tolerations"] == gpu["tolerations"]
    assert built["t4"].exports["gpusPerNode"] == gpu["gpusPerNode"]
    # The share's volume is the one the platform's claim names, reserved for that claim.
    volume = built["share"].one("kubernetes:core/v1:PersistentVolume").inputs
    claim = built["platform"].one("kubernetes:core/v1:PersistentVolumeClaim").inputs
    assert volume["metadata"]["name"] == PARTS_OUTPUTS["share.volumeName"] == claim["spec"]["volumeName"]
    assert volume["spec"]["claimRef"]["name"] == claim["metadata"]["name"]
    assert volume["spec"]["capacity"]["storage"] == claim["spec"]["resources"]["requests"]["storage"]
    assert built["t4"].one("gcp:container/nodePool:NodePool").inputs["cluster"] == "research"


def test_yaml_parts_example_gives_kueue_an_untainted_node_and_the_control_plane_its_ports():
    """What the parts build together, not each on its own: Kueue (the platform's) needs a node without the GPU
    taint that is up before it installs, and the private control plane must reach its webhook and visibility
    API (the ports control_plane_firewall lists for every chart the platform installs) on that node."""
    from trainstack.infra.gcp.control_plane_firewall import control_plane_ports

    program = yaml.safe_load((EXAMPLES / "yaml-gke-parts" / "Pulumi.yaml").read_text())
    built = {name: construct_with_outputs(resource["type"], resource["properties"], PARTS_OUTPUTS)[0]
             for name, resource in program["resources"].items()}
    platform = program["resources"]["platform"]
    # The platform waits for what it names in dependsOn and for each resource whose outputs it takes.
    waits_for = {reference.strip("${}") for reference in platform.get("options", {}).get("dependsOn", [])}
    waits_for |= set(re.findall(r"\$\{(\w+)\.", yaml.safe_dump(platform["properties"])))

    untainted = [(name, pool) for name, result in built.items() if name in waits_for
                 for pool in result.by_type("gcp:container/nodePool:NodePool")
                 if not pool.inputs["nodeConfig"].get("taints") and pool.inputs.get("initialNodeCount", 0) >= 1]
    assert untainted, "no node pool without a taint, up from the start, that the platform waits for"
    system_accounts = {pool.inputs["nodeConfig"]["serviceAccount"] for _, pool in untainted}

    charts = [release.inputs["chart"] for release in built["platform"].by_type("kubernetes:helm.sh/v3:Release")]
    needed = set(control_plane_ports(charts))
    assert {9443, 8082} <= needed  # Kueue's webhook and visibility APIService (kubernetes-sigs/kueue v0.19.2)
    master_cidr = built["cluster"].one("gcp:container/cluster:Cluster").inputs["privateClusterConfig"][
        "masterIpv4CidrBlock"]
    opened = {int(port) for name, result in built.items() if name in waits_for
              for rule in result.by_type("gcp:compute/firewall:Firewall")
              if rule.inputs["direction"] == "INGRESS" and master_cidr in rule.inputs["sourceRanges"]
              and rule.inputs["network"] == PARTS_CONFIG["network"]
              and system_accounts <= set(rule.inputs.get("targetServiceAccounts", []))
              for allow in rule.inputs["allows"] if allow["protocol"] == "tcp" for port in allow["ports"]}
    assert needed <= opened, f"the control plane cannot reach ports {sorted(needed - opened)} on the system nodes"
