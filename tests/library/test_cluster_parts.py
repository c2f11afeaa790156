"""The stacks' parts hosted on their own (GkeCluster, GkeGpuNodePool, FilestoreShare, GcsSnapshotBucket,
EksCluster, EfsStorage, S3SnapshotBucket), through Construct.

Each wraps the infra component its stack builds, handed small references built from outputs instead of
the stack's Python objects: the graphs are compared with that infra component built directly. Bad
input stops each one before anything at all is registered. A Python program composes them, each on
the outputs of the one before, down to the training platform.
"""

import dataclasses
import json
import os

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pytest
from pulumi.errors import InputPropertyError

from tests import pulumi_harness
from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.golden import snapshot
from tests.library.engine_report import reported
from tests.library.test_facades import without_facade
from tests.library.wire import over_the_wire
from tests.pulumi_harness import ProgramResult, run_program
from tests.stack_runs import REPO
from trainstack import components
from trainstack.components import HOSTED
from trainstack.components.tokens import token
from trainstack.infra.aws import preflight as aws_preflight
from trainstack.infra.aws.cluster import EksCluster, EksClusterArgs
from trainstack.infra.aws.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from trainstack.infra.aws.config import ExistingNetwork, parse_aws_config
from trainstack.infra.aws.efs_storage import EfsStorage, EfsStorageArgs
from trainstack.infra.aws.handles import EksClusterRef
from trainstack.infra.aws.network import Network, NetworkArgs
from trainstack.infra.aws.snapshot_bucket import SnapshotBucket as S3SnapshotBucket
from trainstack.infra.aws.snapshot_bucket import SnapshotBucketArgs as S3SnapshotBucketArgs
from trainstack.infra.aws.stack import release_namespaces
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.gcp import preflight as gcp_preflight
from trainstack.infra.gcp.cluster import GkeCluster, GkeClusterArgs
from trainstack.infra.gcp.config import parse_gcp_config
from trainstack.infra.gcp.control_plane_firewall import ControlPlaneFirewall, ControlPlaneFirewallArgs
from trainstack.infra.gcp.filestore_storage import FilestoreStorage, FilestoreStorageArgs
from trainstack.infra.gcp.handles import ClusterRef, NetworkRef
from trainstack.infra.gcp.node_pools import GpuNodePool, GpuNodePoolArgs, NodePoolArgs, SystemNodePool
from trainstack.infra.gcp.snapshot_bucket import SnapshotBucket as GcsSnapshotBucket
from trainstack.infra.gcp.snapshot_bucket import SnapshotBucketArgs as GcsSnapshotBucketArgs
from trainstack.provider import NAME, TrainstackProvider

STACK = "parts"
PROJECT = "ml-research-123"
KUBECONFIG = "apiVersion: v1\nkind: Config\n"
NODES_ACCOUNT = f"research-nodes@{PROJECT}.iam.gserviceaccount.com"
OFF = json.dumps({"enabled": False})
GCP_BASE = {"gcp:project": PROJECT, "trainstack:job": OFF, "trainstack:sharedFilesystem": OFF}
OIDC_ARN = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"
OIDC_ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/ABC"


EKS_GET_CLUSTER = "aws:eks/getCluster:getCluster"


def existing_eks_cluster(version: str):
    """eks getCluster's answer for a cluster that exists (EfsStorage's cluster name has resolved)."""
    return lambda args: {"id": args["name"], "name": args["name"], "version": version,
                         "vpcConfig": {"clusterSecurityGroupId": aws_runs.CLUSTER_SECURITY_GROUP}}


def aws_calls(token: str, args: dict) -> dict:
    """The AWS stack tests' invoke answers, and the parts' cluster on the stack's Kubernetes version."""
    return existing_eks_cluster("1.35")(args) if token == EKS_GET_CLUSTER else aws_runs.provider_calls(token, args)


def run(program, cloud: str = "gcp", calls=None) -> tuple[ProgramResult, list[BaseException]]:
    """Run `program` under the cloud's mocks (invokes answered by `calls`, default the stack tests' answers);
    (what it registered, what it raised while it ran). An error raised later, in an apply, propagates."""
    runs = {"gcp": gcp_runs, "aws": aws_runs}[cloud]
    stopped: list[BaseException] = []

    def guarded() -> None:
        try:
            program()
        except Exception as error:  # noqa: BLE001 - the test inspects it
            stopped.append(error)

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_program(guarded, config={}, stack=STACK, project="trainstack", outputs=runs.provider_outputs,
                             calls=calls or {"gcp": gcp_runs.provider_calls, "aws": aws_calls}[cloud])
    finally:
        os.chdir(cwd)
    return result, stopped


