"""A program of the kind a user writes: the parts composed outside us-west-2, on the user's own network resources
and the user's own providers (assume-role, default tags), the cluster's outputs feeding the platform.

Every cloud resource must be registered with the caller's provider and every invoke asked of it: a part that
made its own provider would deploy with ambient credentials, into whatever account its region reaches.
"""

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.library.test_cluster_parts import NODES_ACCOUNT, PROJECT, aws_calls, run
from tests.pulumi_harness import ProgramResult
from trainstack import components
from trainstack.infra.aws.cluster import GPU_NODE_LABELS, GPU_TOLERATIONS

REGION = "eu-west-1"
ROLE = "arn:aws:iam::210987654321:role/deployer"
IMAGE = "registry.example.com/trainstack@sha256:" + "ab" * 32
GET_REGION = "aws:index/getRegion:getRegion"
GCP_REGION = "europe-west4"


def aws_in(region: str):
    """The AWS stack tests' invoke answers, from a provider in `region`."""
    def calls(token: str, args: dict) -> dict:
        if token == GET_REGION:
            return {"id": region, "name": region, "region": region, "endpoint": f"ec2.{region}.amazonaws.com",
                    "description": region}
        if token == aws_runs.GET_AVAILABILITY_ZONES:
            return {"id": region, "names": [f"{region}{z}" for z in "cab"], "zoneIds": [f"euw1-az{i}" for i in "312"],
                    "groupNames": [region] * 3, "state": args.get("state")}
        return aws_calls(token, args)
    return calls


def gcp_in(region: str):
    """The GKE stack tests' invoke answers, from a provider in `region` (its zones, its client config)."""
    def calls(token: str, args: dict) -> dict:
        if token == gcp_runs.GET_CLIENT_CONFIG:
            return {"accessToken": "t", "project": PROJECT, "region": region, "zone": f"{region}-a", "id": "client"}
        if token == gcp_runs.GET_ZONES:
            return {"names": [f"{region}-{z}" for z in "abc"], "project": args.get("project"),
                    "region": args.get("region")}
        return gcp_runs.provider_calls(token, args)
    return calls


def assert_all_on(result: ProgramResult, package: str, provider_name: str) -> None:
    """Every `package` resource (custom, or a remote component of a package built on it) and every `package`
    invoke goes through the one provider the caller made."""
    (mine,) = result.by_type(f"pulumi:providers:{package}")
    assert mine.name == provider_name
    objects = [r for r in result.registrations if r.type.startswith(f"{package}:") and r.custom]
    assert objects and all(r.provider == mine.urn for r in objects), [r.name for r in objects if r.provider != mine.urn]
    invokes = [provider for token, provider in result.invoke_providers if token.startswith(f"{package}:")]
    assert invokes and all(provider == mine.urn for provider in invokes), invokes


