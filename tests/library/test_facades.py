"""The hosted components through the provider's Construct, in-process under mocks.

Construct is what a program in any language reaches through `pulumi package add`: the engine hands the
provider camelCase inputs, the SDK maps them to a dict of Python names (pulumi/pulumi#18526) and calls
the component. These tests call the hosted provider's construct (TrainstackProvider, a ComponentProvider),
so what is checked is that path: the component receives its Args class (nested Args included), and the GcpStack/AwsStack façades build
exactly the graph this repository's `__main__.py` builds from the same settings in a stack file.
"""

import dataclasses
import json
import os
from typing import Any

import pulumi
import pytest
from pulumi.provider.experimental.util import camel_case

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.golden import snapshot
from tests.library.wire import over_the_wire
from tests.pulumi_harness import ProgramResult, run_program
from tests.stack_runs import REPO
from trainstack.components import (
    HOSTED,
    AwsStackArgs,
    EksGpuNodes,
    GcpStackArgs,
    GkeGpuPool,
    Job,
    SecretEnv,
    Toleration,
    TrainingPlatformArgs,
)
from trainstack.components import platform as platform_module
from trainstack.components.tokens import TOKENS
from trainstack.infra.aws import config as aws_config
from trainstack.infra.config import job as job_config
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp import config as gcp_config
from trainstack.provider import NAME, TrainstackProvider

PROVIDER_KEYS = {"gcp:project": "project", "gcp:region": "region", "aws:region": "region", "aws:profile": "profile"}


def construct_inputs(cli_config: dict[str, str]) -> dict[str, Any]:
    """Stack config (as the CLI passes it) as a consumer's inputs to the hosted stack: trainstack:<key> -> <key>."""
    inputs = {}
    for key, text in cli_config.items():
        if key == "trainstack:cloud":
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        inputs[PROVIDER_KEYS.get(key, key.removeprefix("trainstack:"))] = value
    return inputs


def construct(token: str, inputs: dict[str, Any], *, stack: str, outputs, calls) -> tuple[ProgramResult, list]:
    """Construct `token` from `inputs` under mocks; the component's outputs are the program's exports."""
    constructed: list = []

    def program() -> None:
        provider = TrainstackProvider(HOSTED, NAME)
        # As a program in another language reaches it: the inputs cross the wire (numbers as doubles) first.
        constructed.append(provider.construct("trainstack", token, over_the_wire(inputs), None))
        for key, value in constructed[-1].state.items():
            pulumi.export(key, value)

    cwd = os.getcwd()
    os.chdir(REPO)  # as `pulumi up` runs: the chart's path is relative to the project
    try:
        result = run_program(program, config={}, stack=stack, project="trainstack", outputs=outputs, calls=calls)
    finally:
        os.chdir(cwd)
    return result, constructed


def without_facade(result: ProgramResult, stack: str) -> list[dict[str, Any]]:
    """The graph with the (top-level) façade's own entry taken out and its children hung back on the stack.

    By registration, not by short name: a façade and the infra component it wraps may share type and name.
    """
    facades = [r.urn for r in result.registrations if r.type in TOKENS.values()
               and r.parent.startswith("urn:pulumi:") and "::pulumi:pulumi:Stack::" in r.parent]
    assert len(facades) == 1, facades
    kept = []
    for registration, entry in zip(result.registrations, snapshot(result), strict=True):
        if registration.urn == facades[0]:
            continue
        if registration.parent == facades[0]:
            entry = {**entry, "parent": f"pulumi:pulumi:Stack::trainstack-{stack}"}
        kept.append(entry)
    return kept


