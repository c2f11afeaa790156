"""Preflight: what only the AWS account can answer, asked during `pulumi preview` before anything is created.

- Is every chosen availability zone one of the region's, available to this account? (ec2:DescribeAvailabilityZones)
- Is every instance type (GPU and system) offered in every chosen availability zone?
  (ec2:DescribeInstanceTypeOfferings; an EKS node group whose subnets include a zone without the
  type fails only after the cluster has been created, 15 minutes in.)
- Does EKS offer the configured Kubernetes version in the region? (eks:DescribeClusterVersions)
- Is the pinned EFS CSI add-on build one EKS offers for that version? (eks:DescribeAddonVersions)
- Is a cluster admin the identity running Pulumi? (sts:GetCallerIdentity; EKS already made that one
  admin, and a second access entry fails the apply after the cluster was created.)

Each answer is an Output whose apply raises a one-line pulumi.RunError; `gate()` combines them into
an Output that the stack's resources depend on, so a wrong answer fails the preview and nothing is
registered. These calls need credentials (the same ones `pulumi preview` uses); under mocks the tests
answer them. With `trainstack:existingNetwork` the zones are the subnets', which are not looked up
here: the offering check is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infra import versions
from infra.aws.config import AwsStackConfig
from infra.config import NAMESPACE

EFS_CSI_ADDON = "aws-efs-csi-driver"


def checked_offerings(result: aws.ec2.GetInstanceTypeOfferingsResult, wanted: dict[str, str],
                      zones: Sequence[str]) -> bool:
    """`wanted` maps instance type -> the config key that chose it; every (type, zone) pair must be offered."""
    offered = set(zip(result.instance_types or (), result.locations or (), strict=False))
    for instance_type, key in wanted.items():
        missing = [zone for zone in zones if (instance_type, zone) not in offered]
        if missing:
            where = [zone for zone in zones if zone not in missing]
            raise pulumi.RunError(
                f"{key}: {instance_type} is not offered in {', '.join(missing)} (offered in: "
                f"{', '.join(where) or 'none of the chosen zones'}). Fix: drop {', '.join(missing)} from "
                f"{NAMESPACE}:availabilityZones, or choose another instance type")
    return True


def checked_zones(result: aws.GetAvailabilityZonesResult, zones: Sequence[str], region: str) -> bool:
    available = list(result.names or ())
    missing = [zone for zone in zones if zone not in available]
    if missing:
        verb = "is not an available zone" if len(missing) == 1 else "are not available zones"
        raise pulumi.RunError(f"{NAMESPACE}:availabilityZones: {', '.join(missing)} {verb} of {region} for this "
                              f"account (available: {', '.join(available) or 'none'}). Fix: list only available zones "
                              f"in {NAMESPACE}:availabilityZones")
    return True


def checked_cluster_version(result: aws.eks.GetClusterVersionsResult, version: str, region: str) -> bool:
    if not any(v.cluster_version == version for v in result.cluster_versions or ()):
        raise pulumi.RunError(f"{NAMESPACE}:kubernetesVersion: EKS offers no Kubernetes {version} in {region}. Fix: "
                              f"pulumi config set {NAMESPACE}:kubernetesVersion {versions.EKS_KUBERNETES_VERSION}")
    return True


def addon_version_key(version: str) -> tuple[int, ...]:
    """`v3.3.0-eksbuild.1` -> (3, 3, 0, 1)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def checked_addon(result: aws.eks.GetAddonVersionResult, pinned: str, kubernetes_version: str) -> bool:
    newest = result.version or ""
    if not newest or addon_version_key(pinned) > addon_version_key(newest):
        raise pulumi.RunError(
            f"{NAMESPACE}:kubernetesVersion: EKS offers the {EFS_CSI_ADDON} add-on for Kubernetes {kubernetes_version} "
            f"up to {newest or 'no version'}, not the pinned {pinned} (infra/versions.py EFS_CSI_ADDON_VERSION). "
            f"Fix: pulumi config set {NAMESPACE}:kubernetesVersion {versions.EKS_KUBERNETES_VERSION}, or pin an "
            "offered build")
    return True


def deployer_principal(caller_arn: str) -> str:
    """The IAM ARN behind sts:GetCallerIdentity's answer (an assumed-role session maps to its role)."""
    match = re.fullmatch(r"arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+", caller_arn)
    if match:
        return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
    return caller_arn


def _principal_identity(arn: str) -> tuple[str, str, str]:
    """(account, kind, name): a role's path is not part of the session ARN, so it is left out."""
    _, _, resource = arn.partition(":iam::")
    account, _, rest = resource.partition(":")
    kind, _, path = rest.partition("/")
    return account, kind, path.rsplit("/", 1)[-1]


def checked_admins(admin_arns: Sequence[str], caller_arn: str) -> bool:
    """No cluster admin is the identity running Pulumi: EKS gave that one an admin entry already, and a
    second entry for it fails the apply (ResourceInUseException) after the cluster took 10 minutes.

    Cluster admins only: the preview role is the identity running `pulumi preview` in CI, and the
    cluster it previews was created by someone else (whose entry EKS made), so its own entry is wanted.
    """
    for arn in admin_arns:
        if _principal_identity(arn) == _principal_identity(deployer_principal(caller_arn)):
            raise pulumi.RunError(f"trainstack:clusterAdmins: {arn} is the identity running Pulumi ({caller_arn}), "
                                  "which EKS already made cluster admin. Fix: remove it from trainstack:clusterAdmins")
    return True


def gate(cfg: AwsStackConfig, provider: aws.Provider, parent: pulumi.Resource) -> pulumi.Output[list]:
    """An Output that resolves to [] once every check passed: give it to resources as depends_on."""
    invoke = pulumi.InvokeOutputOptions(parent=parent, provider=provider)
    checks = [
        aws.eks.get_cluster_versions_output(cluster_versions_onlies=[cfg.kubernetes_version], opts=invoke).apply(
            lambda result: checked_cluster_version(result, cfg.kubernetes_version, cfg.region)),
        aws.eks.get_addon_version_output(addon_name=EFS_CSI_ADDON, kubernetes_version=cfg.kubernetes_version,
                                         most_recent=True, opts=invoke).apply(
            lambda result: checked_addon(result, versions.EFS_CSI_ADDON_VERSION, cfg.kubernetes_version)),
    ]
    if cfg.cluster_admin_arns:
        checks.append(aws.get_caller_identity_output(opts=invoke).apply(
            lambda caller: checked_admins(cfg.cluster_admin_arns, caller.arn)))
    zones = cfg.network.availability_zones
    if cfg.network.existing is None and zones:
        checks.append(aws.get_availability_zones_output(state="available", opts=invoke).apply(
            lambda result: checked_zones(result, zones, cfg.region)))
        wanted = {t: f"{NAMESPACE}:gpuNodes.instanceTypes" for t in cfg.gpu_nodes.instance_types}
        wanted.update({t: f"{NAMESPACE}:systemNodes.instanceType" for t in cfg.system_nodes.instance_types})
        checks.append(aws.ec2.get_instance_type_offerings_output(
            location_type="availability-zone",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(wanted)),
                     aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=list(zones))],
            opts=invoke).apply(lambda result: checked_offerings(result, wanted, zones)))
    return pulumi.Output.all(*checks).apply(lambda _: [])
