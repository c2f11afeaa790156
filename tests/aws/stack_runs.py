"""The AWS stack under mocks (tests/stack_runs.py) with the values of `Pulumi.aws.yaml`.

pulumi-eks components are multi-language ("remote"): under mocks they register once and none of their
children appear, so their provider-computed outputs (kubeconfigJson, oidcIssuer, ...) are supplied
below, camelCase.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tests import pulumi_harness, stack_runs
from tests.pulumi_harness import ProgramResult
from tests.stack_runs import REPO, as_cli_config, short  # noqa: F401 - re-exported for the AWS tests

STACK_FILE = REPO / "Pulumi.aws.yaml"

ACCOUNT = "123456789012"
OIDC_ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B716D3041E"
OIDC_PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}"
KUBECONFIG = '{"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "trainstack-aws"}]}'
REGISTRY_HOST = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com"
DIGEST = "sha256:" + "0123456789abcdef" * 4
TENSORBOARD_DIGEST = "sha256:" + "fedcba9876543210" * 4
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
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
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
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = "docker-build:index:Image"
TRAINING_JOB = "trainstack:index:TrainingJob"
DEVICE_PLUGIN = "trainstack:index:NvidiaDevicePlugin"

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
PV = "kubernetes:core/v1:PersistentVolume"
AUTOSCALER = "trainstack:aws:ClusterAutoscaler"

GET_AUTHORIZATION_TOKEN = "aws:ecr/getAuthorizationToken:getAuthorizationToken"
GET_VPC = "aws:ec2/getVpc:getVpc"
GET_INSTANCE_TYPE_OFFERINGS = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
GET_CLUSTER_VERSIONS = "aws:eks/getClusterVersions:getClusterVersions"
GET_ADDON_VERSION = "aws:eks/getAddonVersion:getAddonVersion"
# What the mocked account offers (preflight.py asks): every type in every zone, these EKS versions, and
# the EFS CSI add-on up to this build.
EKS_VERSIONS = ("1.33", "1.34", "1.35")
EFS_CSI_NEWEST = "v3.3.0-eksbuild.1"


def filter_values(args: dict, name: str) -> list[str]:
    return next((f["values"] for f in args.get("filters", ()) if f["name"] == name), [])


def offer_everything(args: dict) -> dict:
    pairs = [(t, z) for t in filter_values(args, "instance-type") for z in filter_values(args, "location")]
    return {"id": "us-west-2", "instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
            "locationTypes": ["availability-zone"] * len(pairs)}
GET_SUBNET = "aws:ec2/getSubnet:getSubnet"
GET_LOG_GROUPS = "aws:cloudwatch/getLogGroups:getLogGroups"
GET_AVAILABILITY_ZONES = "aws:index/getAvailabilityZones:getAvailabilityZones"
AVAILABLE_ZONES = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")  # what the mocked account has
GET_CALLER_IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"
GET_CLUSTERS = "aws:eks/getClusters:getClusters"  # eks:ListClusters: the region's cluster names
GET_CLUSTER = "aws:eks/getCluster:getCluster"
GET_INSTANCE_TYPE = "aws:ec2/getInstanceType:getInstanceType"
CLUSTER_SECURITY_GROUP = "sg-0eksc1uster0000000"
GET_PARAMETER = "aws:ssm/getParameter:getParameter"
GET_SERVICE_QUOTA = "aws:servicequotas/getServiceQuota:getServiceQuota"
# What the mocked account's EC2 vCPU quotas allow (servicequotas:GetServiceQuota): eight 192-vCPU P instances.
P_VCPU_QUOTA = 1536.0
GET_NODE_GROUPS = "aws:eks/getNodeGroups:getNodeGroups"  # eks:ListNodegroups
GET_NODE_GROUP = "aws:eks/getNodeGroup:getNodeGroup"  # eks:DescribeNodegroup
GET_CAPACITY_BLOCK_RESERVATION = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
CAPACITY_RESERVATION = "aws:ec2/capacityReservation:CapacityReservation"
# Who runs `pulumi up` in these tests: a role assumed through SSO, as most people do.
DEPLOYER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/AWSReservedSSO_Deployer"
DEPLOYER_SESSION_ARN = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Deployer/alice@example.com"
# Existing subnets (trainstack:existingNetwork) answer with these zones and VPCs; others: us-west-2a, vpc-0abc.
EXISTING_SUBNETS: dict[str, dict[str, str]] = {
    "subnet-a": {"availabilityZone": "us-west-2a", "vpcId": "vpc-0abc"},
    "subnet-a2": {"availabilityZone": "us-west-2a", "vpcId": "vpc-0abc"},
    "subnet-b": {"availabilityZone": "us-west-2b", "vpcId": "vpc-0abc"},
    "subnet-elsewhere": {"availabilityZone": "us-west-2c", "vpcId": "vpc-0other"},
}
# Pulumi.aws.yaml leaves the API allow-list to the user (the program refuses to guess it): tests add one.
API_ACCESS = {"trainstack:apiPublicAccessCidrs": ["203.0.113.7/32"]}


def stack_file_config() -> dict[str, Any]:
    """Pulumi.aws.yaml's `config:` block, values as YAML typed them."""
    return stack_runs.stack_file_config(STACK_FILE)


