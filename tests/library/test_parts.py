"""The platform's parts hosted on their own (NvidiaDevicePlugin, Kueue, TrainingJob), through Construct.

Each takes the cluster as a kubeconfig and builds what the infra component builds given an explicit provider:
the graphs are compared. Bad input stops each one before anything at all is registered.
"""

import json
import os

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pytest

from tests.golden import snapshot
from tests.library.engine_report import reported
from tests.library.test_facades import without_facade
from tests.library.wire import over_the_wire
from tests.pulumi_harness import ProgramResult, run_program
from tests.stack_runs import REPO
from trainstack.components import HOSTED
from trainstack.components.tokens import token
from trainstack.components.training_job import TrainingJobArgs as HostedTrainingJobArgs
from trainstack.infra.config.loader import renamed_keys
from trainstack.infra.gcp.gpu_direct import GpuDirect, GpuDirectArgs
from trainstack.infra.gcp.gpu_networks import GpuNetworks, GpuNetworksArgs
from trainstack.infra.gcp.machine_types import GPU_DIRECT
from trainstack.infra.kubernetes.kueue import Kueue, KueueArgs
from trainstack.infra.kubernetes.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from trainstack.infra.kubernetes.training_job import SecretEnv, TrainingJob, TrainingJobArgs
from trainstack.provider import NAME, TrainstackProvider

KUBECONFIG = "apiVersion: v1\nkind: Config\n"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
IMAGE = "registry.example.com/trainstack@sha256:" + "ab" * 32


def run(program) -> tuple[ProgramResult, list[BaseException]]:
    stopped: list[BaseException] = []

    def guarded() -> None:
        try:
            program()
        except Exception as error:  # noqa: BLE001 - the test inspects it
            stopped.append(error)

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_program(guarded, config={}, stack="parts", project="trainstack",
                             outputs=lambda type_, name, inputs: {}, calls=lambda token, args: {})
    finally:
        os.chdir(cwd)
    return result, stopped


def construct(component: str, inputs: dict):
    """Construct as a program in another language reaches it: the inputs cross the wire first."""
    return lambda: TrainstackProvider(HOSTED, NAME).construct("part", token(component),
                                                             over_the_wire(inputs), None)


def direct(component_type, args_type, **fields):
    def program() -> None:
        provider = k8s.Provider("part-k8s", kubeconfig=pulumi.Output.secret(KUBECONFIG), cluster_identifier="research")
        component_type("part", args_type(provider=provider, **fields))
    return program


VPCS = [f"research-tcpx-gpunet-{i}" for i in range(4)]
SUBNETS = [f"{vpc}-subnet" for vpc in VPCS]


def direct_gpu_networks() -> None:
    google = gcp.Provider("part-gcp", project="ml-research-123", region="us-central1", default_labels={})
    GpuNetworks("part", GpuNetworksArgs(region="us-central1", name_prefix="research-tcpx", gpu_nics=4),
                opts=pulumi.ResourceOptions(providers={"gcp": google}))


CASES = {
    "GpuDirectNetworks": (
        {"project": "ml-research-123", "region": "us-central1", "machineType": "a3-highgpu-8g",
         "namePrefix": "research-tcpx"},
        direct_gpu_networks,
    ),
    "GpuDirect": (
        {"kubeconfig": KUBECONFIG, "clusterName": "research", "machineType": "a3-highgpu-8g", "vpcNames": VPCS,
         "subnetNames": SUBNETS},
        direct(GpuDirect, GpuDirectArgs, profile=GPU_DIRECT["a3-highgpu-8g"], accelerator="nvidia-h100-80gb",
               vpc_names=VPCS, subnet_names=SUBNETS),
    ),
    "NvidiaDevicePlugin": (
        {"kubeconfig": KUBECONFIG, "clusterName": "research", "nodeSelector": {"gpu": "true"},
         "tolerations": [TOLERATION]},
        direct(NvidiaDevicePlugin, NvidiaDevicePluginArgs, node_selector={"gpu": "true"}, tolerations=(TOLERATION,)),
    ),
    "Kueue": (
        {"kubeconfig": KUBECONFIG, "clusterName": "research", "gpuQuota": 8, "namespace": "research",
         "nodeLabels": {"gpu": "true"}, "tolerations": [TOLERATION], "queueingStrategy": "StrictFIFO"},
        direct(Kueue, KueueArgs, gpu_quota=8, namespace="research", node_labels={"gpu": "true"},
               tolerations=(TOLERATION,), queueing_strategy="StrictFIFO"),
    ),
    "TrainingJob": (
        {"kubeconfig": KUBECONFIG, "clusterName": "research", "imageRef": IMAGE, "podsMax": 2, "gpusPerPod": 4,
         "pvcName": "shared", "tolerations": [TOLERATION], "train": {"maxSteps": 10},
         "secretEnv": [{"name": "WANDB_API_KEY", "secretName": "wandb", "key": "api-key"}], "tensorboard": True},
        direct(TrainingJob, TrainingJobArgs, image_ref=IMAGE, pods_max=2, gpus_per_pod=4, pvc_name="shared",
               tolerations=(TOLERATION,), train={"maxSteps": 10},
               secret_env=(SecretEnv(name="WANDB_API_KEY", secret_name="wandb", key="api-key"),), tensorboard=True),
    ),
}


