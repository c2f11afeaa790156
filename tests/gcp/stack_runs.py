"""The GCP stack under mocks (tests/stack_runs.py) with the values of `Pulumi.gcp.yaml`.

The shipped stack file leaves gcp:project to the user; these runs set it as the README says
(`pulumi config set gcp:project ...`). Provider-computed outputs (the cluster's endpoint and CA,
Filestore's address, the image digest) and the data sources the program asks (zones, GKE versions,
the caller's access token) are answered below, camelCase.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc

from tests import stack_runs
from tests.pulumi_harness import ProgramResult
from tests.stack_runs import REPO, as_cli_config, short  # noqa: F401 - re-exported for the GCP tests
from trainstack.infra.gcp.machine_types import FIXED_GPU_MACHINES

STACK_FILE = REPO / "Pulumi.gcp.yaml"
PROJECT = "ml-research-123"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
# What the mocked getServerConfig offers, per release channel, newest first. RAPID has a newer 1.34 patch
# than REGULAR: the newest valid version is not one a REGULAR cluster may be created at.
CHANNEL_VERSIONS = {
    "RAPID": ("1.36.0-gke.1000000", "1.35.2-gke.1000000", "1.34.5-gke.1000000"),
    "REGULAR": ("1.35.1-gke.1200000", "1.34.4-gke.1100000", "1.34.3-gke.1300000", "1.33.7-gke.1000000"),
    "STABLE": ("1.34.3-gke.1300000", "1.33.7-gke.1000000"),
}
GKE_VERSIONS = tuple(sorted({v for vs in CHANNEL_VERSIONS.values() for v in vs},
                            key=lambda v: [int(n) for n in v.replace("-gke.", ".").split(".")], reverse=True))
ENDPOINT = "34.123.45.67"
CA_CERTIFICATE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
FILESTORE_IP = "10.123.0.2"
DIGEST = "sha256:" + "fedcba9876543210" * 4
TENSORBOARD_DIGEST = "sha256:" + "0123456789abcdef" * 4
ACCESS_TOKEN = "ya29.token-that-must-stay-secret"

# Resource types as the engine sees them.
GCP_PROVIDER = "pulumi:providers:gcp"
K8S_PROVIDER = "pulumi:providers:kubernetes"
SERVICE = "gcp:projects/service:Service"
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
ROUTER = "gcp:compute/router:Router"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
SERVICE_ACCOUNT_KEY = "gcp:serviceaccount/key:Key"
SA_IAM_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
REPOSITORY_IAM_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
FILESTORE = "gcp:filestore/instance:Instance"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = "docker-build:index:Image"
TRAINING_JOB = "trainstack:index:TrainingJob"
PLATFORM = "trainstack:index:TrainingPlatform"

GET_ZONES = "gcp:compute/getZones:getZones"
GET_ENGINE_VERSIONS = "gcp:container/getEngineVersions:getEngineVersions"
GET_CLIENT_CONFIG = "gcp:organizations/getClientConfig:getClientConfig"
GET_MACHINE_TYPES = "gcp:compute/getMachineTypes:getMachineTypes"
GET_PROJECT_SERVICE = "gcp:projects/getProjectService:getProjectService"
GET_CLUSTER = "gcp:container/getCluster:getCluster"


class ClusterNotFound(grpc.RpcError):
    """What the google_container_cluster data source fails with for a cluster that does not exist
    (terraform-provider-google data_source_google_container_cluster.go: "<id> not found"). The engine
    hands a provider's error to the program as a gRPC error, which the SDK raises where the invoke is
    awaited (pulumi/runtime/invoke.py: a "semantic level" error, not an unhandled one)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._message


def project_service(args: dict, enabled: bool = True) -> dict:
    """An enabled service reads back with its ID; a disabled one without (resourceGoogleProjectServiceRead
    clears the ID when the service is not among the enabled ones)."""
    if not enabled:
        return {"id": "", "project": args.get("project"), "service": ""}
    return {"id": f"{args.get('project')}/{args['service']}", "project": args.get("project"),
            "service": args["service"]}

# `pulumi config set gcp:project ...`, the one step the README asks before `pulumi up`.
WITH_PROJECT = {"gcp:project": PROJECT}
# Phase two of the documented flow: data uploaded, `pulumi config set --path trainstack:job.enabled true`.
JOB_ENABLED = {**WITH_PROJECT, "trainstack:job": {"enabled": True}}


def stack_file_config() -> dict[str, Any]:
    return stack_runs.stack_file_config(STACK_FILE)