def config_with(overrides: Mapping[str, Any] | None = None, remove: tuple[str, ...] = ()) -> dict[str, str]:
    """Pulumi.aws.yaml plus the user's API allow-list (API_ACCESS), with `overrides` merged in key by key
    (like `pulumi config set --path`)."""
    base = {key: value for key, value in API_ACCESS.items() if key not in remove}
    return stack_runs.config_with(STACK_FILE, {**base, **(overrides or {})}, remove)


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
    if type_ == PLACEMENT_GROUP:  # the stack's own group, or one named by gpuNodes.placementGroup read by name
        return {"name": f"{name}-5a6b7c8", "placementGroupId": "pg-0123456789abcdef0", "strategy": "cluster",
                "region": "us-west-2", "arn": placement_group_arn(f"{name}-5a6b7c8")}
    if type_ == CAPACITY_RESERVATION:  # an On-Demand Capacity Reservation read by ID: the aws-p5 group's own
        return {"instanceType": "p5.48xlarge", "availabilityZone": "us-west-2a", "instanceCount": 2}
    if type_ == KEY_PAIR:
        return {"keyName": f"{name}-2d3e4f5"}
    if type_ == IMAGE:
        return {"digest": TENSORBOARD_DIGEST if name.endswith("-tensorboard-image") else DIGEST}
    return {}


