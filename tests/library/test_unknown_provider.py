"""A provider the caller builds on other resources' outputs (a region or an assume-role ARN not known yet):
at preview the engine answers each of its invokes with an empty map (pulumi/pulumi
sdk/go/common/resource/plugin/provider_plugin.go, Invoke: `if !pcfg.known { return ... PropertyMap{} }`), so
every field of the answer reads None. A part then needs its region (project) as an input, says so in one
line, and leaves the account checks to `up`; it never reads None as a region, nor refuses what it cannot see.
"""

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pytest

from tests.library.test_cluster_parts import NODES_ACCOUNT, PROJECT, run
from tests.library.test_user_program import GCP_REGION, REGION, aws_in, gcp_in
from trainstack import components

UNKNOWN_REGION = "region: not set, and the given aws provider's region is not known at preview"
UNKNOWN_ZONES = "availabilityZones: not set, and the given aws provider's zones are not known at preview"
UNKNOWN_PROJECT = "project: not set, and the given gcp provider's project is not known at preview"


def unknown(package: str, base):
    """The engine's answers with a `package` provider whose settings are unknown: empty for its invokes."""
    return lambda token, args: {} if token.startswith(f"{package}:") else base(token, args)


def aws_part(part: str, region: str | None, zones: list[str] | None = None):
    def program() -> None:
        # The assume-role ARN is another resource's output: the provider's settings are unknown at preview.
        deployer = aws.iam.Role("deployer", assume_role_policy="{}")
        mine = aws.Provider("mine", region=REGION, assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=deployer.arn)])
        on_mine = pulumi.ResourceOptions(provider=mine)
        if part == "EfsStorage":
            components.EfsStorage("shared", components.EfsStorageArgs(
                cluster_name="research", oidc_provider_arn="arn:aws:iam::123456789012:oidc-provider/x",
                oidc_issuer="x", vpc_id="vpc-0abc", subnet_ids=["subnet-a", "subnet-b"], region=region,
                kubeconfig="apiVersion: v1\n"), opts=on_mine)
        elif part == "S3SnapshotBucket":
            components.S3SnapshotBucket("snapshots", components.S3SnapshotBucketArgs(region=region), opts=on_mine)
        elif part == "EksCluster":
            components.EksCluster("research", components.EksClusterArgs(
                cluster_name="research", vpc_id="vpc-0abc", private_subnet_ids=["subnet-a", "subnet-b"],
                region=region, api_public_access_cidrs=["203.0.113.7/32"], kubeconfig_role_arn=deployer.arn),
                opts=on_mine)
        else:
            components.AwsStack("trainstack", components.AwsStackArgs(
                region=region, availability_zones=zones, api_public_access_cidrs=["203.0.113.7/32"],
                job=components.Job(enabled=False)), opts=on_mine)
    return program


AWS_PARTS = ["EfsStorage", "S3SnapshotBucket", "EksCluster", "AwsStack"]


@pytest.mark.parametrize("part", AWS_PARTS)
def test_an_aws_part_on_a_provider_not_known_yet_needs_its_region(part):
    # Before: "region: not set, and no aws provider is given" (a provider was given); AwsStack a TypeError.
    result, stopped = run(aws_part(part, None), "aws", calls=unknown("aws", aws_in(REGION)))
    assert len(stopped) == 1 and str(stopped[0]).startswith(UNKNOWN_REGION), stopped
    assert str(stopped[0]).endswith("Fix: set the input region to the provider's")


@pytest.mark.parametrize("part", AWS_PARTS)
def test_an_aws_part_on_a_provider_not_known_yet_previews_in_the_region_given(part):
    # Before: "region: eu-west-1, but the given aws provider is in None ... set it to None", no way out; with
    # the region past that, EKS "offers no Kubernetes 1.35" and the EFS add-on "up to no version".
    zones = [f"{REGION}{z}" for z in "ab"] if part == "AwsStack" else None
    result, stopped = run(aws_part(part, REGION, zones), "aws", calls=unknown("aws", aws_in(REGION)))
    assert not stopped, stopped
    mine = next(r for r in result.by_type("pulumi:providers:aws") if r.name == "mine")
    parts = [r for r in result.registrations if r.type.startswith("aws:") and r.custom and r.name != "deployer"]
    assert parts and all(r.provider == mine.urn for r in parts), [r.name for r in parts if r.provider != mine.urn]
    if part == "EfsStorage":  # the subnets' zones are not known: one mount target each, as for outputs
        assert sorted(r.inputs["subnetId"] for r in result.by_type("aws:efs/mountTarget:MountTarget")) == [
            "subnet-a", "subnet-b"]


