"""A part's bad input reaches a program in another language as one property error, not as a Python traceback.

Through ProviderServicer.Construct, as the engine calls the provider (pulumi 3.272, pulumi/provider/server.py):
an InputPropertyError becomes an INVALID_ARGUMENT status whose details carry the property path and the reason;
anything else is raised again with the component's traceback appended ("File ...", line by line).
"""

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ProviderServicer
from pulumi.runtime import config as runtime_config
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import errors_pb2, provider_pb2, status_pb2

from tests.library.test_cluster_parts import CASES
from trainstack.components import HOSTED
from trainstack.components.tokens import TOKENS, index_token, token
from trainstack.provider import NAME, TrainstackProvider, as_property_error


class Aborted(Exception):
    """What grpc.aio's context.abort_with_status raises (AbortError), for the fake."""


class FakeContext:
    """The servicer's grpc.aio context, reduced to what Construct's error path uses."""

    def __init__(self) -> None:
        self.status: grpc.Status | None = None

    async def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise Aborted


def construct_over_grpc(provider, component: str, inputs: dict, dependencies: dict[str, list[str]] | None = None,
                        type_token: str | None = None):
    """ProviderServicer.Construct for `component` (by its module token unless `type_token` is given); (the status
    it aborted with or None, what it raised)."""
    request = provider_pb2.ConstructRequest(type=type_token or token(component), name="part",
                                            project="trainstack", stack="parts",
                                            inputs=json_format.ParseDict(inputs, struct_pb2.Struct()))
    for key, urns in (dependencies or {}).items():  # an input wired from another resource's output
        request.inputDependencies[key].urns.extend(urns)
    context = FakeContext()
    try:
        asyncio.run(ProviderServicer(provider, [], "").Construct(request, context))
    except Exception as error:  # noqa: BLE001 - the test inspects it
        raised = error
    else:
        raise AssertionError(f"{component} constructed from bad inputs")
    finally:
        settings.reset_options()
        runtime_config.set_all_config({}, [])
    return context.status, raised


def property_errors(status: grpc.Status) -> list[tuple[str, str]]:
    (details,) = [value for key, value in status.trailing_metadata if key == "grpc-status-details-bin"]
    parsed = status_pb2.Status.FromString(details)
    errors = []
    for detail in parsed.details:
        found = errors_pb2.InputPropertiesError()
        detail.Unpack(found)
        errors += [(error.property_path, error.reason) for error in found.errors]
    return errors


POOL = CASES["GkeGpuNodePool"][1]
PLATFORM = {"kubeconfig": "apiVersion: v1\n", "gpu": {"gpusPerNode": 1}, "bucket": {"uri": "s3://b"}, "imageRef": "r:1"}
PET = "urn:pulumi:parts::trainstack::random:index/randomPet:RandomPet::n"


def wired(value):
    """`value` as another resource's output nested in an object, as the engine sends it (pulumi/runtime/rpc.py)."""
    return {rpc._special_sig_key: rpc._special_output_value_sig, "value": value,  # noqa: SLF001
            "dependencies": [PET]}