def construct(component: str, inputs: dict):
    """Construct as a program in another language reaches it: the inputs cross the wire first."""
    return lambda: TrainstackProvider(HOSTED, NAME).construct("part", token(component),
                                                             over_the_wire(inputs), None)


def gcp_config(**raw: str):
    return parse_gcp_config({**GCP_BASE, **raw}, STACK)


def direct_gke_cluster() -> None:
    config = dataclasses.replace(gcp_config(**{"gcp:region": "us-central1", "trainstack:clusterName": "research"}),
                                 gpu_pools=())
    google = gcp.Provider("part-gcp", project=PROJECT, region="us-central1", default_labels=dict(config.labels))
    checks = gcp_preflight.gate(config, google, parent=google)
    gated = pulumi.ResourceOptions(providers={"gcp": google}, depends_on=checks.ready)
    cluster = GkeCluster("part", GkeClusterArgs(
        config=config, network=NetworkRef(network_name="research-vpc", subnetwork_name="research-nodes",
                                          pods_range_name="pods", services_range_name="services"),
        services=(), control_plane_version=checks.control_plane_version, multi_networking=False), opts=gated)
    # What the GKE stack adds to its cluster for the platform: the system pool and the control-plane rule.
    SystemNodePool("part-system", NodePoolArgs(cluster=cluster, service_account_email=NODES_ACCOUNT,
                                               labels=config.labels), config.system_pool, opts=gated)
    ControlPlaneFirewall("part-control-plane-calls", ControlPlaneFirewallArgs(
        network_name="research-vpc", master_cidr=config.network.master_cidr,
        charts=[KUEUE_CHART.chart, "training-job"], node_service_account=NODES_ACCOUNT), opts=gated)


A100_POOL = {"machineType": "a2-highgpu-1g", "capacity": "ON_DEMAND", "max": 4}
CLUSTER = {"clusterName": "research", "location": "us-central1-a", "nodeZone": "us-central1-a"}


def direct_gpu_pool() -> None:
    config = gcp_config(**{"trainstack:gpuPools": json.dumps({"a100": A100_POOL})})
    google = gcp.Provider("part-gcp", project=PROJECT, default_labels=dict(config.labels))
    GpuNodePool("part", GpuNodePoolArgs(
        cluster=ClusterRef(cluster_name="research", location="us-central1-a", node_zone="us-central1-a"),
        service_account_email=NODES_ACCOUNT, labels=config.labels, config=config.gpu_pools[0]),
        opts=pulumi.ResourceOptions(providers={"gcp": google}))


def direct_filestore() -> None:
    config = gcp_config(**{"trainstack:sharedFilesystem": json.dumps({"tier": "BASIC_SSD"}),
                           "trainstack:job": json.dumps({"enabled": False, "name": "gpt2"})})
    google = gcp.Provider("part-gcp", project=PROJECT, default_labels=dict(config.labels))
    provider = k8s.Provider("part-k8s", kubeconfig=pulumi.Output.secret(KUBECONFIG), cluster_identifier="research")
    FilestoreStorage("part", FilestoreStorageArgs(
        project=PROJECT, config=config.filestore,
        cluster=ClusterRef(cluster_name="research", location="us-central1-a", node_zone="us-central1-a",
                           provider=provider),
        network=NetworkRef(network_name="research-vpc", subnetwork_name=""),
        claim_namespace="default", claim_name="gpt2-shared"), opts=pulumi.ResourceOptions(providers={"gcp": google}))


AWS_RAW = {"aws:region": "us-west-2", "trainstack:clusterName": "research", "trainstack:job": OFF,
           "trainstack:apiPublicAccessCidrs": json.dumps(["203.0.113.7/32"])}