def test_the_aws_parts_compose_in_eu_west_1_on_the_users_network_and_provider():
    def program() -> None:
        mine = aws.Provider("mine", region=REGION, assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=ROLE)],
                            default_tags=aws.ProviderDefaultTagsArgs(tags={"team": "ml"}))
        on_mine = pulumi.ResourceOptions(provider=mine)
        vpc = aws.ec2.Vpc("net", cidr_block="10.1.0.0/16", opts=on_mine)
        subnets = [aws.ec2.Subnet(f"private-{zone}", vpc_id=vpc.id, cidr_block=f"10.1.{index}.0/24",
                                  availability_zone=f"{REGION}{zone}", opts=on_mine)
                   for index, zone in enumerate("ab")]
        subnet_ids = [subnet.id for subnet in subnets]
        cluster = components.EksCluster("research", components.EksClusterArgs(
            cluster_name="research", vpc_id=vpc.id, private_subnet_ids=subnet_ids, kubeconfig_role_arn=ROLE,
            api_public_access_cidrs=["203.0.113.7/32"]), opts=pulumi.ResourceOptions(providers={"aws": mine}))
        storage = components.EfsStorage("shared", components.EfsStorageArgs(
            cluster_name=cluster.cluster_name, oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer, vpc_id=vpc.id, subnet_ids=subnet_ids),
            opts=pulumi.ResourceOptions(providers=[mine, cluster.kubernetes_provider]))
        bucket = components.S3SnapshotBucket("snapshots", components.S3SnapshotBucketArgs(), opts=on_mine)
        platform = components.TrainingPlatform("platform", components.TrainingPlatformArgs(
            gpu=components.GpuNodes(gpus_per_node=cluster.gpus_per_node, node_selector=cluster.gpu_node_selector,
                                    tolerations=cluster.gpu_tolerations, accelerator=cluster.gpu_accelerator),
            bucket=components.Bucket(uri=bucket.uri), image_ref=IMAGE,
            shared_storage=components.SharedStorage(size=storage.size, storage_class_name="",
                                                    volume_name=storage.volume_name),
            job=components.Job(enabled=True)), opts=pulumi.ResourceOptions(provider=cluster.kubernetes_provider))
        pulumi.export("serviceAccount", platform.service_account_name)
        pulumi.export("securityGroup", cluster.cluster_security_group_id)
        pulumi.export("nodeRole", cluster.node_role_arn)

    result, stopped = run(program, "aws", calls=aws_in(REGION))
    assert not stopped, stopped
    assert_all_on(result, "aws", "mine")
    # pulumi-eks's components (remote: their children are not seen here) are handed the same provider.
    eks = [r for r in result.registrations if r.type.startswith("eks:")]
    assert eks and all(r.providers.get("aws") == result.one("pulumi:providers:aws").urn for r in eks)
    # The user's subnets (outputs) are the cluster's and the file system's: one mount target each.
    cluster = result.one("eks:index:Cluster")
    assert cluster.inputs["privateSubnetIds"] == ["private-a-id", "private-b-id"]
    # The kubeconfig (and so the cluster's Kubernetes provider) signs in as the provider's assumed role, the
    # cluster's creator: pulumi-eks uses the ambient identity otherwise (providerCredentialOpts).
    assert cluster.inputs["providerCredentialOpts"] == {"roleArn": ROLE}
    assert cluster.inputs["vpcId"] == "net-id"
    assert sorted(t.inputs["subnetId"] for t in result.by_type(aws_runs.MOUNT_TARGET)) == ["private-a-id",
                                                                                           "private-b-id"]
    autoscaler = next(r for r in result.by_type("kubernetes:helm.sh/v3:Release") if "autoscaler" in r.name)
    assert autoscaler.inputs["values"]["awsRegion"] == REGION
    # Every in-cluster object on the cluster's own Kubernetes provider: nothing made one from a kubeconfig.
    (kubernetes,) = result.by_type("pulumi:providers:kubernetes")
    assert all(r.provider == kubernetes.urn for r in result.registrations
               if r.type.startswith("kubernetes:") and r.custom)
    # The cluster's GPU placement reached the job: the GPU nodes' labels and taint, no Kueue (not asked).
    job = next(r for r in result.by_type("kubernetes:helm.sh/v3:Release") if r.name == "train")
    assert job.inputs["values"]["nodeSelector"] == dict(GPU_NODE_LABELS)
    assert job.inputs["values"]["tolerations"] == [dict(t) for t in GPU_TOLERATIONS]
    assert not [r for r in result.registrations if "kueue" in r.name]
    assert result.exports["serviceAccount"] == "trainstack-jobs"
    assert result.exports["securityGroup"] == aws_runs.CLUSTER_SECURITY_GROUP
    assert result.exports["nodeRole"].startswith("arn:aws:iam::")