def provider_calls(token: str, args: dict) -> dict:
    if token == GET_AUTHORIZATION_TOKEN:
        return {"id": ACCOUNT, "registryId": ACCOUNT, "userName": "AWS", "password": ECR_PASSWORD,
                "authorizationToken": "QVdTOnRva2Vu", "expiresAt": "2026-11-22T09:00:00Z",
                "proxyEndpoint": f"https://{REGISTRY_HOST}"}
    if token == GET_VPC:
        return {"id": args["id"], "cidrBlock": EXISTING_VPC_CIDR}
    if token == GET_INSTANCE_TYPE_OFFERINGS:
        return offer_everything(args)
    if token == GET_CLUSTER_VERSIONS:
        wanted = args.get("clusterVersionsOnlies") or EKS_VERSIONS
        return {"id": "us-west-2", "clusterVersions": [
            {"clusterType": "eks", "clusterVersion": v, "controlPlaneComponentConfigs": [],
             "controlPlaneScalingTiers": [], "defaultPlatformVersion": "eks.1", "defaultVersion": False,
             "endOfExtendedSupportDate": "2028-01-01", "endOfStandardSupportDate": "2027-01-01",
             "kubernetesPatchVersion": f"{v}.0", "releaseDate": "2026-01-01", "versionStatus": "STANDARD_SUPPORT"}
            for v in EKS_VERSIONS if v in wanted]}
    if token == GET_ADDON_VERSION:
        return {"id": args["addonName"], "addonName": args["addonName"],
                "kubernetesVersion": args["kubernetesVersion"], "mostRecent": args.get("mostRecent"),
                "version": EFS_CSI_NEWEST}
    if token == GET_SUBNET:
        return {"id": args["id"], **EXISTING_SUBNETS.get(args["id"], {"availabilityZone": "us-west-2a",
                                                                       "vpcId": "vpc-0abc"})}
    if token == GET_AVAILABILITY_ZONES:
        return {"id": "us-west-2", "names": list(AVAILABLE_ZONES), "zoneIds": [f"usw2-az{i}" for i in range(1, 5)],
                "groupNames": ["us-west-2"] * 4, "state": args.get("state")}
    if token == GET_LOG_GROUPS:  # a fresh account: no log groups (CloudWatchAccount models one that has some)
        return {"id": ACCOUNT, "logGroupNamePrefix": args.get("logGroupNamePrefix"), "logGroupNames": [], "arns": []}
    if token == GET_CALLER_IDENTITY:
        return {"id": ACCOUNT, "accountId": ACCOUNT, "arn": DEPLOYER_SESSION_ARN, "userId": "AROAEXAMPLE:alice"}
    if token == GET_CLUSTERS:  # a fresh account: no clusters yet
        return clusters_answer([])
    if token == GET_CLUSTER:  # eks:DescribeCluster, once the cluster exists (the EFA group's security groups)
        return {"id": args["name"], "name": args["name"], "vpcConfig": {"clusterSecurityGroupId": CLUSTER_SECURITY_GROUP}}
    if token == GET_INSTANCE_TYPE:  # ec2:DescribeInstanceTypes: the EFA types as efa.py has them
        return instance_type_answer(args["instanceType"])
    if token == GET_PARAMETER:  # EKS's public AMI parameters: published for every mocked version
        return {"id": args["name"], "name": args["name"], "type": "String", "value": "ami-0123456789abcdef0",
                "arn": f"arn:aws:ssm:us-west-2::parameter{args['name']}", "version": 1}
    if token == GET_CAPACITY_BLOCK_RESERVATION:  # a Capacity Block for the aws-p5 group, running now
        return capacity_block_answer(args["id"])
    if token == GET_SERVICE_QUOTA:
        return service_quota_answer(args["quotaCode"], P_VCPU_QUOTA)
    if token == GET_NODE_GROUPS:  # a fresh account: the cluster has no node groups yet
        return {"id": args["clusterName"], "clusterName": args["clusterName"], "names": []}
    raise NotImplementedError(f"unmocked invoke {token}")


def placement_group_arn(group_name: str) -> str:
    return f"arn:aws:ec2:us-west-2:{ACCOUNT}:placement-group/{group_name}"


def reservation_made_in(group: str | None, named_group: str = "p5-reserved"):
    """Outputs where the group named by gpuNodes.placementGroup reads as `named_group` and the On-Demand Capacity
    Reservation was made in placement group `group` (None: in none, read as an empty ARN)."""
    def outputs(type_: str, name: str, inputs: dict) -> dict:
        answer = provider_outputs(type_, name, inputs)
        if type_ == PLACEMENT_GROUP:
            return {**answer, "name": named_group, "arn": placement_group_arn(named_group)}
        if type_ == CAPACITY_RESERVATION:
            return {**answer, "placementGroupArn": placement_group_arn(group) if group else ""}
        return answer
    return outputs


def service_quota_answer(quota_code: str, value: float) -> dict:
    """What servicequotas:GetServiceQuota says about an EC2 quota (its value in vCPUs)."""
    return {"id": f"ec2/{quota_code}", "quotaCode": quota_code, "serviceCode": "ec2", "value": value,
            "adjustable": True, "arn": f"arn:aws:servicequotas:us-west-2:{ACCOUNT}:ec2/{quota_code}",
            "defaultValue": 0.0, "globalQuota": False, "quotaName": "", "serviceName": "Amazon EC2", "usages": []}


def capacity_block_answer(reservation_id: str, **changes: str) -> dict:
    """What ec2:DescribeCapacityReservations says about a Capacity Block for two p5.48xlarge in us-west-2a."""
    return {"id": reservation_id, "instanceType": "p5.48xlarge", "availabilityZone": "us-west-2a",
            "state": "active", "reservationType": "capacity-block", "instanceCount": 2, **changes}