def direct_eks_cluster() -> None:
    config = parse_aws_config(AWS_RAW, STACK)
    config = dataclasses.replace(config, network=dataclasses.replace(config.network, availability_zones=()))
    tags = {"app": "trainstack", "pulumi-stack": STACK}
    provider = aws.Provider("part-aws", region="us-west-2")
    child = pulumi.ResourceOptions(providers={"aws": provider},
                                   depends_on=aws_preflight.gate(config, provider, parent=provider))
    cluster = EksCluster("part", EksClusterArgs(
        cluster_name="research", kubernetes_version=config.kubernetes_version, vpc_id="vpc-0abc",
        public_subnet_ids=[], private_subnet_ids=["subnet-a", "subnet-b"], system_nodes=config.system_nodes,
        gpu_nodes=config.gpu_nodes, api_endpoint=config.api_endpoint, preview_secret_namespaces=release_namespaces(config),
        control_plane_logs=config.control_plane_logs, autoscaled=True, tags=tags), opts=child)
    ClusterAutoscaler("part-autoscaler", ClusterAutoscalerArgs(cluster=cluster, region="us-west-2", tags=tags),
                      opts=child)


def direct_efs() -> None:
    tags = {"app": "trainstack", "pulumi-stack": STACK}
    provider = aws.Provider("part-aws", region="us-west-2")
    child = pulumi.ResourceOptions(providers={"aws": provider})
    network = Network("part-network", NetworkArgs(region="us-west-2", availability_zones=(), tags=tags, existing=(
        ExistingNetwork(vpc_id="vpc-0abc", public_subnet_ids=(), private_subnet_ids=("subnet-a", "subnet-b")))),
        opts=child)
    kubernetes = k8s.Provider("part-k8s", kubeconfig=pulumi.Output.secret(KUBECONFIG), cluster_identifier="research")
    EfsStorage("part", EfsStorageArgs(
        cluster=EksClusterRef(cluster_name="research", oidc_provider_arn=OIDC_ARN, oidc_issuer=OIDC_ISSUER,
                              provider=kubernetes),
        network=network, claim_namespace="default", claim_name="train-shared", tags=tags), opts=child)


def direct_s3_bucket() -> None:
    provider = aws.Provider("part-aws", region="us-west-2")
    S3SnapshotBucket("part", S3SnapshotBucketArgs(tags={"app": "trainstack", "pulumi-stack": STACK, "team": "ml"}),
                     opts=pulumi.ResourceOptions(providers={"aws": provider}))


def direct_gcs_bucket() -> None:
    config = gcp_config(**{"gcp:region": "europe-west4", "trainstack:zone": "europe-west4-a"})
    google = gcp.Provider("part-gcp", project=PROJECT, region="europe-west4", default_labels=dict(config.labels))
    GcsSnapshotBucket("part", GcsSnapshotBucketArgs(project=PROJECT, region="europe-west4"),
                      opts=pulumi.ResourceOptions(providers={"gcp": google}))


NETWORK = {"network": "research-vpc", "subnetwork": "research-nodes", "podsRangeName": "pods",
           "servicesRangeName": "services"}
CASES = {
    "GkeCluster": ("gcp", {"project": PROJECT, "region": "us-central1", "clusterName": "research", **NETWORK,
                           "nodeServiceAccountEmail": NODES_ACCOUNT},
                   direct_gke_cluster),
    "GkeGpuNodePool": ("gcp", {"project": PROJECT, **CLUSTER, "nodeServiceAccountEmail": NODES_ACCOUNT,
                               "poolName": "a100", "pool": A100_POOL}, direct_gpu_pool),
    "FilestoreShare": ("gcp", {"project": PROJECT, "location": "us-central1-a", "network": "research-vpc",
                               "kubeconfig": KUBECONFIG, "clusterName": "research", "tier": "BASIC_SSD",
                               "jobName": "gpt2"}, direct_filestore),
    "EksCluster": ("aws", {"region": "us-west-2", "clusterName": "research", "vpcId": "vpc-0abc",
                           "privateSubnetIds": ["subnet-a", "subnet-b"], "apiPublicAccessCidrs": ["203.0.113.7/32"]},
                   direct_eks_cluster),
    "EfsStorage": ("aws", {"region": "us-west-2", "clusterName": "research", "oidcProviderArn": OIDC_ARN,
                           "oidcIssuer": OIDC_ISSUER, "kubeconfig": KUBECONFIG, "vpcId": "vpc-0abc",
                           "subnetIds": ["subnet-a", "subnet-b"]}, direct_efs),
    "S3SnapshotBucket": ("aws", {"region": "us-west-2", "tags": {"team": "ml"}}, direct_s3_bucket),
    "GcsSnapshotBucket": ("gcp", {"project": PROJECT, "region": "europe-west4"}, direct_gcs_bucket),
}