def test_the_gcp_parts_compose_in_europe_west4_on_the_users_provider():
    def program() -> None:
        mine = gcp.Provider("mine", project=PROJECT, region=GCP_REGION, default_labels={"team": "ml"})
        on_mine = pulumi.ResourceOptions(provider=mine)
        cluster = components.GkeCluster("research", components.GkeClusterArgs(
            cluster_name="research", network="research-vpc", subnetwork="research-nodes", pods_range_name="pods",
            services_range_name="services", node_service_account_email=NODES_ACCOUNT), opts=on_mine)
        pool = components.GkeGpuNodePool("l4", components.GkeGpuNodePoolArgs(
            cluster_name=cluster.cluster_name, location=cluster.location, node_zone=cluster.node_zone,
            node_service_account_email=NODES_ACCOUNT, pool_name="l4",
            pool=components.GkeGpuPool(machine_type="g2-standard-8", max=2)), opts=on_mine)
        share = components.FilestoreShare("share", components.FilestoreShareArgs(
            location=cluster.node_zone, network="research-vpc", kubeconfig=cluster.kubeconfig,
            cluster_name=cluster.cluster_name), opts=on_mine)
        bucket = components.GcsSnapshotBucket("snapshots", components.GcsSnapshotBucketArgs(), opts=on_mine)
        components.TrainingPlatform("platform", components.TrainingPlatformArgs(
            kubeconfig=cluster.kubeconfig, cluster_name=cluster.cluster_name,
            gpu=components.GpuNodes(gpus_per_node=pool.gpus_per_node, node_selector=pool.node_selector,
                                    tolerations=pool.tolerations, accelerator=pool.accelerator),
            bucket=components.Bucket(uri=bucket.uri), image_ref=IMAGE,
            shared_storage=components.SharedStorage(size=share.size, storage_class_name="",
                                                    volume_name=share.volume_name),
            install_device_plugin=False, job=components.Job(enabled=True, queue=True)))

    result, stopped = run(program, calls=gcp_in(GCP_REGION))
    assert not stopped, stopped
    assert_all_on(result, "gcp", "mine")
    assert result.one("gcp:container/cluster:Cluster").inputs["location"].startswith(GCP_REGION)
    assert result.one("gcp:storage/bucket:Bucket").inputs["location"].lower() == GCP_REGION
    # Asked for, the queue is there, sized from the pool's GPUs.
    assert [r for r in result.registrations if r.name.startswith("platform-kueue")]


@pytest.mark.parametrize(("region", "given", "line"), [
    (None, False, "region: not set, and no aws provider is given. Fix: set the input region"),
    ("us-west-2", True, "region: us-west-2, but the given aws provider is in eu-west-1. Fix: remove the input region"),
])
def test_an_aws_part_without_a_region_or_with_another_than_its_providers_is_refused(region, given, line):
    def program() -> None:
        opts = pulumi.ResourceOptions(provider=aws.Provider("mine", region=REGION)) if given else None
        components.S3SnapshotBucket("snapshots", components.S3SnapshotBucketArgs(region=region), opts=opts)

    result, stopped = run(program, "aws", calls=aws_in(REGION))
    assert [str(error) for error in stopped] == [str(stopped[0])] and str(stopped[0]).startswith(line), stopped
    assert all(r.type == "pulumi:providers:aws" for r in result.registrations)


def test_a_bucket_outside_us_west_2_needs_no_zones():
    # Refused before: "availabilityZones: no availability zones for region eu-west-1", an input it has not.
    result, stopped = run(lambda: components.S3SnapshotBucket("snapshots", components.S3SnapshotBucketArgs(
        region=REGION)), "aws")
    assert not stopped, stopped
    assert result.one("pulumi:providers:aws").inputs["region"] == REGION


def test_a_kubernetes_part_without_a_kubeconfig_or_provider_is_refused():
    result, stopped = run(lambda: components.TrainingPlatform("platform", components.TrainingPlatformArgs(
        gpu=components.GpuNodes(gpus_per_node=1), bucket=components.Bucket(uri="s3://b"), image_ref=IMAGE)))
    assert len(stopped) == 1 and str(stopped[0]).startswith("kubeconfig: not set, and no kubernetes provider"), stopped
    assert result.registrations == []