@pytest.mark.parametrize("component", sorted(CASES))
def test_hosted_part_builds_what_the_infra_component_builds(component):
    inputs, infra_program = CASES[component]
    hosted, stopped = run(construct(component, inputs))
    assert not stopped, stopped
    expected, _ = run(infra_program)
    assert sorted(map(json.dumps, without_facade(hosted, "parts"))) == \
        sorted(map(json.dumps, snapshot(expected)))
    for package in ("kubernetes", "gcp"):  # each cloud object on the component's one explicit provider
        objects = [r for r in hosted.registrations if r.type.startswith(f"{package}:")]
        if objects:
            provider = hosted.one(f"pulumi:providers:{package}")
            assert all(r.provider == provider.urn for r in objects)
    if component != "GpuDirectNetworks":
        provider = hosted.one("pulumi:providers:kubernetes")
        assert provider.inputs["clusterIdentifier"] == "research"
        assert provider.is_secret("kubeconfig")  # given as plain text, kept as a secret


@pytest.mark.parametrize(("component", "inputs", "problem"), [
    ("TrainingJob", {"kubeconfig": KUBECONFIG, "imageRef": IMAGE, "podsMin": 3, "podsMax": 1},
     "pods_min (3) must not exceed pods_max (1)"),
    ("Kueue", {"kubeconfig": KUBECONFIG, "queueingStrategy": "LIFO"}, "queueing_strategy must be one of"),
    ("NvidiaDevicePlugin", {"kubeconfig": KUBECONFIG, "namespace": "default"}, "namespace must not be 'default'"),
    ("TrainingPlatform", {"kubeconfig": KUBECONFIG, "gpu": {"gpusPerNode": 1, "tolerations": [{"operator": "Maybe"}]},
                          "bucket": {"uri": "s3://b"}, "imageRef": IMAGE}, "gpu.tolerations"),
    ("TrainingPlatform", {"kubeconfig": KUBECONFIG, "gpu": {"gpusPerNode": 1}, "bucket": {"uri": "s3://b"},
                          "imageRef": IMAGE, "job": {"enabled": True}}, "the job needs a shared filesystem"),
    ("GcpStack", {"project": "My Project"}, "project: 'My Project' is not a project ID"),
    ("GpuDirectNetworks", {"project": "p", "region": "us-central1", "machineType": "a2-highgpu-8g",
                           "namePrefix": "x"}, "'a2-highgpu-8g' has no GPUDirect NICs"),
    ("GpuDirect", {"kubeconfig": KUBECONFIG, "machineType": "a3-megagpu-8g", "vpcNames": VPCS,
                   "subnetNames": SUBNETS}, "vpc_names must list one name per GPU NIC of a3-megagpu-8g (8), got 4"),
    ("AwsStack", {"region": "us-west-2"}, "apiPublicAccessCidrs: not set"),
    ("GcpStack", {"project": "ml-research-123", "job": {"enabled": True, "podsMax": 3},
                  "gpuPools": {"t4": {"max": 1}}}, "job.podsMax: 3 pods need 3 GPU nodes"),
])
def test_bad_input_stops_before_anything_is_registered(component, inputs, problem):
    result, stopped = run(construct(component, inputs))
    # One line as the engine prints it, no traceback (tests/library/test_provider_errors.py).
    assert len(stopped) == 1 and problem in reported(stopped[0]) and "\n" not in reported(stopped[0]), stopped
    # In the caller's terms: property paths, never a stack file's keys or a `pulumi config` command.
    assert "pulumi config" not in reported(stopped[0]) and "trainstack:" not in reported(stopped[0])
    assert result.registrations == []