@pytest.mark.parametrize("component", sorted(CASES))
def test_hosted_part_builds_what_the_infra_component_builds(component):
    cloud, inputs, infra_program = CASES[component]
    hosted, stopped = run(construct(component, inputs), cloud)
    assert not stopped, stopped
    expected, stopped = run(infra_program, cloud)
    assert not stopped, stopped
    assert sorted(map(json.dumps, without_facade(hosted, STACK))) == sorted(map(json.dumps, snapshot(expected)))
    assert any(r.custom and not r.type.startswith("pulumi:providers:") for r in hosted.registrations)
    for package in ("kubernetes", "gcp", "aws"):  # each cloud object on the component's one explicit provider
        objects = [r for r in hosted.registrations if r.type.startswith(f"{package}:") and r.custom]
        if objects:
            provider = hosted.one(f"pulumi:providers:{package}")
            assert all(r.provider == provider.urn for r in objects), package


@pytest.mark.parametrize(("component", "inputs", "problem"), [
    ("GkeCluster", {**CASES["GkeCluster"][1], "masterCidr": "10.0.0.0/24"},
     "masterCidr: 10.0.0.0/24 must be an internal /28"),
    ("GkeCluster", {**CASES["GkeCluster"][1], "region": "us-central1", "zone": "europe-west4-a"},
     "zone: 'europe-west4-a' is not a zone of region us-central1"),
    ("GkeGpuNodePool", {**CASES["GkeGpuNodePool"][1], "pool": {"capacity": "CHEAP"}}, "pool.capacity"),
    ("GkeGpuNodePool", {**CASES["GkeGpuNodePool"][1], "pool": {"machineType": "a3-highgpu-8g"}},
     "gpuNetworkNames: not set, and a3-highgpu-8g attaches 4 GPU NICs"),
    ("GkeGpuNodePool", {**CASES["GkeGpuNodePool"][1], "gpuNetworkNames": ["a"], "gpuSubnetworkNames": ["b"]},
     "gpuNetworkNames: a2-highgpu-1g has no GPUDirect NICs"),
    ("FilestoreShare", {**CASES["FilestoreShare"][1], "capacityGb": 100}, "capacityGb: a BASIC_SSD Filestore share"),
    ("FilestoreShare", {**CASES["FilestoreShare"][1], "tier": "ENTERPRISE"},
     "location: ENTERPRISE needs a region, got 'us-central1-a'. Fix: set location to the cluster's region (e.g. "
     "us-central1)"),
    ("FilestoreShare", {**CASES["FilestoreShare"][1], "location": "us-central1"},
     "location: BASIC_SSD needs a zone, got 'us-central1'"),
    ("EksCluster", {key: value for key, value in CASES["EksCluster"][1].items() if key != "apiPublicAccessCidrs"},
     "apiPublicAccessCidrs: not set"),
    ("EksCluster", {**CASES["EksCluster"][1], "gpuNodes": {"capacityType": "CHEAP"}}, "gpuNodes.capacityType"),
    ("EksCluster", {**CASES["EksCluster"][1], "privateSubnetIds": []}, "privateSubnetIds: must not be empty"),
    ("EksCluster", {**CASES["EksCluster"][1], "vpcId": "research"}, "vpcId: expected a VPC ID like vpc-0123abcd"),
    ("EfsStorage", {**CASES["EfsStorage"][1], "subnetIds": []}, "subnetIds: must not be empty"),
    ("EfsStorage", {**CASES["EfsStorage"][1], "subnetIds": ["sn-1"]}, "subnetIds: 'sn-1' is not a subnet ID"),
    ("EfsStorage", {**CASES["EfsStorage"][1], "tags": {"aws:owner": "me"}}, "tags.aws:owner: is in a reserved"),
    ("S3SnapshotBucket", {"region": "us-west-9"}, "region: 'us-west-9' is not an AWS Region"),
    ("S3SnapshotBucket", {"region": "us-west-2", "tags": {"app": "x"}}, "tags.app: is set by trainstack"),
    ("GcsSnapshotBucket", {"project": PROJECT, "region": "europe-west99"}, "region: 'europe-west99' is not a Google"),
    ("EfsStorage", {**CASES["EfsStorage"][1], "jobNamespace": "Not A Namespace"}, "jobNamespace: 'Not A Namespace'"),
    ("GkeGpuNodePool", {**CASES["GkeGpuNodePool"][1], "poolName": "Bad Name"},
     "poolName: 'Bad Name' is not a valid node pool name"),
])
def test_bad_input_stops_before_anything_is_registered(component, inputs, problem):
    result, stopped = run(construct(component, inputs), CASES[component][0])
    # The provider's property error, as the engine prints it (tests/library/test_provider_errors.py).
    assert len(stopped) == 1 and isinstance(stopped[0], InputPropertyError), stopped
    line = reported(stopped[0])
    assert problem in line and "\n" not in line, line
    # In the caller's terms: property paths, never a stack file's keys or a `pulumi config` command.
    assert "pulumi config" not in line and "trainstack:" not in line
    assert result.registrations == []