def test_an_aws_stack_on_a_provider_not_known_yet_needs_its_zones():
    result, stopped = run(aws_part("AwsStack", REGION), "aws", calls=unknown("aws", aws_in(REGION)))
    assert [str(error) for error in stopped] == [
        UNKNOWN_ZONES + " (its settings are other resources' outputs). Fix: set the input availabilityZones"]
    assert not result.by_type("aws:ec2/vpc:Vpc")


def gcp_part(part: str, project: str | None, region: str | None):
    def program() -> None:
        mine = gcp.Provider("mine", project=PROJECT, region=GCP_REGION)
        on_mine = pulumi.ResourceOptions(provider=mine)
        zone = f"{GCP_REGION}-a" if region else None
        if part == "GkeCluster":
            components.GkeCluster("research", components.GkeClusterArgs(
                project=project, region=region, zone=zone, cluster_name="research", network="research-vpc",
                subnetwork="research-nodes", pods_range_name="pods", services_range_name="services",
                node_service_account_email=NODES_ACCOUNT), opts=on_mine)
        elif part == "GcsSnapshotBucket":
            components.GcsSnapshotBucket("snapshots", components.GcsSnapshotBucketArgs(
                project=project, region=region), opts=on_mine)
        else:
            components.GcpStack("trainstack", components.GcpStackArgs(
                project=project, region=region, zone=zone, job=components.Job(enabled=False)), opts=on_mine)
    return program


@pytest.mark.parametrize("part", ["GkeCluster", "GcsSnapshotBucket", "GcpStack"])
def test_a_gcp_part_on_a_provider_not_known_yet_needs_its_project_and_region(part):
    # Before: "project: not set, and no gcp provider is given", with a provider given.
    result, stopped = run(gcp_part(part, None, None), calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert len(stopped) == 1 and str(stopped[0]).startswith(UNKNOWN_PROJECT), stopped
    result, stopped = run(gcp_part(part, PROJECT, None), calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert len(stopped) == 1 and str(stopped[0]).startswith(
        "region: not set, and the given gcp provider's region is not known at preview"), stopped


def test_a_gke_cluster_on_a_provider_not_known_yet_needs_its_zone():
    # Before (with project and region set): "zone: no default zone for region europe-west4", as if none was up.
    def program() -> None:
        mine = gcp.Provider("mine", project=PROJECT, region=GCP_REGION)
        components.GkeCluster("research", components.GkeClusterArgs(
            project=PROJECT, region=GCP_REGION, cluster_name="research", network="research-vpc",
            subnetwork="research-nodes", pods_range_name="pods", services_range_name="services",
            node_service_account_email=NODES_ACCOUNT), opts=pulumi.ResourceOptions(provider=mine))

    result, stopped = run(program, calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert [str(error) for error in stopped] == [
        "zone: not set, and the given gcp provider's zones are not known at preview (its settings are other "
        "resources' outputs). Fix: set the input zone"]


def test_a_gcp_bucket_on_a_provider_not_known_yet_previews_where_its_inputs_say():
    result, stopped = run(gcp_part("GcsSnapshotBucket", PROJECT, GCP_REGION), calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert not stopped, stopped
    assert result.one("gcp:storage/bucket:Bucket").inputs["location"].lower() == GCP_REGION


def test_a_gcp_provider_without_a_project_is_named_as_given():
    def calls(token: str, args: dict) -> dict:
        answer = gcp_in(GCP_REGION)(token, args)
        return {**answer, "project": ""} if token.startswith("gcp:organizations/getClientConfig") else answer

    result, stopped = run(gcp_part("GcsSnapshotBucket", None, None), calls=calls)
    assert [str(error) for error in stopped] == ["project: not set, and the given gcp provider has no project. Fix: "
                                                 "set the input project, or set project on your gcp.Provider"]