def test_gpu_direct_takes_the_networks_output_of_gpu_direct_networks():
    from trainstack.components import GpuDirect as HostedGpuDirect
    from trainstack.components import GpuDirectArgs as HostedGpuDirectArgs
    from trainstack.components import GpuDirectNetworks as HostedGpuDirectNetworks
    from trainstack.components import GpuDirectNetworksArgs as HostedGpuDirectNetworksArgs

    def program() -> None:
        networks = HostedGpuDirectNetworks("nets", HostedGpuDirectNetworksArgs(
            project="ml-research-123", region="us-central1", machine_type="a3-highgpu-8g", name_prefix="research-tcpx"))
        HostedGpuDirect("direct", HostedGpuDirectArgs(
            kubeconfig=KUBECONFIG, machine_type="a3-highgpu-8g", vpc_names=networks.network_names,
            subnet_names=networks.subnetwork_names))

    result, stopped = run(program)
    assert not stopped, stopped
    params = [r for r in result.registrations if r.inputs.get("kind") == "GKENetworkParamSet"]
    assert [r.inputs["spec"]["vpc"] for r in params] == VPCS
    assert [r.inputs["spec"]["vpcSubnet"] for r in params] == SUBNETS


def test_python_callers_get_the_same_component():
    from trainstack.components import Kueue as HostedKueue
    from trainstack.components import KueueArgs as HostedKueueArgs

    result, stopped = run(lambda: HostedKueue("part", HostedKueueArgs(kubeconfig=pulumi.Output.secret(KUBECONFIG),
                                                                       gpu_quota=2)))
    assert not stopped
    facade = result.one(token("Kueue"))
    wrapped = result.one("trainstack:index:Kueue")  # the infra component in it keeps its own token
    assert wrapped.parent == facade.urn
    assert result.one("pulumi:providers:kubernetes").is_secret("kubeconfig")


def test_an_output_where_the_schema_says_plain_is_refused_by_its_property_path():
    # YAML does not enforce `plain`: an output (or a secret) reaching a plain field is named, not json.dumps'd.
    def program() -> None:
        inputs = {"kubeconfig": KUBECONFIG, "imageRef": IMAGE, "gpusPerPod": 1,
                  "train": {"maxSteps": pulumi.Output.secret(10)}}
        TrainstackProvider(HOSTED, NAME).construct("part", "trainstack:index:TrainingJob", inputs, None)

    result, stopped = run(program)
    assert len(stopped) == 1 and reported(stopped[0]).startswith("train.maxSteps: takes a plain value, not an output")
    assert result.registrations == []


def test_training_job_takes_its_inputs_from_before_the_pod_rename_with_one_warning_each(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    new_inputs = {"kubeconfig": KUBECONFIG, "clusterName": "research", "imageRef": IMAGE, "podsMin": 1, "podsMax": 2,
                  "podsReplicas": 2, "gpusPerPod": 4, "procsPerPod": 4, "pvcName": "shared"}
    old_names = {new: old for old, new in renamed_keys(HostedTrainingJobArgs).items()}
    old_inputs = {old_names.get(key, key): value for key, value in new_inputs.items()}
    assert set(old_names.values()) <= set(old_inputs)
    new, stopped = run(construct("TrainingJob", new_inputs))
    assert not stopped and not warnings, (stopped, warnings)
    old, stopped = run(construct("TrainingJob", old_inputs))
    assert not stopped, stopped
    assert [(r.urn, r.inputs) for r in old.registrations] == [(r.urn, r.inputs) for r in new.registrations]
    assert sorted(warnings) == sorted(f"TrainingJob 'part': the input {old} is deprecated: rename it to {new} (same "
                                      "meaning: per pod of the job)" for new, old in old_names.items())


def test_training_job_refuses_an_input_under_both_names():
    inputs = {"kubeconfig": KUBECONFIG, "imageRef": IMAGE, "podsMax": 2, "nodesMax": 2}
    result, stopped = run(construct("TrainingJob", inputs))
    # As the provider reports it: one property error, no traceback (trainstack/provider.py).
    assert len(stopped) == 1 and reported(stopped[0]) == ("both nodesMax and podsMax are set (podsMax "
                                                          "replaces nodesMax). Fix: remove the input nodesMax")
    assert result.registrations == []