def test_gke_parts_compose_into_the_training_platform():
    def program() -> None:
        cluster = components.GkeCluster("research", components.GkeClusterArgs(
            project=PROJECT, cluster_name="research", network="research-vpc", subnetwork="research-nodes",
            pods_range_name="pods", services_range_name="services", node_service_account_email=NODES_ACCOUNT))
        pool = components.GkeGpuNodePool("a100", components.GkeGpuNodePoolArgs(
            project=PROJECT, cluster_name=cluster.cluster_name, location=cluster.location,
            node_zone=cluster.node_zone, node_service_account_email=NODES_ACCOUNT, pool_name="a100",
            pool=components.GkeGpuPool(machine_type="a2-highgpu-1g", max=2)))
        share = components.FilestoreShare("share", components.FilestoreShareArgs(
            project=PROJECT, location=cluster.node_zone, network="research-vpc", kubeconfig=cluster.kubeconfig,
            cluster_name=cluster.cluster_name))
        pulumi.export("selector", pool.node_selector)
        pulumi.export("tolerations", pool.tolerations)
        pulumi.export("gpus", pool.gpus_per_node)
        components.TrainingPlatform("platform", components.TrainingPlatformArgs(
            kubeconfig=cluster.kubeconfig, cluster_name=cluster.cluster_name,
            gpu=components.GpuNodes(gpus_per_node=1, accelerator="nvidia-tesla-a100",
                                    node_selector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
                                                   "trainstack/node-pool": "a100"}),
            bucket=components.Bucket(uri="gs://research-data"), image_ref="us-docker.pkg.dev/p/r/t:1",
            shared_storage=components.SharedStorage(size=share.size, storage_class_name="",
                                                    volume_name=share.volume_name),
            install_device_plugin=False, job=components.Job(enabled=True)))

    result, stopped = run(program)
    assert not stopped, stopped
    gke = result.one("gcp:container/cluster:Cluster")
    node_pool = result.one("gcp:container/nodePool:NodePool", "a100")
    # The platform's Kubernetes provider (Kueue's release with it) waits for the cluster part's untainted system
    # pool and its control-plane rule, through the kubeconfig.
    system_pool = result.one("gcp:container/nodePool:NodePool", "research-system")
    assert "taints" not in system_pool.inputs["nodeConfig"] and system_pool.inputs["initialNodeCount"] >= 1
    rule = result.one("gcp:compute/firewall:Firewall")
    kubernetes = result.one("pulumi:providers:kubernetes", "platform-k8s")
    assert {system_pool.urn, rule.urn} <= set(kubernetes.dependencies)
    assert node_pool.inputs["cluster"] == "research" and node_pool.inputs["nodeLocations"] == ["us-central1-a"]
    assert gke.urn in node_pool.dependencies  # the pool waits for the cluster through its name
    assert node_pool.inputs["nodeConfig"]["serviceAccount"] == NODES_ACCOUNT
    instance = result.one("gcp:filestore/instance:Instance")
    assert instance.inputs["location"] == "us-central1-a"
    assert instance.inputs["networks"][0]["network"] == "research-vpc"
    # The share's volume is reserved for the claim the platform makes, and the claim binds to it.
    volume = result.one("kubernetes:core/v1:PersistentVolume")
    claim = result.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert volume.inputs["spec"]["claimRef"] == {"namespace": "default", "name": claim.inputs["metadata"]["name"]}
    assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
    # Every in-cluster object on a provider made from the cluster's own kubeconfig.
    assert {r.provider for r in result.registrations if r.type.startswith("kubernetes:") and r.custom} <= {
        p.urn for p in result.by_type("pulumi:providers:kubernetes")}
    assert result.exports["selector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
                                          "trainstack/node-pool": "a100"}
    assert result.exports["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                              "effect": "NoSchedule"}]
    assert result.exports["gpus"] == 1


def answering(**answers):
    """The GCP stack tests' invoke answers, except those given (token: args -> answer)."""
    return lambda token, args: answers[token](args) if token in answers else gcp_runs.provider_calls(token, args)


def existing_cluster(version: str, multi_networking: bool = True):
    """container getCluster's answer for a cluster that exists (the pool's cluster name has resolved)."""
    return lambda args: {"name": args["name"], "location": args["location"], "project": args.get("project"),
                         "masterVersion": version, "enableMultiNetworking": multi_networking}


A3_CLUSTER = existing_cluster("1.33.2-gke.1000000")


def refused(monkeypatch, program, calls, cloud: str = "gcp") -> tuple[str, set[str]]:
    """Run `program` where a preflight answer stops it: (the one error line, the resource types registered)."""
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run(program, cloud, calls=calls)
    return str(raised.value), {r.type for r in monitors[0].recorded}


@pytest.mark.parametrize(("component", "token", "answer", "line"), [
    ("GkeCluster", gcp_runs.GET_ZONES, {"names": ["us-central1-b"]},
     "zone: us-central1-a is not an available zone of us-central1 for this project (available: us-central1-b). "
     "Fix: set the input zone to <one of those>"),
    ("GkeCluster", gcp_runs.GET_ENGINE_VERSIONS, {"releaseChannelLatestVersion": {"RAPID": "1.34.5-gke.1000000"}},
     "kubernetesVersion: GKE's REGULAR channel offers no 1.34.x in us-central1-a (it offers none there). Fix: set "
     "the input kubernetesVersion to <a minor of the REGULAR channel>, or set the input releaseChannel to"),
    ("GkeCluster", gcp_runs.GET_PROJECT_SERVICE, {},
     "project: compute.googleapis.com and container.googleapis.com are not enabled in ml-research-123"),
    ("EksCluster", aws_runs.GET_CLUSTER_VERSIONS, {"id": "us-west-2", "clusterVersions": []},
     "kubernetesVersion: EKS offers no Kubernetes"),
])
def test_a_cluster_preflight_refusal_names_the_parts_inputs(monkeypatch, component, token, answer, line):
    # The stack's preflight speaks to a stack file (trainstack:zone, `pulumi config set`); a part's caller has inputs.
    cloud = CASES[component][0]
    runs = {"gcp": gcp_runs, "aws": aws_runs}[cloud]
    message, registered = refused(monkeypatch, construct(component, CASES[component][1]),
                                  lambda called, args: answer if called == token else runs.provider_calls(called, args),
                                  cloud)
    assert message.startswith(line) and "\n" not in message, message
    assert "trainstack:" not in message and "pulumi config" not in message and f"{cloud}:" not in message, message
    assert all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


A3_POOL = {**CASES["GkeGpuNodePool"][1], "poolName": "h100", "pool": {"machineType": "a3-highgpu-8g"},
           "gpuNetworkNames": [f"tcpx-{i}" for i in range(4)], "gpuSubnetworkNames": [f"tcpx-{i}" for i in range(4)]}


@pytest.mark.parametrize(("inputs", "answers", "line"), [
    (CASES["GkeGpuNodePool"][1],
     {gcp_runs.GET_MACHINE_TYPES: lambda args: {"machineTypes": [], "zone": args["zone"], "filter": args["filter"],
                                                 "id": "x"}},
     "pool.machineType: a2-highgpu-1g is not offered in us-central1-a for this project. Fix: set the input nodeZone "
     "to <a zone that offers it>"),
    (A3_POOL, {gcp_runs.GET_CLUSTER: existing_cluster("1.28.15-gke.1000000")},
     "clusterName: GKE 1.28.15-gke.1000000 of cluster research is older than GPUDirect-TCPX needs "
     "(1.28.15-gke.3163000 or newer). Fix: "),
    (A3_POOL, {gcp_runs.GET_CLUSTER: existing_cluster("1.33.2-gke.1000000", multi_networking=False)},
     "clusterName: cluster research has multi-networking off, and a3-highgpu-8g attaches 4 GPU NICs"),
])
def test_a_pool_the_zone_or_cluster_cannot_take_stops_before_the_node_pool(monkeypatch, inputs, answers, line):
    # The stack's preflight of a GPU pool, asked of the zone and the cluster the part is given.
    message, registered = refused(monkeypatch, construct("GkeGpuNodePool", inputs), answering(**answers))
    assert message.startswith(line) and "\n" not in message and "pulumi config" not in message, message
    assert "gcp:container/nodePool:NodePool" not in registered, registered


def test_a_filestore_location_from_an_output_that_the_tier_cannot_take_stops_before_the_instance(monkeypatch):
    # A zone (GkeCluster's nodeZone) wired into an ENTERPRISE share: Filestore would refuse it only at create time.
    def program() -> None:
        components.FilestoreShare("share", components.FilestoreShareArgs(
            project=PROJECT, location=pulumi.Output.from_input("us-central1-a"), network="research-vpc",
            kubeconfig=KUBECONFIG, cluster_name="research", tier="ENTERPRISE"))

    message, registered = refused(monkeypatch, program, gcp_runs.provider_calls)
    assert message.startswith("location: ENTERPRISE needs a region, got 'us-central1-a'"), message
    assert "gcp:filestore/instance:Instance" not in registered, registered


def test_gpu_networks_from_an_output_are_counted_before_the_node_pool(monkeypatch):
    # GpuDirectNetworks' outputs arrive as whole lists: a short one would fail inside an apply, a long one be cut.
    def program() -> None:
        components.GkeGpuNodePool("h100", components.GkeGpuNodePoolArgs(
            project=PROJECT, cluster_name="research", location="us-central1-a", node_zone="us-central1-a",
            node_service_account_email=NODES_ACCOUNT, pool_name="h100",
            pool=components.GkeGpuPool(machine_type="a3-highgpu-8g", capacity="ON_DEMAND"),
            gpu_network_names=pulumi.Output.from_input([f"tcpx-{i}" for i in range(5)]),
            gpu_subnetwork_names=pulumi.Output.from_input([f"tcpx-{i}" for i in range(4)])))

    message, registered = refused(monkeypatch, program, answering(**{gcp_runs.GET_CLUSTER: A3_CLUSTER}))
    assert message == ("GkeGpuNodePool 'h100': gpuNetworkNames: a3-highgpu-8g attaches 4 GPU NICs, got 5 names. Fix: "
                       "list one per GPU NIC, in NIC order"), message
    assert "gcp:container/nodePool:NodePool" not in registered, registered


@pytest.mark.parametrize("whole", [pulumi.Output.secret, pulumi.Output.from_input], ids=["secret", "output"])
def test_an_object_input_given_as_a_whole_output_is_refused_not_defaulted(whole):
    # A secret pool (fn::secret in YAML) reached Construct as an Output, which the SDK maps as {}: the part built
    # the default spot T4 pool instead of the A100 pool written.
    def program() -> None:
        inputs = {**over_the_wire(CASES["GkeGpuNodePool"][1]), "pool": whole(A100_POOL)}
        TrainstackProvider(HOSTED, NAME).construct("part", "trainstack:index:GkeGpuNodePool", inputs, None)

    result, stopped = run(program)
    assert len(stopped) == 1 and isinstance(stopped[0], InputPropertyError), stopped
    assert reported(stopped[0]).startswith("pool: takes a plain object, not an output or a secret")
    assert result.registrations == []


def test_efs_on_a_cluster_whose_kubernetes_lacks_the_pinned_add_on_stops_before_the_file_system(monkeypatch):
    # A cluster the user brings may run a Kubernetes for which EKS offers only older builds of the add-on.
    def calls(token: str, args: dict) -> dict:
        if token == EKS_GET_CLUSTER:
            return existing_eks_cluster("1.29")(args)
        if token == aws_runs.GET_ADDON_VERSION:
            return {**aws_runs.provider_calls(token, args), "version": "v2.0.7-eksbuild.1"}
        return aws_runs.provider_calls(token, args)

    message, registered = refused(monkeypatch, construct("EfsStorage", CASES["EfsStorage"][1]), calls, "aws")
    assert message.startswith("clusterName: cluster research runs Kubernetes 1.29, for which EKS offers the "
                              "aws-efs-csi-driver add-on up to v2.0.7-eksbuild.1, not the pinned"), message
    assert not registered & {aws_runs.FILE_SYSTEM, aws_runs.MOUNT_TARGET, aws_runs.ADDON}, registered


def test_a_gpu_direct_pool_on_a_new_enough_multi_networking_cluster_is_built():
    result, stopped = run(construct("GkeGpuNodePool", A3_POOL), calls=answering(**{gcp_runs.GET_CLUSTER: A3_CLUSTER}))
    assert not stopped, stopped
    asked = {token for token, _ in result.invokes}
    assert {gcp_runs.GET_MACHINE_TYPES, gcp_runs.GET_CLUSTER} <= asked
    assert result.one("gcp:container/nodePool:NodePool").inputs["nodeConfig"]["machineType"] == "a3-highgpu-8g"


def test_a_gpu_direct_pool_attaches_the_networks_of_gpu_direct_networks():
    def program() -> None:
        networks = components.GpuDirectNetworks("nets", components.GpuDirectNetworksArgs(
            project=PROJECT, region="us-central1", machine_type="a3-highgpu-8g", name_prefix="research-tcpx"))
        components.GkeGpuNodePool("h100", components.GkeGpuNodePoolArgs(
            project=PROJECT, cluster_name="research", location="us-central1-a", node_zone="us-central1-a",
            node_service_account_email=NODES_ACCOUNT, pool_name="h100",
            pool=components.GkeGpuPool(machine_type="a3-highgpu-8g", capacity="ON_DEMAND"),
            gpu_network_names=networks.network_names, gpu_subnetwork_names=networks.subnetwork_names))

    result, stopped = run(program, calls=answering(**{gcp_runs.GET_CLUSTER: A3_CLUSTER}))
    assert not stopped, stopped
    attached = result.one("gcp:container/nodePool:NodePool").inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    vpcs = [r for r in result.by_type("gcp:compute/network:Network")]
    assert len(attached) == 4 == len(vpcs)


def test_eks_cluster_name_waits_for_the_system_nodes_and_feeds_efs():
    def program() -> None:
        cluster = components.EksCluster("research", components.EksClusterArgs(
            region="us-west-2", cluster_name="research", vpc_id="vpc-0abc", private_subnet_ids=["subnet-a", "subnet-b"],
            api_public_access_cidrs=["203.0.113.7/32"]))
        components.EfsStorage("shared", components.EfsStorageArgs(
            region="us-west-2", cluster_name=cluster.cluster_name, oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer, kubeconfig=cluster.kubeconfig, vpc_id="vpc-0abc",
            subnet_ids=["subnet-a", "subnet-b"]))
        pulumi.export("gpus", cluster.gpus_per_node)

    result, stopped = run(program, "aws")
    assert not stopped, stopped
    addon = result.one("aws:eks/addon:Addon")
    system = next(r for r in result.registrations if r.type == "eks:index:ManagedNodeGroup"
                  and r.name.endswith("-system"))
    assert addon.inputs["clusterName"] == "research" and system.urn in addon.dependencies
    assert len(result.by_type("aws:efs/mountTarget:MountTarget")) == 2
    assert result.exports["gpus"] == 1


@pytest.mark.parametrize("asked", [True, None])
def test_gke_cluster_enables_multi_networking_only_when_asked(asked):
    inputs = {**CASES["GkeCluster"][1], **({"multiNetworking": asked} if asked is not None else {})}
    result, stopped = run(construct("GkeCluster", inputs))
    assert not stopped, stopped
    assert result.one("gcp:container/cluster:Cluster").inputs.get("enableMultiNetworking") is asked