def test_the_aws_stack_takes_the_users_provider_and_network_resources():
    # AwsStack.existingNetwork was plain: the user's own Vpc and Subnets (outputs) failed in a JSON round trip.
    def program() -> None:
        mine = aws.Provider("mine", region=REGION, assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=ROLE)])
        vpc = aws.ec2.Vpc("net", cidr_block="10.1.0.0/16", opts=pulumi.ResourceOptions(provider=mine))
        subnets = [aws.ec2.Subnet(f"private-{zone}", vpc_id=vpc.id, cidr_block=f"10.1.{index}.0/24",
                                  availability_zone=f"{REGION}{zone}", opts=pulumi.ResourceOptions(provider=mine))
                   for index, zone in enumerate("ab")]
        components.AwsStack("trainstack", components.AwsStackArgs(
            api_public_access_cidrs=["203.0.113.7/32"], job=components.Job(enabled=False),
            existing_network=components.AwsExistingNetwork(vpc_id=vpc.id,
                                                           private_subnet_ids=[s.id for s in subnets])),
            opts=pulumi.ResourceOptions(providers={"aws": mine}))

    result, stopped = run(program, "aws", calls=aws_in(REGION))
    assert not stopped, stopped
    assert_all_on(result, "aws", "mine")
    assert result.one("eks:index:Cluster").inputs["privateSubnetIds"] == ["private-a-id", "private-b-id"]
    assert not result.by_type("aws:ec2/vpc:Vpc")[1:]  # the user's VPC only: the stack made none


def test_the_gcp_stack_takes_the_users_provider_and_network_resources():
    def program() -> None:
        mine = gcp.Provider("mine", project=PROJECT, region=GCP_REGION)
        network = gcp.compute.Network("net", name="research-vpc", auto_create_subnetworks=False, opts=pulumi.ResourceOptions(provider=mine))
        subnetwork = gcp.compute.Subnetwork("nodes", name="research-nodes", network=network.name, ip_cidr_range="10.2.0.0/20",
                                            opts=pulumi.ResourceOptions(provider=mine))
        components.GcpStack("trainstack", components.GcpStackArgs(
            zone=f"{GCP_REGION}-a", job=components.Job(enabled=False),
            existing_network=components.GcpExistingNetwork(network=network.name, subnetwork=subnetwork.name,
                                                           pods_range_name="pods", services_range_name="services")),
            opts=pulumi.ResourceOptions(providers={"gcp": mine}))

    result, stopped = run(program, calls=gcp_in(GCP_REGION))
    assert not stopped, stopped
    assert_all_on(result, "gcp", "mine")
    cluster = result.one("gcp:container/cluster:Cluster")
    assert (cluster.inputs["network"], cluster.inputs["subnetwork"]) == ("research-vpc", "research-nodes")
    assert not result.by_type("gcp:compute/network:Network")[1:]  # the user's network only: the stack made none


def test_the_aws_stack_takes_its_zones_from_the_users_provider_in_any_region():
    # Refused before outside us-west-2 ("availabilityZones: no availability zones for region eu-west-1").
    def program() -> None:
        mine = aws.Provider("mine", region=REGION)
        components.AwsStack("trainstack", components.AwsStackArgs(
            api_public_access_cidrs=["203.0.113.7/32"], job=components.Job(enabled=False)),
            opts=pulumi.ResourceOptions(provider=mine))

    result, stopped = run(program, "aws", calls=aws_in(REGION))
    assert not stopped, stopped
    assert_all_on(result, "aws", "mine")
    subnets = result.by_type("aws:ec2/subnet:Subnet")
    assert sorted({s.inputs["availabilityZone"] for s in subnets}) == [f"{REGION}{z}" for z in "abc"]


def test_a_python_dict_may_spell_fields_as_the_schema_does_and_a_wrong_one_is_named():
    # Before: "GpuNodes has no field(s) ['nodeSelector'] (it has: [...])", no path, snake_case only.
    from trainstack.infra.config.loader import InputTypeError, from_inputs

    gpu = from_inputs(components.GpuNodes, {"gpusPerNode": 1, "nodeSelector": {"pool": "gpu"}})
    assert gpu == components.GpuNodes(gpus_per_node=1, node_selector={"pool": "gpu"})
    with pytest.raises(InputTypeError) as raised:
        from_inputs(components.TrainingPlatformArgs, {"gpu": {"gpusPerNode": 1, "gpuCount": 2}})
    assert str(raised.value).startswith("gpu.gpuCount: GpuNodes has no such field. Fix: use one of accelerator")