def without_root_alias(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Golden entries without the program's alias of its infra stack to the root (tests/library/test_main_through_components.py)."""
    kept = []
    for entry in entries:
        aliases = [alias for alias in entry.get("aliases", []) if alias != "parent=root"]
        entry = {key: value for key, value in entry.items() if key != "aliases"}
        kept.append({**entry, **({"aliases": aliases} if aliases else {})})
    return kept


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_hosted_stack_builds_the_same_graph_as_the_program(cloud):
    runs = {"gcp": gcp_runs, "aws": aws_runs}[cloud]
    config = runs.config_with()  # the stack file, plus what its tests set as a user would (gcp:project, ...)
    program = snapshot(runs.run_main(config))

    token = f"trainstack:index:{cloud.capitalize()}Stack"
    hosted, constructed = construct(token, construct_inputs(config), stack=cloud,
                                    outputs=runs.provider_outputs, calls=runs.provider_calls)
    # Same resources, names, inputs, parents, providers, dependencies and options: the program builds the
    # same façade (only its infra stack keeps the alias to the root it sat at before).
    assert sorted(map(json.dumps, snapshot(hosted))) == sorted(map(json.dumps, without_root_alias(program)))
    assert constructed[0].urn  # Construct returned the component's URN and state
    assert {"clusterName", "kubeconfig", "imageRef", "bucketName", "stackOutputs"} <= set(constructed[0].state)
    # The kubeconfig is its own (secret) output; in stackOutputs it would make every other output secret too.
    assert "kubeconfig" in hosted.secret_exports and "stackOutputs" not in hosted.secret_exports
    assert "kubeconfig" not in hosted.exports["stackOutputs"] and "clusterName" in hosted.exports["stackOutputs"]


def test_hosted_aws_stack_builds_the_efa_stacks_graph_too():
    from tests.aws.p5_runs import STACK, p5_config

    config = p5_config()
    program = snapshot(aws_runs.run_main(config, stack=STACK))
    hosted, _ = construct("trainstack:index:AwsStack", construct_inputs(config), stack=STACK,
                          outputs=aws_runs.provider_outputs, calls=aws_runs.provider_calls)
    assert sorted(map(json.dumps, snapshot(hosted))) == sorted(map(json.dumps, without_root_alias(program)))
    assert any(entry["resource"].endswith("PlacementGroup::trainstack-eks-gpu-efa") for entry in program)


def test_construct_hands_the_component_its_args_class_not_a_dict(monkeypatch):
    handed: list = []
    made: list = []

    def recording(args_type, value, *args, **kwargs):
        handed.append(value)
        made.append(from_inputs(args_type, value, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(platform_module, "from_inputs", recording)
    inputs = {
        "kubeconfig": "apiVersion: v1\nkind: Config\n",
        "clusterName": "research",
        "gpu": {"gpusPerNode": 4, "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "bucket": {"uri": "s3://research-data"},
        "imageRef": "registry.example.com/trainstack@sha256:" + "ab" * 32,
        "sharedStorage": {"storageClassName": "efs", "size": "1Ti"},
        "job": {"enabled": True, "podsMax": 2, "gpusPerPod": 4, "queue": True,
                "secretEnv": [{"name": "WANDB_API_KEY", "secretName": "wandb", "key": "api-key"}]},
    }
    result, _ = construct("trainstack:index:TrainingPlatform", inputs, stack="byo",
                          outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})

    assert isinstance(handed[0], dict)  # what the SDK's Construct passes (pulumi/pulumi#18526) ...
    args = made[0]  # ... and what the component's body works with
    assert isinstance(args, TrainingPlatformArgs) and isinstance(args.job, Job)
    assert isinstance(args.job.secret_env[0], SecretEnv) and args.job.secret_env[0].secret_name == "wandb"
    assert isinstance(args.gpu.tolerations[0], Toleration) and args.gpu.tolerations[0].operator == "Exists"
    provider = result.one("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"] == "research"
    releases = result.by_type("kubernetes:helm.sh/v3:Release")
    assert sorted(r.name for r in releases) == ["train", "trainstack-kueue", "trainstack-nvidia-device-plugin"]
    assert all(r.provider == provider.urn for r in releases)  # the given cluster, never an ambient kubeconfig
    release = result.one("kubernetes:helm.sh/v3:Release", "train")
    values = release.inputs["values"]
    assert values["kueue"]["queueName"] == "training"
    assert values["secretEnv"] == [{"name": "WANDB_API_KEY", "secretName": "wandb", "key": "api-key"}]
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_bad_input_stops_before_anything_is_registered():
    inputs = {"kubeconfig": "k", "gpu": {"gpusPerNode": 1}, "bucket": {"uri": "gs://b"}, "imageRef": "r:1",
              "job": {"gpusPerPod": 2}}
    with pytest.raises(Exception, match="job.gpusPerPod") as caught:
        construct("trainstack:index:TrainingPlatform", inputs, stack="byo",
                  outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})
    assert "2 GPUs per pod" in str(caught.value)


def test_python_callers_pass_the_args_class():
    # Shaped and checked as a dict would be (an Output in a plain field is refused), then equal to what was passed.
    args = GcpStackArgs(project="p", job=Job(enabled=False))
    assert from_inputs(GcpStackArgs, args) == args


def schema_names(args_type) -> set[str]:
    return {camel_case(f.name) for f in dataclasses.fields(args_type)}


def test_hosted_stacks_take_exactly_the_stack_files_keys():
    # A key the stack file gains (or loses) must show up here, not silently be missing from the package.
    assert schema_names(GcpStackArgs) == set(gcp_config.TOP_LEVEL_KEYS) - {"cloud"} | {"project", "region"}
    # kubeconfigRoleArn: a component's input only (the caller's assume-role), not a stack file's key.
    assert schema_names(AwsStackArgs) == set(aws_config.TOP_LEVEL_KEYS) - {"cloud"} | {"region", "profile",
                                                                                        "kubeconfigRoleArn"}
    assert schema_names(GkeGpuPool) == set(gcp_config.GPU_POOL_KEYS)
    assert schema_names(EksGpuNodes) == set(aws_config.GPU_NODE_KEYS)
    assert schema_names(Job) == set(job_config.JOB_KEYS) | set(job_config.RENAMED_KEYS)  # the old ones deprecated


def test_the_job_input_takes_the_keys_from_before_the_pod_rename_with_one_warning_each(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    base = {"kubeconfig": "apiVersion: v1\nkind: Config\n", "gpu": {"gpusPerNode": 4}, "bucket": {"uri": "s3://b"},
            "imageRef": "registry.example.com/trainstack@sha256:" + "ab" * 32,
            "sharedStorage": {"storageClassName": "efs", "size": "1Ti"}}
    job = {"enabled": True, "podsMin": 1, "podsMax": 2, "gpusPerPod": 4, "procsPerPod": 4}
    old_names = {new: old for old, new in job_config.RENAMED_KEYS.items()}
    runs = {}
    for label, given in (("new", job), ("old", {old_names.get(key, key): value for key, value in job.items()})):
        warnings.clear()
        runs[label], _ = construct(TOKENS["TrainingPlatform"], {**base, "job": given}, stack="byo",
                                   outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})
        runs[f"{label} warnings"] = [w for w in warnings if "deprecated" in w]
    assert [(r.urn, r.inputs) for r in runs["old"].registrations] == \
        [(r.urn, r.inputs) for r in runs["new"].registrations]
    assert runs["new warnings"] == [] and len(runs["old warnings"]) == len(job_config.RENAMED_KEYS)