def config_with(overrides: Mapping[str, Any] | None = None, remove: tuple[str, ...] = ()) -> dict[str, str]:
    """Pulumi.gcp.yaml plus gcp:project, with `overrides` merged in key by key."""
    project = {key: value for key, value in WITH_PROJECT.items() if key not in remove}
    return stack_runs.config_with(STACK_FILE, {**project, **(overrides or {})}, remove)


def provider_outputs(type_: str, name: str, inputs: dict) -> dict:
    """Outputs the providers compute (auto-names, addresses, the image digest), deterministic."""
    if type_ == CLUSTER:
        return {"endpoint": ENDPOINT, "masterAuth": {"clusterCaCertificate": CA_CERTIFICATE}}
    if type_ in (NETWORK, SUBNETWORK):
        return {"name": inputs.get("name") or f"{name}-3c4d5e6"}
    if type_ == BUCKET:
        return {"name": f"{name}-5f6a7b8", "url": f"gs://{name}-5f6a7b8"}
    if type_ == SERVICE_ACCOUNT:
        email = f"{inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
        return {"email": email, "member": f"serviceAccount:{email}",
                "name": f"projects/{PROJECT}/serviceAccounts/{email}"}
    if type_ == FILESTORE:
        return {"name": f"{name}-9c0d1e2", "networks": [{**inputs["networks"][0], "ipAddresses": [FILESTORE_IP]}]}
    if type_ == IMAGE:
        return {"digest": TENSORBOARD_DIGEST if name.endswith("-tensorboard-image") else DIGEST}
    return {}


def machine_type(name: str) -> dict:
    """compute.machineTypes as the mocked zone offers them: every type, with its bundled GPUs."""
    fixed = FIXED_GPU_MACHINES.get(name)
    accelerators = [{"guestAcceleratorType": fixed.accelerator, "guestAcceleratorCount": fixed.count}] if fixed else []
    return {"name": name, "accelerators": accelerators, "architecture": "X86_64", "bundledLocalSsds": [],
            "deprecateds": [], "description": name, "guestCpus": 4, "isSharedCpus": False,
            "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": 263168, "memoryMb": 15360,
            "selfLink": f"zones/{ZONES[0]}/machineTypes/{name}"}


def provider_calls(token: str, args: dict) -> dict:
    if token == GET_ZONES:
        return {"names": list(ZONES), "project": args.get("project"), "region": args.get("region")}
    if token == GET_ENGINE_VERSIONS:
        prefix = args.get("versionPrefix", "")
        offered = [v for v in GKE_VERSIONS if v.startswith(prefix)]
        # As terraform-provider-google's data source fills them (data_source_google_container_engine_versions.go).
        channel_latest = {channel: next(v for v in vs if v.startswith(prefix))
                          for channel, vs in CHANNEL_VERSIONS.items() if any(v.startswith(prefix) for v in vs)}
        return {"latestMasterVersion": offered[0] if offered else "", "validMasterVersions": offered,
                "releaseChannelLatestVersion": channel_latest,
                "releaseChannelDefaultVersion": {channel: vs[1] for channel, vs in CHANNEL_VERSIONS.items()},
                "location": args.get("location")}
    if token == GET_MACHINE_TYPES:
        return {"machineTypes": [machine_type(args["filter"].removeprefix("name = "))], "zone": args.get("zone"),
                "project": args.get("project"), "filter": args["filter"], "id": "machine-types"}
    if token == GET_CLIENT_CONFIG:
        return {"accessToken": ACCESS_TOKEN, "project": PROJECT, "region": "us-central1", "id": "client"}
    if token == GET_PROJECT_SERVICE:  # the seed's project: the APIs the preflight asks are on
        return project_service(args)
    if token == GET_CLUSTER:  # no cluster yet
        raise ClusterNotFound(f"projects/{args.get('project')}/locations/{args.get('location')}/clusters/"
                              f"{args.get('name')} not found")
    raise NotImplementedError(f"unmocked invoke {token}")


def run_main(config: Mapping[str, str] | None = None, *, preview: bool = False, stack: str = "gcp",
             outputs: Any = provider_outputs, calls: Any = provider_calls) -> ProgramResult:
    return stack_runs.run_main(config_with() if config is None else config, stack=stack, outputs=outputs,
                               calls=calls, preview=preview)


def run_main_expecting_error(config: Mapping[str, str], *, stack: str = "gcp"
                             ) -> tuple[BaseException, list[str], ProgramResult]:
    return stack_runs.run_main_expecting_error(config, stack=stack, outputs=provider_outputs, calls=provider_calls)