def test_a_subnet_of_another_vpc_is_named_by_the_parts_input():
    # Before: "trainstack:existingNetwork.privateSubnetIds: ...", a stack file's key the part does not have.
    def calls(token: str, args: dict) -> dict:
        if token == aws_runs.GET_SUBNET:
            return {"id": args["id"], "availabilityZone": f"{REGION}a", "vpcId": "vpc-other"}
        return aws_in(REGION)(token, args)

    result, stopped = run(lambda: components.EfsStorage("shared", components.EfsStorageArgs(
        region=REGION, cluster_name="research", oidc_provider_arn="arn:aws:iam::1:oidc-provider/x", oidc_issuer="x",
        kubeconfig="apiVersion: v1\n", vpc_id="vpc-0abc", subnet_ids=["subnet-a"])), "aws", calls=calls)
    assert [str(error) for error in stopped] == [
        "subnetIds: subnet-a is in vpc-other, not in vpc-0abc. Fix: list subnets of vpc-0abc"]
    assert not result.by_type(aws_runs.MOUNT_TARGET)


def test_the_aws_stack_leaves_out_an_opted_in_local_zone():
    # Before: the answer's us-west-2-lax-1a (an opted-in Local Zone, listed as available) sorted first and got
    # subnets. EC2 DescribeAvailabilityZones applies the opt-in-status filter; modelled here.
    local = "us-west-2-lax-1a"

    def calls(token: str, args: dict) -> dict:
        if token == aws_runs.GET_AVAILABILITY_ZONES:
            zones = {f"us-west-2{z}": "opt-in-not-required" for z in "abcd"} | {local: "opted-in"}
            for wanted in (f["values"] for f in args.get("filters") or () if f["name"] == "opt-in-status"):
                zones = {name: status for name, status in zones.items() if status in wanted}
            return {"id": "us-west-2", "names": list(zones), "zoneIds": [f"usw2-az{i}" for i in range(len(zones))],
                    "groupNames": list(zones), "state": args.get("state")}
        return aws_in("us-west-2")(token, args)

    def program() -> None:
        components.AwsStack("trainstack", components.AwsStackArgs(
            api_public_access_cidrs=["203.0.113.7/32"], job=components.Job(enabled=False)),
            opts=pulumi.ResourceOptions(provider=aws.Provider("mine", region="us-west-2")))

    result, stopped = run(program, "aws", calls=calls)
    assert not stopped, stopped
    zones = sorted({s.inputs["availabilityZone"] for s in result.by_type("aws:ec2/subnet:Subnet")})
    assert zones == [f"us-west-2{z}" for z in "abcd"]


def test_an_efa_group_on_the_users_subnets_is_refused_in_one_line_before_anything_is_made():
    # The EFA group's one subnet is picked by zone from the subnets the stack creates (docs/aws.md); with the
    # user's subnets (outputs, whose zones are unknown) it cannot be: one line naming both inputs.
    def program() -> None:
        mine = aws.Provider("mine", region="us-west-2")
        vpc = aws.ec2.Vpc("net", cidr_block="10.1.0.0/16", opts=pulumi.ResourceOptions(provider=mine))
        subnets = [aws.ec2.Subnet(f"private-{zone}", vpc_id=vpc.id, cidr_block=f"10.1.{index}.0/24",
                                  availability_zone=f"us-west-2{zone}", opts=pulumi.ResourceOptions(provider=mine))
                   for index, zone in enumerate("ab")]
        components.AwsStack("trainstack", components.AwsStackArgs(
            api_public_access_cidrs=["203.0.113.7/32"],
            existing_network=components.AwsExistingNetwork(vpc_id=vpc.id, private_subnet_ids=[s.id for s in subnets]),
            gpu_nodes=components.EksGpuNodes(instance_types=["p5.48xlarge"], efa=True, zone="us-west-2a",
                                             capacity_type="ON_DEMAND", min=0, max=2, disk_size_gb=200),
            job=components.Job(enabled=False)), opts=pulumi.ResourceOptions(provider=mine))

    result, stopped = run(program, "aws", calls=aws_in("us-west-2"))
    assert [str(error) for error in stopped] == [
        "gpuNodes.efa: not supported with existingNetwork yet (the EFA group's one subnet is chosen by zone from the "
        "subnets the stack creates). Fix: remove the input existingNetwork, or remove the input gpuNodes.efa"]
    assert not [r for r in result.registrations if r.type.startswith("trainstack:")]