@pytest.mark.parametrize(("component", "inputs", "dependencies", "path", "reason"), [
    ("GkeGpuNodePool", {**POOL, "pool": {"capacity": "CHEAP"}}, None, "pool.capacity", "expected one of"),
    ("GkeGpuNodePool", {**POOL, "gpuNetworkNames": ["a"], "gpuSubnetworkNames": ["b"]}, None,
     "gpuNetworkNames", "a2-highgpu-1g has no GPUDirect NICs"),
    ("EfsStorage", {**CASES["EfsStorage"][1], "tags": {"aws:owner": "me"}}, None, "tags.aws:owner", "reserved"),
    # poolName wired from another resource's output: an Output where the schema says plain.
    ("GkeGpuNodePool", POOL, {"poolName": ["urn:pulumi:parts::trainstack::random:index/randomPet:RandomPet::n"]},
     "poolName", "takes a plain value"),
    # A plain integer wired from an output (YAML's gpusPerNode: ${pool.gpusPerNode}): the SDK called int() on it.
    ("TrainingPlatform", {**PLATFORM, "gpu": {"gpusPerNode": wired(2)}}, None, "gpu.gpusPerNode",
     "takes a plain value"),
    ("GkeGpuNodePool", {**POOL, "pool": {**POOL["pool"], "max": wired(2)}}, None, "pool.max", "takes a plain value"),
    # A value not known yet, sent bare (no output wrapper): the server decodes it as the SDK's raw Unknown.
    ("TrainingPlatform", {**PLATFORM, "gpu": {"gpusPerNode": rpc.UNKNOWN}}, None, "gpu.gpusPerNode",
     "takes a plain value"),
    # Properties the schema does not have were dropped: the default was built instead of what was meant.
    ("TrainingPlatform", {**PLATFORM, "gpu": {"gpusPerNode": 1, "gpuCount": 2}}, None, "gpu.gpuCount",
     "unknown property"),
    ("GkeGpuNodePool", {**POOL, "pool": {**POOL["pool"], "maxNodes": 2}}, None, "pool.maxNodes",
     "unknown property. Fix: rename it to max"),
    ("S3SnapshotBucket", {"region": "eu-west-1", "zone": "eu-west-1a"}, None, "zone", "unknown property"),
])
def test_a_bad_input_is_one_property_error_without_a_traceback(component, inputs, dependencies, path, reason):
    status, raised = construct_over_grpc(TrainstackProvider(HOSTED, NAME), component, inputs, dependencies)
    assert status is not None, f"no property error; raised instead: {raised}"
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    ((got_path, got_reason),) = property_errors(status)
    assert got_path == path and reason in got_reason, (got_path, got_reason)
    assert "\n" not in got_reason and "File " not in got_reason and "Traceback" not in got_reason
    assert "Fix:" in got_reason  # the reason still says how to fix it


def test_the_sdk_provider_alone_sends_the_traceback():
    # Why TrainstackProvider exists: the same input through the SDK's ComponentProvider.
    status, raised = construct_over_grpc(ComponentProvider(HOSTED, NAME), "GkeGpuNodePool",
                                         {**POOL, "pool": {"capacity": "CHEAP"}},
                                         type_token=index_token("GkeGpuNodePool"))
    assert status is None and "File " in str(raised)


def test_an_infra_components_refusal_is_one_line_too():
    # InvalidArgsError (trainstack/infra/core/validation.py): Python names, no property path, but one line.
    status, raised = construct_over_grpc(TrainstackProvider(HOSTED, NAME), "Kueue",
                                         {"kubeconfig": "apiVersion: v1\n", "queueingStrategy": "LIFO"})
    assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT, raised
    assert status.details.startswith("queueing_strategy must be one of") and "\n" not in status.details


def test_a_message_without_a_property_path_stays_whole():
    error = as_property_error("GkeClusterArgs has no field(s) ['x'] (it has: ['project'])")
    assert str(error) == "GkeClusterArgs has no field(s) ['x'] (it has: ['project'])"


SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schema.json").read_text())


@pytest.mark.parametrize("type_token", [t for c in sorted(TOKENS) for t in (TOKENS[c], index_token(c))])
def test_each_component_is_served_under_its_module_token_and_its_index_token(type_token):
    # A program of the schema with modules asks for trainstack:aws:EksCluster; one written before it (a YAML
    # program, an SDK generated then) for trainstack:index:EksCluster. The SDK's ComponentProvider takes neither
    # module token (component.py validate_resource_type: "invalid modle 'aws'") nor the renamed stacks. Both reach
    # the component's own input checks: an unknown property is refused with that component's properties.
    status, raised = construct_over_grpc(TrainstackProvider(HOSTED, NAME), "", {"zzzz": 1}, type_token=type_token)
    assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT, raised
    ((path, reason),) = property_errors(status)
    listed = reason.removeprefix("unknown property. Fix: remove it (the properties here: ").removesuffix(")")
    assert path == "zzzz" and listed.split(", ") == sorted(SCHEMA["resources"][type_token]["inputProperties"])
