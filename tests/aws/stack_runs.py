"""Run the real `__main__.py` under Pulumi mocks with the values of `Pulumi.aws.yaml`.

The Pulumi CLI and its provider plugins cannot run here, so what these runs check is our wiring:
the inputs each resource gets, its parent, its provider, its dependency edges. pulumi-eks components
are multi-language ("remote"): under mocks they register once and none of their children appear, so
their provider-computed outputs (kubeconfigJson, oidcIssuer, ...) are supplied below, camelCase.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import runpy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.pulumi_harness import ProgramResult, run_program

REPO = Path(__file__).resolve().parents[2]
MAIN = REPO / "__main__.py"
STACK_FILE = REPO / "Pulumi.aws.yaml"

ACCOUNT = "123456789012"
OIDC_ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B716D3041E"
OIDC_PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}"
KUBECONFIG = '{"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "trainstack-aws"}]}'
REGISTRY_HOST = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com"
DIGEST = "sha256:" + "0123456789abcdef" * 4
ECR_PASSWORD = "ecr-token-that-must-stay-secret"
EXISTING_VPC_CIDR = "172.31.0.0/16"

# Resource types as the engine sees them.
AWS_PROVIDER = "pulumi:providers:aws"
K8S_PROVIDER = "pulumi:providers:kubernetes"
EKS_CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
INTERNET_GATEWAY = "aws:ec2/internetGateway:InternetGateway"
ROUTE = "aws:ec2/route:Route"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ROUTE_TABLE_ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
KEY_PAIR = "aws:ec2/keyPair:KeyPair"
IAM_ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ADDON = "aws:eks/addon:Addon"
FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
BUCKET = "aws:s3/bucket:Bucket"
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
BUCKET_VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
REPOSITORY = "aws:ecr/repository:Repository"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = "docker-build:index:Image"
TRAINING_JOB = "trainstack:index:TrainingJob"
DEVICE_PLUGIN = "trainstack:index:NvidiaDevicePlugin"

GET_AUTHORIZATION_TOKEN = "aws:ecr/getAuthorizationToken:getAuthorizationToken"
GET_VPC = "aws:ec2/getVpc:getVpc"


def stack_file_config() -> dict[str, Any]:
    """Pulumi.aws.yaml's `config:` block, values as YAML typed them."""
    return yaml.safe_load(STACK_FILE.read_text())["config"]


def as_cli_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: strings, objects and lists as JSON."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value) if key in base else value
        return merged
    return override


def config_with(overrides: Mapping[str, Any] | None = None, remove: tuple[str, ...] = ()) -> dict[str, str]:
    """Pulumi.aws.yaml with `overrides` merged in key by key (like `pulumi config set --path`)."""
    config = copy.deepcopy(stack_file_config())
    for key in remove:
        config.pop(key, None)
    return as_cli_config(_merge(config, dict(overrides or {})))


# Phase two of the documented flow: data uploaded, `pulumi config set --path trainstack:job.enabled true`.
JOB_ENABLED = {"trainstack:job": {"enabled": True}}


def provider_outputs(type_: str, name: str, inputs: dict) -> dict:
    """Outputs the providers compute (auto-names, ARNs, the cluster's kubeconfig), deterministic."""
    if type_ == EKS_CLUSTER:
        return {"kubeconfigJson": KUBECONFIG, "oidcIssuer": OIDC_ISSUER, "oidcProviderArn": OIDC_PROVIDER_ARN}
    if type_ == BUCKET:
        return {"bucket": f"{name}-0a1b2c3", "arn": f"arn:aws:s3:::{name}-0a1b2c3"}
    if type_ == REPOSITORY:
        return {"name": f"{name}-4d5e6f7", "registryId": ACCOUNT, "repositoryUrl": f"{REGISTRY_HOST}/{name}-4d5e6f7"}
    if type_ == IAM_ROLE:
        return {"name": f"{name}-8a9b0c1", "arn": f"arn:aws:iam::{ACCOUNT}:role/{name}-8a9b0c1"}
    if type_ == LAUNCH_TEMPLATE:
        return {"latestVersion": 1}
    if type_ == KEY_PAIR:
        return {"keyName": f"{name}-2d3e4f5"}
    if type_ == IMAGE:
        return {"digest": DIGEST}
    return {}


def provider_calls(token: str, args: dict) -> dict:
    if token == GET_AUTHORIZATION_TOKEN:
        return {"id": ACCOUNT, "registryId": ACCOUNT, "userName": "AWS", "password": ECR_PASSWORD,
                "authorizationToken": "QVdTOnRva2Vu", "expiresAt": "2026-11-22T09:00:00Z",
                "proxyEndpoint": f"https://{REGISTRY_HOST}"}
    if token == GET_VPC:
        return {"id": args["id"], "cidrBlock": EXISTING_VPC_CIDR}
    raise NotImplementedError(f"unmocked invoke {token}")


# Read by the program or the provider SDKs when set: a developer's shell must not change the graph.
_AMBIENT_ENV = ("PULUMI_CONFIG", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "KUBECONFIG")


def run_main(config: Mapping[str, str] | None = None, *, preview: bool = False, stack: str = "aws",
             outputs: Any = provider_outputs) -> ProgramResult:
    """`pulumi up` (or `preview`) of the real __main__.py; config defaults to Pulumi.aws.yaml.

    Runs in the repository root, as `pulumi up` does (paths such as the chart's are relative to it).
    """
    cwd = os.getcwd()
    saved_env = {k: os.environ.pop(k) for k in list(os.environ) if k in _AMBIENT_ENV or k.startswith("PULUMI_K8S_")}
    os.chdir(REPO)
    try:
        return run_program(
            lambda: runpy.run_path(str(MAIN), run_name="__main__"),
            config=config_with() if config is None else config,
            preview=preview,
            stack=stack,
            project="trainstack",
            outputs=outputs,
            calls=provider_calls,
        )
    finally:
        os.chdir(cwd)
        os.environ.update(saved_env)


def run_main_expecting_error(config: Mapping[str, str], *, stack: str = "aws"
                             ) -> tuple[BaseException, list[str], ProgramResult]:
    """Run __main__.py where it must stop: (what stopped it, the error lines it logged, what it registered)."""
    caught: list[BaseException] = []
    errors = _ErrorLines()
    logging.getLogger().addHandler(errors)  # where the mocked engine sends pulumi.log output

    def program() -> None:
        try:
            runpy.run_path(str(MAIN), run_name="__main__")
        except BaseException as error:  # noqa: BLE001 - SystemExit included: the test inspects it
            caught.append(error)

    try:
        result = run_program(program, config=config, stack=stack, outputs=provider_outputs, calls=provider_calls)
    finally:
        logging.getLogger().removeHandler(errors)
    assert caught, "the program ran to the end; expected it to stop on the bad config"
    return caught[0], errors.lines, result


class _ErrorLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def short(urn: str | None) -> str | None:
    """`<type>::<name>` of a URN: readable in assertions and in the golden file."""
    if urn is None:
        return None
    qualified_type, name = urn.split("::")[-2:]
    return f"{qualified_type.rsplit('$', 1)[-1]}::{name}"