def instance_type_answer(instance_type: str, efa_interfaces: int | None = None) -> dict:
    """What ec2:DescribeInstanceTypes says about an EFA type: its network cards, one EFA each (efa.py's row)."""
    from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES

    row = EFA_INSTANCE_TYPES.get(instance_type)
    count = efa_interfaces if efa_interfaces is not None else (row.efa_interfaces if row else 0)
    return {"id": instance_type, "instanceType": instance_type, "efaSupported": row is not None,
            "efaMaximumInterfaces": count, "maximumNetworkCards": max(count, 1), "supportedArchitectures": ["x86_64"]}


def clusters_answer(names) -> dict:
    return {"id": "us-west-2", "names": sorted(names)}


def run_main(config: Mapping[str, str] | None = None, *, preview: bool = False, stack: str = "aws",
             outputs: Any = provider_outputs, calls: Any = provider_calls) -> ProgramResult:
    """`pulumi up` (or `preview`) of the real __main__.py; config defaults to Pulumi.aws.yaml."""
    return stack_runs.run_main(config_with() if config is None else config, stack=stack, outputs=outputs,
                               calls=calls, preview=preview)


def run_main_expecting_error(config: Mapping[str, str], *, stack: str = "aws"
                             ) -> tuple[BaseException, list[str], ProgramResult]:
    return stack_runs.run_main_expecting_error(config, stack=stack, outputs=provider_outputs, calls=provider_calls)


class ResourceAlreadyExistsException(Exception):
    """What CloudWatch Logs answers CreateLogGroup for a name that exists."""


class ResourceInUseException(Exception):
    """What EKS answers CreateCluster for a name the region already has."""


class CloudWatchAccount:
    """The log groups of one mocked account across several runs: what the service, not the mocks, remembers.

    CreateLogGroup of an existing name fails (ResourceAlreadyExistsException); an import must name one
    that exists; `destroy` models what EKS does after the cluster is deleted: its control-plane group is
    there again. EKS clusters are remembered too (CreateCluster of an existing name fails with
    ResourceInUseException, eks:ListClusters lists them), so a live cluster of another stack can be modelled. `watch(monkeypatch)` lets it see each registration's import ID (the harness's outputs
    callback is given type, name and inputs only).
    """

    def __init__(self) -> None:
        self.groups: set[str] = set()
        self.clusters: set[str] = set()
        self.imported: list[str] = []
        self._registration = threading.local()

    def watch(self, monkeypatch) -> None:
        original = pulumi_harness._Mocks.new_resource
        account = self

        def new_resource(mocks, args):
            account._registration.import_id = args.resource_id or None
            return original(mocks, args)

        monkeypatch.setattr(pulumi_harness._Mocks, "new_resource", new_resource)

    def outputs(self, type_: str, name: str, inputs: dict) -> dict:
        if type_ == LOG_GROUP:
            group, import_id = inputs["name"], getattr(self._registration, "import_id", None)
            if import_id is not None:
                assert import_id == group and group in self.groups, f"import of a missing log group {import_id}"
                self.imported.append(group)
            elif group in self.groups:
                raise ResourceAlreadyExistsException(f"The specified log group already exists: {group}")
            self.groups.add(group)
        if type_ == EKS_CLUSTER:
            if inputs["name"] in self.clusters:
                raise ResourceInUseException(f"Cluster already exists with name: {inputs['name']}")
            self.clusters.add(inputs["name"])
        return provider_outputs(type_, name, inputs)

    def calls(self, token: str, args: dict) -> dict:
        if token == GET_LOG_GROUPS:
            names = sorted(g for g in self.groups if g.startswith(args.get("logGroupNamePrefix") or ""))
            return {"id": ACCOUNT, "logGroupNamePrefix": args.get("logGroupNamePrefix"), "logGroupNames": names,
                    "arns": [f"arn:aws:logs:us-west-2:{ACCOUNT}:log-group:{n}" for n in names]}
        if token == GET_CLUSTERS:
            return clusters_answer(self.clusters)
        return provider_calls(token, args)

    def destroy(self) -> None:
        """`pulumi destroy` deletes the groups; EKS then recreates its control-plane group from late streams."""
        self.groups = {g for g in self.groups if g.startswith("/aws/eks/")}
        self.clusters = set()
