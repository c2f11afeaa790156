"""Every step of the EKS seed is present and wired, checked on the real __main__.py under mocks.

Config: Pulumi.aws.yaml itself, with the job switched on (`trainstack:job.enabled true`, phase two of
the documented flow) unless a test says otherwise. What cannot be checked here (the providers' own
validation, what pulumi-eks creates inside its components, AWS's answers) is listed in docs/aws.md ("How this is tested").
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json

import pytest

from tests.aws.stack_runs import (
    ACCESS_POINT,
    ACCOUNT,
    ADDON,
    AUTOSCALER,
    AWS_PROVIDER,
    BUCKET,
    BUCKET_ENCRYPTION,
    BUCKET_POLICY,
    BUCKET_VERSIONING,
    DEVICE_PLUGIN,
    DIGEST,
    ECR_PASSWORD,
    EKS_CLUSTER,
    FILE_SYSTEM,
    IMAGE,
    INGRESS_RULE,
    INTERNET_GATEWAY,
    JOB_ENABLED,
    K8S_PROVIDER,
    KUBECONFIG,
    LAUNCH_TEMPLATE,
    LOG_GROUP,
    MOUNT_TARGET,
    NAT_GATEWAY,
    NODE_GROUP,
    OIDC_ISSUER,
    OIDC_PROVIDER_ARN,
    PUBLIC_ACCESS_BLOCK,
    PV,
    PVC,
    RELEASE,
    REPOSITORY,
    ROLE_POLICY,
    ROLE_POLICY_ATTACHMENT,
    ROUTE,
    ROUTE_TABLE,
    ROUTE_TABLE_ASSOCIATION,
    SECURITY_GROUP,
    SUBNET,
    TENSORBOARD_DIGEST,
    TRAINING_JOB,
    VPC,
    VPC_ENDPOINT,
    CloudWatchAccount,
    ResourceAlreadyExistsException,
    config_with,
    run_main,
    stack_file_config,
)
from tests.pulumi_harness import ProgramResult, Registration
from tests.stack_runs import assert_tensorboard_runs_its_own_image
from trainstack.infra.aws.cluster import (
    ADMIN_VIEW_POLICY_ARN,
    GPU_NODE_LABELS,
    NODE_POLICY_ARNS,
    VIEW_POLICY_ARN,
)
from trainstack.infra.aws.cluster_autoscaler import DESCRIBE_ACTIONS, SCALE_ACTIONS
from trainstack.infra.aws.config import GPU_INSTANCE_FAMILIES
from trainstack.infra.aws.efs_storage import EFS_CSI_POLICY_ARN
from trainstack.infra.aws.snapshot_bucket import BUCKET_ACTIONS, OBJECT_ACTIONS
from trainstack.infra.core import versions

SEED_ZONES = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]


@pytest.fixture(scope="module")
def up() -> ProgramResult:
    return run_main(config_with(JOB_ENABLED))


def resource_id(registration: Registration) -> str:
    return f"{registration.name}-id"  # what the mocks answer for a created resource's ID


def role_arn(result: ProgramResult, role_name: str) -> str:
    role = result.one("aws:iam/role:Role", role_name)
    return f"arn:aws:iam::123456789012:role/{role.name}-8a9b0c1"


def trust_statement(result: ProgramResult, role_name: str) -> dict:
    policy = json.loads(result.one("aws:iam/role:Role", role_name).inputs["assumeRolePolicy"])
    assert policy["Version"] == "2012-10-17"
    (statement,) = policy["Statement"]
    return statement


def private_subnets(result: ProgramResult) -> list[Registration]:
    return [s for s in result.by_type(SUBNET) if "-private-" in s.name]


# --- network ------------------------------------------------------------------------------------------


def test_vpc_spans_the_seed_zones_with_public_and_private_subnets(up):
    (vpc,) = up.by_type(VPC)
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True and vpc.inputs["enableDnsSupport"] is True
    public = [s for s in up.by_type(SUBNET) if "-public-" in s.name]
    assert sorted(s.inputs["availabilityZone"] for s in public) == SEED_ZONES
    assert sorted(s.inputs["availabilityZone"] for s in private_subnets(up)) == SEED_ZONES
    blocks = [ipaddress.ip_network(s.inputs["cidrBlock"]) for s in up.by_type(SUBNET)]
    assert all(b.subnet_of(ipaddress.ip_network("10.0.0.0/16")) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:])
    assert not any(s.inputs["mapPublicIpOnLaunch"] for s in up.by_type(SUBNET))


def test_one_nat_gateway_by_default_and_private_subnets_route_through_it(up):
    (nat,) = up.by_type(NAT_GATEWAY)
    (gateway,) = up.by_type(INTERNET_GATEWAY)
    assert nat.inputs["subnetId"] == "trainstack-network-public-us-west-2a-id"
    assert gateway.urn in nat.dependencies  # created after, deleted before the internet gateway
    nat_routes = [r for r in up.by_type(ROUTE) if r.inputs.get("natGatewayId")]
    assert [r.inputs["destinationCidrBlock"] for r in nat_routes] == ["0.0.0.0/0"]
    (private_table,) = [t for t in up.by_type(ROUTE_TABLE) if "-private-" in t.name]
    associations = {a.inputs["subnetId"]: a.inputs["routeTableId"] for a in up.by_type(ROUTE_TABLE_ASSOCIATION)}
    for subnet in private_subnets(up):
        assert associations[resource_id(subnet)] == resource_id(private_table)


def test_nat_gateway_per_zone_when_configured():
    result = run_main(config_with({**JOB_ENABLED, "trainstack:natGatewayPerZone": True}))

    assert sorted(n.inputs["subnetId"] for n in result.by_type(NAT_GATEWAY)) == [
        f"trainstack-network-public-{zone}-id" for zone in SEED_ZONES]
    assert len([t for t in result.by_type(ROUTE_TABLE) if "-private-" in t.name]) == 4


def test_s3_traffic_skips_the_nat_gateway(up):
    (endpoint,) = up.by_type(VPC_ENDPOINT)
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-west-2.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    private_tables = [resource_id(t) for t in up.by_type(ROUTE_TABLE) if "-private-" in t.name]
    assert endpoint.inputs["routeTableIds"] == private_tables


def test_existing_vpc_is_used_as_is_and_its_cidr_looked_up():
    # Two private subnets in us-west-2a: EFS takes one mount target per zone, the nodes use all three.
    existing = {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-a", "subnet-a2", "subnet-b"],
                "publicSubnetIds": ["subnet-p"]}
    result = run_main(config_with({**JOB_ENABLED, "trainstack:existingNetwork": existing}))

    assert [r for r in result.registrations if r.type.startswith("aws:ec2/")
            and r.type != LAUNCH_TEMPLATE and r.type != SECURITY_GROUP] == []
    assert ("aws:ec2/getVpc:getVpc", {"id": "vpc-0abc"}) in result.invokes
    (rule,) = result.by_type(INGRESS_RULE)
    assert rule.inputs["cidrIpv4"] == "172.31.0.0/16"  # the looked-up CIDR, not one copied by hand
    assert {m.name: m.inputs["subnetId"] for m in result.by_type(MOUNT_TARGET)} == {
        "trainstack-efs-mount-us-west-2a": "subnet-a", "trainstack-efs-mount-us-west-2b": "subnet-b"}
    cluster = result.one(EKS_CLUSTER)
    assert cluster.inputs["vpcId"] == "vpc-0abc"
    assert cluster.inputs["privateSubnetIds"] == ["subnet-a", "subnet-a2", "subnet-b"]
    assert result.one(NODE_GROUP, "trainstack-eks-gpu").inputs["subnetIds"] == ["subnet-a", "subnet-a2", "subnet-b"]


# --- cluster and nodes --------------------------------------------------------------------------------


def test_cluster_uses_pinned_version_api_access_entries_and_an_oidc_provider(up):
    cluster = up.one(EKS_CLUSTER)
    assert cluster.remote  # pulumi-eks: its children (the OIDC provider itself) exist only on `pulumi up`
    assert cluster.inputs["name"] == "trainstack-aws"
    assert cluster.inputs["version"] == versions.EKS_KUBERNETES_VERSION
    assert cluster.inputs["createOidcProvider"] is True
    assert cluster.inputs["authenticationMode"] == "API"
    assert cluster.inputs["skipDefaultNodeGroup"] is True
    assert cluster.inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    assert cluster.inputs["nodeAssociatePublicIpAddress"] is False
    assert cluster.inputs["vpcCniOptions"]["enableNetworkPolicy"] is True  # the chart's NetworkPolicy holds
    assert cluster.inputs["privateSubnetIds"] == [resource_id(s) for s in private_subnets(up)]


def test_cluster_admins_get_access_entries_keyed_by_arn():
    admin, ops = "arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:user/ops/bob"
    entries = run_main(config_with({"trainstack:clusterAdmins": [admin, ops]})).one(EKS_CLUSTER).inputs[
        "accessEntries"]
    reordered = run_main(config_with({"trainstack:clusterAdmins": [ops, admin]})).one(EKS_CLUSTER).inputs[
        "accessEntries"]

    cluster_admin = {"cluster-admin": {
        "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        "accessScope": {"type": "cluster"},
    }}
    assert entries == {
        "admin-123456789012-role-Admin": {"principalArn": admin, "accessPolicies": cluster_admin},
        "admin-123456789012-user-ops-bob": {"principalArn": ops, "accessPolicies": cluster_admin},
    }
    assert reordered == entries  # same names, nothing replaced


def test_preview_role_reads_the_cluster_and_only_release_namespaces_secrets():
    preview_role = "arn:aws:iam::123456789012:role/github-preview"
    result = run_main(config_with({**JOB_ENABLED, "trainstack:previewRoleArn": preview_role}))
    entries = result.one(EKS_CLUSTER).inputs["accessEntries"]

    assert entries == {"preview-123456789012-role-github-preview": {"principalArn": preview_role, "accessPolicies": {
        "view": {"policyArn": VIEW_POLICY_ARN, "accessScope": {"type": "cluster"}},
        # Helm keeps each release's state in Secrets of the release's namespace.
        "release-state": {"policyArn": ADMIN_VIEW_POLICY_ARN, "accessScope": {
            "type": "namespace", "namespaces": sorted(r.inputs["namespace"] for r in result.by_type(RELEASE))}},
    }}}
    assert sorted(entries["preview-123456789012-role-github-preview"]["accessPolicies"]["release-state"][
        "accessScope"]["namespaces"]) == ["cluster-autoscaler", "default", "kueue-system", "nvidia-device-plugin"]
    assert "ClusterAdmin" not in json.dumps(entries) and "EditPolicy" not in json.dumps(entries)


def test_api_endpoint_is_limited_to_the_listed_addresses(up):
    cluster = up.one(EKS_CLUSTER).inputs
    assert cluster["endpointPublicAccess"] is True and cluster["endpointPrivateAccess"] is True
    assert cluster["publicAccessCidrs"] == ["203.0.113.7/32"]


def test_private_api_endpoint():
    cluster = run_main(config_with({"trainstack:apiEndpoint": "private"},
                                   remove=("trainstack:apiPublicAccessCidrs",))).one(EKS_CLUSTER).inputs
    assert cluster["endpointPublicAccess"] is False and cluster["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in cluster


def test_control_plane_audit_logs_go_to_a_log_group_the_stack_owns(up):
    cluster = up.one(EKS_CLUSTER)
    assert cluster.inputs["enabledClusterLogTypes"] == ["audit", "authenticator"]
    log_group = up.one(LOG_GROUP)
    assert log_group.inputs["name"] == "/aws/eks/trainstack-aws/cluster"  # where EKS writes
    assert log_group.inputs["retentionInDays"] == 90
    assert log_group.urn in cluster.dependencies  # exists before EKS writes to it; destroy removes it
    assert not log_group.retain_on_delete


def test_no_control_plane_logs_no_log_group():
    result = run_main(config_with({"trainstack:controlPlaneLogs": []}))
    assert "enabledClusterLogTypes" not in result.one(EKS_CLUSTER).inputs
    assert result.by_type(LOG_GROUP) == []


def test_gpu_node_group_is_managed_spot_nvidia_tainted_and_labelled(up):
    gpu = up.one(NODE_GROUP, "trainstack-eks-gpu")
    assert gpu.inputs["capacityType"] == "SPOT"
    # Several spot pools, each with one GPU (capacity diversification).
    assert gpu.inputs["instanceTypes"] == ["g4dn.xlarge", "g5.xlarge", "g6.xlarge"]
    assert {GPU_INSTANCE_FAMILIES[t.split(".")[0]][t.split(".")[1]] for t in gpu.inputs["instanceTypes"]} == {1}
    assert all(t.split(".")[0] in GPU_INSTANCE_FAMILIES for t in gpu.inputs["instanceTypes"])
    assert gpu.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu.inputs["version"] == versions.EKS_KUBERNETES_VERSION
    assert gpu.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert gpu.inputs["labels"] == GPU_NODE_LABELS
    # The autoscaler grows it for the job's pending pods; `pulumi up` never resets what it set.
    assert gpu.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    assert gpu.inputs["ignoreScalingChanges"] is True
    assert gpu.inputs["subnetIds"] == [resource_id(s) for s in private_subnets(up)]
    assert gpu.inputs["cluster"] == up.one(EKS_CLUSTER).urn


def test_gpu_nodes_scale_to_zero_while_no_job_runs():
    shipped = run_main()  # Pulumi.aws.yaml as it is: job off

    assert shipped.one(NODE_GROUP, "trainstack-eks-gpu").inputs["scalingConfig"] == {
        "minSize": 0, "desiredSize": 0, "maxSize": 2}
    assert shipped.by_type(TRAINING_JOB) == []
    assert shipped.exports["enableJobCommand"] == (
        "pulumi config set --path trainstack:job.enabled true && pulumi up")


def test_without_the_autoscaler_pulumi_up_sizes_the_gpu_group_for_the_job():
    result = run_main(config_with({**JOB_ENABLED, "trainstack:clusterAutoscaler": False}))

    gpu = result.one(NODE_GROUP, "trainstack-eks-gpu").inputs
    assert gpu["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 2}
    assert gpu["ignoreScalingChanges"] is False
    assert result.one(NODE_GROUP, "trainstack-eks-system").inputs["ignoreScalingChanges"] is False
    assert result.by_type(AUTOSCALER) == []


# --- cluster autoscaler ----------------------------------------------------------------------------------


def test_autoscaler_is_installed_pinned_on_the_system_nodes_and_discovers_this_cluster(up):
    release = up.one(RELEASE, "trainstack-autoscaler")
    assert (release.inputs["chart"], release.inputs["version"]) == (
        versions.CLUSTER_AUTOSCALER_CHART.chart, versions.CLUSTER_AUTOSCALER_CHART.version)
    assert release.inputs["repositoryOpts"] == {"repo": versions.CLUSTER_AUTOSCALER_CHART.repo}
    values = release.inputs["values"]
    assert values["autoDiscovery"] == {"clusterName": "trainstack-aws"}
    assert values["awsRegion"] == "us-west-2"
    assert values["image"]["tag"] == versions.CLUSTER_AUTOSCALER_IMAGE_TAGS[versions.EKS_KUBERNETES_VERSION]
    assert values["nodeSelector"] == up.one(NODE_GROUP, "trainstack-eks-system").inputs["labels"]
    assert values["extraArgs"]["scale-down-unneeded-time"] == "10m"  # README: how long scale-down takes
    assert values["extraArgs"]["skip-nodes-with-local-storage"] == "true"  # a running trainer is never evicted
    assert values["containerSecurityContext"]["allowPrivilegeEscalation"] is False
    assert values["rbac"]["serviceAccount"] == {
        "name": "cluster-autoscaler",
        "annotations": {"eks.amazonaws.com/role-arn": role_arn(up, "trainstack-autoscaler-role-role")}}
    # Runs once the groups exist, and is removed before them.
    groups = {g.urn for g in up.by_type(NODE_GROUP)}
    assert groups <= set(release.dependencies)


def test_autoscaler_owns_both_group_sizes_and_the_gpu_group_starts_at_zero(up):
    for group in up.by_type(NODE_GROUP):
        assert group.inputs["ignoreScalingChanges"] is True
    assert up.one(NODE_GROUP, "trainstack-eks-gpu").inputs["scalingConfig"]["minSize"] == 0
    # The autoscaler's GPU label: a new GPU node counts as not ready until it advertises its GPUs.
    assert up.one(NODE_GROUP, "trainstack-eks-gpu").inputs["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia"


def test_every_kubernetes_version_we_support_has_an_autoscaler_image():
    assert set(versions.CLUSTER_AUTOSCALER_IMAGE_TAGS) == set(versions.EKS_SUPPORTED_KUBERNETES_VERSIONS)
    for minor, tag in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS.items():
        assert tag.startswith(f"v{minor}.")


def test_autoscaler_role_trusts_its_service_account_and_scales_only_this_clusters_groups(up):
    statement = trust_statement(up, "trainstack-autoscaler-role-role")
    assert statement["Condition"]["StringEquals"][f"{OIDC_ISSUER}:sub"] == (
        "system:serviceaccount:cluster-autoscaler:cluster-autoscaler")
    (policy,) = [p for p in up.by_type(ROLE_POLICY) if p.inputs["role"] == "trainstack-autoscaler-role-role-8a9b0c1"]
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert set(statements["Discover"]["Action"]) == set(DESCRIBE_ACTIONS)
    assert not [a for a in DESCRIBE_ACTIONS if not a.split(":")[1].startswith(("Describe", "Get"))]
    scale = statements["ScaleThisClustersGroups"]
    assert set(scale["Action"]) == set(SCALE_ACTIONS)
    # EKS tags every managed node group's Auto Scaling group with these two (auto-discovery).
    assert scale["Condition"] == {"StringEquals": {
        "aws:ResourceTag/k8s.io/cluster-autoscaler/trainstack-aws": "owned",
        "aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true"}}
    assert statements["ReadThisClustersNodeGroups"] == {
        "Sid": "ReadThisClustersNodeGroups", "Effect": "Allow", "Action": "eks:DescribeNodegroup",
        "Resource": f"arn:aws:eks:us-west-2:{ACCOUNT}:nodegroup/trainstack-aws/*/*"}
    assert len(statements) == 3


def test_system_node_group_is_small_and_on_demand(up):
    system = up.one(NODE_GROUP, "trainstack-eks-system")
    assert system.inputs["capacityType"] == "ON_DEMAND"
    assert system.inputs["instanceTypes"] == ["t3.medium"]
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert system.inputs["scalingConfig"]["minSize"] >= 1  # the EFS controller and CoreDNS live here
    assert "taints" not in system.inputs


@pytest.mark.parametrize("group", ["gpu", "system"])
def test_nodes_require_imdsv2_and_encrypt_their_disk(up, group):
    node_group = up.one(NODE_GROUP, f"trainstack-eks-{group}")
    template = up.one(LAUNCH_TEMPLATE, f"trainstack-eks-{group}")
    assert node_group.inputs["launchTemplate"] == {"id": resource_id(template), "version": "1"}
    assert template.inputs["metadataOptions"]["httpTokens"] == "required"
    # Containers off the host network cannot reach the node role through instance metadata.
    assert template.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (disk,) = template.inputs["blockDeviceMappings"]
    assert disk["ebs"]["encrypted"] == "true"
    assert disk["ebs"]["volumeSize"] == (160 if group == "gpu" else 20)  # Pulumi.aws.yaml (issue 30.18: the cache fits)
    # A launch template owns disk size and SSH key; EKS rejects them on the node group as well.
    assert "diskSize" not in node_group.inputs and "remoteAccess" not in node_group.inputs


def test_ssh_key_goes_into_the_gpu_launch_template():
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleExampleExampleExampleExampleExample user@host"
    result = run_main(config_with({"trainstack:gpuNodes": {"sshPublicKey": key}}))

    (key_pair,) = result.by_type("aws:ec2/keyPair:KeyPair")
    assert key_pair.inputs["publicKey"] == key
    assert result.one(LAUNCH_TEMPLATE, "trainstack-eks-gpu").inputs["keyName"] == f"{key_pair.name}-2d3e4f5"
    assert "keyName" not in result.one(LAUNCH_TEMPLATE, "trainstack-eks-system").inputs


def test_node_role_has_the_worker_policies_before_nodes_use_it(up):
    node_role = up.one("aws:iam/role:Role", "trainstack-eks-node")
    trust = json.loads(node_role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "ec2.amazonaws.com"}
    attachments = [a for a in up.by_type(ROLE_POLICY_ATTACHMENT) if a.inputs["role"] == f"{node_role.name}-8a9b0c1"]
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(NODE_POLICY_ARNS)
    for group in up.by_type(NODE_GROUP):
        assert group.inputs["nodeRoleArn"] == role_arn(up, "trainstack-eks-node")
        assert {a.urn for a in attachments} <= set(group.dependencies)


# --- IRSA ----------------------------------------------------------------------------------------------


def test_efs_csi_role_trusts_the_controller_and_the_node_plugin(up):
    # As AWS's add-on page has it: StringLike efs-csi-*, so efs-csi-node-sa may assume the role too.
    statement = trust_statement(up, "trainstack-efs-csi-driver-role")
    assert statement == {
        "Effect": "Allow",
        "Principal": {"Federated": OIDC_PROVIDER_ARN},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {
            "StringLike": {f"{OIDC_ISSUER}:sub": "system:serviceaccount:kube-system:efs-csi-*"},
            "StringEquals": {f"{OIDC_ISSUER}:aud": "sts.amazonaws.com"},
        },
    }
    pattern = statement["Condition"]["StringLike"][f"{OIDC_ISSUER}:sub"]
    for account in ("efs-csi-controller-sa", "efs-csi-node-sa"):
        assert fnmatch.fnmatchcase(f"system:serviceaccount:kube-system:{account}", pattern)
    assert not fnmatch.fnmatchcase("system:serviceaccount:default:efs-csi-node-sa", pattern)
    (attachment,) = [a for a in up.by_type(ROLE_POLICY_ATTACHMENT) if a.name.startswith("trainstack-efs-csi")]
    assert attachment.inputs["policyArn"] == EFS_CSI_POLICY_ARN


def test_job_role_trusts_the_job_service_account_and_reaches_only_the_bucket(up):
    release = up.one(RELEASE, "train")
    service_account = release.inputs["values"]["serviceAccount"]["name"]
    statement = trust_statement(up, "trainstack-job-role")
    assert statement["Principal"] == {"Federated": OIDC_PROVIDER_ARN}
    # And the stack job's earlier account, for jobs started before the shared one (test_job_role_trust.py).
    assert statement["Condition"] == {"StringEquals": {
        f"{OIDC_ISSUER}:sub": [f"system:serviceaccount:{release.inputs['namespace']}:{service_account}",
                               f"system:serviceaccount:{release.inputs['namespace']}:train"],
        f"{OIDC_ISSUER}:aud": "sts.amazonaws.com",
    }}

    bucket_arn = "arn:aws:s3:::trainstack-snapshots-0a1b2c3"
    (policy,) = [p for p in up.by_type(ROLE_POLICY) if p.inputs["role"] == "trainstack-job-role-8a9b0c1"]
    grants = {(s["Resource"], tuple(sorted(s["Action"]))) for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert grants == {(bucket_arn, tuple(sorted(BUCKET_ACTIONS))), (f"{bucket_arn}/*", tuple(sorted(OBJECT_ACTIONS)))}
    assert not [a for a in up.by_type(ROLE_POLICY_ATTACHMENT) if a.inputs["role"] == "trainstack-job-role-8a9b0c1"]


# --- EFS -----------------------------------------------------------------------------------------------


def test_efs_csi_addon_uses_its_role_and_waits_for_a_node_group(up):
    addon = up.one(ADDON)
    assert addon.inputs["addonName"] == "aws-efs-csi-driver"
    assert addon.inputs["addonVersion"] == versions.EFS_CSI_ADDON_VERSION
    assert addon.inputs["clusterName"] == "trainstack-aws"
    assert addon.inputs["serviceAccountRoleArn"] == role_arn(up, "trainstack-efs-csi-driver-role")
    assert up.one(NODE_GROUP, "trainstack-eks-system").urn in addon.dependencies


def test_file_system_is_encrypted_with_one_mount_target_per_zone(up):
    file_system = up.one(FILE_SYSTEM)
    assert file_system.inputs["encrypted"] is True
    security_group = up.one(SECURITY_GROUP)
    mount_targets = up.by_type(MOUNT_TARGET)
    assert sorted(m.inputs["subnetId"] for m in mount_targets) == sorted(resource_id(s) for s in private_subnets(up))
    assert sorted(m.name for m in mount_targets) == [f"trainstack-efs-mount-{zone}" for zone in SEED_ZONES]
    for mount_target in mount_targets:
        assert mount_target.inputs["fileSystemId"] == resource_id(file_system)
        assert mount_target.inputs["securityGroups"] == [resource_id(security_group)]


def test_nfs_is_open_from_the_vpc_cidr_and_nothing_wider(up):
    security_group = up.one(SECURITY_GROUP)
    assert "ingress" not in security_group.inputs and "egress" not in security_group.inputs
    (rule,) = up.by_type(INGRESS_RULE)
    assert rule.inputs["securityGroupId"] == resource_id(security_group)
    assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 2049, 2049)
    assert rule.inputs["cidrIpv4"] == up.one(VPC).inputs["cidrBlock"] == "10.0.0.0/16"
    # Nothing anywhere in the stack opens a port to the internet.
    assert not [r for r in up.registrations if "0.0.0.0/0" in json.dumps(r.inputs) and r.type != ROUTE
                and r.type != EKS_CLUSTER]


def test_access_point_is_the_trainers_directory_owned_by_the_charts_user(up):
    access_point = up.one(ACCESS_POINT)
    assert access_point.inputs["fileSystemId"] == resource_id(up.one(FILE_SYSTEM))
    assert access_point.inputs["posixUser"] == {"uid": 10001, "gid": 10001}
    assert access_point.inputs["rootDirectory"] == {"path": "/trainstack/default/train-shared", "creationInfo": {
        "ownerUid": 10001, "ownerGid": 10001, "permissions": "750"}}
    values = up.one(RELEASE, "train").inputs["values"]
    # The chart's defaults: what the pods run as (not overridden by the stack).
    assert "securityContext" not in values


def test_volume_is_static_reserved_for_the_claim_and_mounts_the_access_point(up):
    volume = up.one(PV)
    claim = up.one(PVC)
    spec = volume.inputs["spec"]
    assert spec["csi"] == {"driver": "efs.csi.aws.com",
                           "volumeHandle": f"{resource_id(up.one(FILE_SYSTEM))}::{resource_id(up.one(ACCESS_POINT))}"}
    assert spec["storageClassName"] == "" and spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["mountOptions"] == ["tls"]
    assert spec["claimRef"] == {"namespace": "default", "name": claim.inputs["metadata"]["name"]}
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert up.one(ACCESS_POINT).urn in volume.dependencies and up.one(ADDON).urn in volume.dependencies


def test_claim_binds_to_the_volume_after_mount_targets_and_driver(up):
    claim = up.one(PVC)
    spec = claim.inputs["spec"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["storageClassName"] == ""  # no dynamic provisioning: nothing the driver must clean up
    assert spec["volumeName"] == up.one(PV).inputs["metadata"]["name"]
    required = {up.one(PV).urn, up.one(ADDON).urn, *(m.urn for m in up.by_type(MOUNT_TARGET))}
    assert required <= set(claim.dependencies)
    assert "kubernetes:storage.k8s.io/v1:StorageClass" not in {r.type for r in up.registrations}


def test_job_in_its_own_namespace_gets_it_created_first():
    result = run_main(config_with({"trainstack:job": {"enabled": True, "namespace": "training"}}))

    namespace = result.one("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["name"] == "training"
    assert namespace.urn in result.one(PVC).dependencies
    assert result.one(PV).inputs["spec"]["claimRef"] == {"namespace": "training", "name": "train-shared"}
    assert result.one(RELEASE, "train").inputs["namespace"] == "training"
    assert "system:serviceaccount:training:train" in result.one(
        "aws:iam/role:Role", "trainstack-job-role").inputs["assumeRolePolicy"]


# --- snapshot bucket and registry ------------------------------------------------------------------------


def bucket_children(result: ProgramResult) -> list[Registration]:
    bucket = result.one(BUCKET)
    return [r for r in result.registrations if r.type.startswith("aws:s3/") and r.urn != bucket.urn]


def test_bucket_is_private_encrypted_versioned_and_tls_only(up):
    bucket = up.one(BUCKET)
    bucket_id = resource_id(bucket)
    block = up.one(PUBLIC_ACCESS_BLOCK)
    assert block.inputs == {**block.inputs, "bucket": bucket_id, "blockPublicAcls": True, "blockPublicPolicy": True,
                            "ignorePublicAcls": True, "restrictPublicBuckets": True}
    encryption = up.one(BUCKET_ENCRYPTION)
    assert encryption.inputs["bucket"] == bucket_id
    assert encryption.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    versioning = up.one(BUCKET_VERSIONING)
    assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"
    assert versioning.inputs["bucket"] == bucket_id
    (deny,) = json.loads(up.one(BUCKET_POLICY).inputs["policy"])["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert block.urn in up.one(BUCKET_POLICY).dependencies


def test_bucket_and_its_guard_rails_are_retained_on_destroy(up):
    bucket = up.one(BUCKET)
    assert bucket.retain_on_delete is True
    assert bucket.inputs["forceDestroy"] is False
    children = bucket_children(up)
    assert len(children) == 6
    assert all(child.retain_on_delete for child in children)
    # Nothing else is retained: destroy removes everything else that costs money.
    assert {r.urn for r in up.registrations if r.retain_on_delete} == {bucket.urn, *(c.urn for c in children)}


def test_bucket_is_deleted_with_its_objects_only_when_asked():
    result = run_main(config_with({"trainstack:deleteBucketOnDestroy": True}))

    bucket = result.one(BUCKET)
    assert bucket.retain_on_delete is False
    assert bucket.inputs["forceDestroy"] is True
    assert not any(r.retain_on_delete for r in result.registrations)


def test_registry_scans_on_push_encrypts_and_goes_with_destroy(up):
    repository = up.one(REPOSITORY)
    assert repository.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repository.inputs["encryptionConfigurations"] == [{"encryptionType": "AES256"}]
    assert repository.inputs["forceDelete"] is True


def test_image_is_pushed_to_the_registry_with_a_secret_token(up):
    image = up.one(IMAGE, "trainstack-image")
    repository_url = up.exports["registryUrl"]
    assert image.inputs["push"] is True
    assert image.inputs["tags"] == [f"{repository_url}:latest"]
    (registry,) = image.inputs["registries"]
    assert registry["address"] == repository_url.split("/")[0]
    assert registry["password"] == ECR_PASSWORD and image.is_secret("registries[0].password")
    assert ("aws:ecr/getAuthorizationToken:getAuthorizationToken", {"registryId": "123456789012"}) in up.invokes


# --- the job ---------------------------------------------------------------------------------------------


def test_job_gets_the_image_digest_the_claim_and_the_service_account_role(up):
    release = up.one(RELEASE, "train")
    values = release.inputs["values"]
    assert values["image"] == {"repository": up.exports["registryUrl"], "digest": DIGEST, "tag": ""}
    assert values["storage"]["pvc"] == up.one(PVC).inputs["metadata"]["name"]
    # The job runs as the stack's own ServiceAccount, the one the job role trusts (tests/jobs/test_identity.py).
    assert values["serviceAccount"] == {"create": False, "name": "trainstack-jobs", "annotations": {}}
    account = up.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]
    assert account["annotations"] == {"eks.amazonaws.com/role-arn": role_arn(up, "trainstack-job-role")}
    job = stack_file_config()["trainstack:job"]
    assert values["job"]["pods"] == {"min": job["podsMin"], "max": job["podsMax"]}
    assert values["job"]["procsPerPod"] == job["procsPerPod"]
    assert values["resources"]["gpusPerPod"] == job["gpusPerPod"]
    # Checkpoints and the export also go to the kept bucket as they are written.
    assert values["train"] == {**job["train"], "data": "/mnt/cache",
                               "extraArgs": ["--snapshot-uri", "s3://trainstack-snapshots-0a1b2c3/runs/train"]}
    assert values["storage"]["cache"] == {"enabled": True, "sourceUri": "s3://trainstack-snapshots-0a1b2c3/data/"}


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_wandb_keys_become_trainer_flags_and_the_key_comes_from_the_users_secret(mode):
    from tests.workloads.chart import parse_launch, render, trainer

    wandb = [{"name": "WANDB_API_KEY", "secretName": "wandb", "key": "api-key"}]
    job = {"enabled": True, "train": {"wandbProject": "gpt2", "wandbEntity": "team", "wandbMode": mode},
           "secretEnv": wandb if mode == "online" else []}
    values = run_main(config_with({"trainstack:job": job})).one(RELEASE, "train").inputs["values"]
    assert values["secretEnv"] == job["secretEnv"]  # a reference: no key value passes through Pulumi

    # What the pods get, rendered by the chart from the Release's values.
    container = trainer(render(values, release="train"))
    argv = parse_launch(container).training_script_args
    for flag, value in (("--wandb-project", "gpt2"), ("--wandb-entity", "team"), ("--wandb-mode", mode)):
        assert argv[argv.index(flag) + 1] == value
    env = [e for e in container["env"] if e["name"] == "WANDB_API_KEY"]
    assert env == ([{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}]
                   if mode == "online" else [])


def test_tensorboard_runs_its_own_small_image_built_by_the_same_program(up):
    assert_tensorboard_runs_its_own_image(up, TENSORBOARD_DIGEST)


def test_no_tensorboard_no_tensorboard_image():
    result = run_main(config_with({"trainstack:job": {"enabled": True, "tensorboard": False}}))
    assert [i.name for i in result.by_type(IMAGE)] == ["trainstack-image"]


def test_job_lands_on_gpu_nodes_only(up):
    values = up.one(RELEASE, "train").inputs["values"]
    gpu = up.one(NODE_GROUP, "trainstack-eks-gpu").inputs
    assert values["nodeSelector"] == gpu["labels"]
    (taint,) = gpu["taints"]
    assert values["tolerations"] == [{"key": taint["key"], "operator": "Equal", "value": taint["value"],
                                      "effect": "NoSchedule"}]


def test_job_waits_for_the_claim_the_device_plugin_and_the_image(up):
    release = up.one(RELEASE, "train")
    plugin = up.one(RELEASE, "trainstack-nvidia-device-plugin")
    assert {up.one(PVC).urn, plugin.urn, up.one(IMAGE, "trainstack-image").urn} <= set(release.dependencies)
    assert up.one(DEVICE_PLUGIN).urn != plugin.urn
    assert plugin.inputs["values"]["nodeSelector"] == GPU_NODE_LABELS


# --- providers, secrets, outputs ---------------------------------------------------------------------------


def test_every_kubernetes_object_uses_the_clusters_provider(up):
    (provider,) = up.by_type(K8S_PROVIDER)
    assert provider.inputs["kubeconfig"] == KUBECONFIG and provider.is_secret("kubeconfig")
    assert provider.inputs["clusterIdentifier"] == "trainstack-aws"
    kubernetes_objects = [r for r in up.registrations if r.type.startswith("kubernetes:")]
    # PV, PVC, the jobs' ServiceAccount, the device plugin, autoscaler, Kueue and job releases, the
    # GPU pool's ResourceFlavor, ClusterQueue and LocalQueue, and the jobs' owner (infra/job_owner.py)
    assert len(kubernetes_objects) == 11
    assert {r.provider for r in kubernetes_objects} == {provider.urn}


def test_every_aws_resource_uses_the_explicit_aws_provider(up):
    (provider,) = up.by_type(AWS_PROVIDER)
    assert provider.inputs["region"] == "us-west-2"
    aws_resources = [r for r in up.registrations if r.type.startswith("aws:")]
    assert {r.provider for r in aws_resources} == {provider.urn}
    for component in up.by_type(EKS_CLUSTER) + up.by_type(NODE_GROUP):
        assert component.providers["aws"] == provider.urn


def test_no_resource_falls_back_to_a_default_provider(up):
    custom = [r for r in up.registrations if r.custom and not r.type.startswith("pulumi:providers:")]
    assert custom and [r.name for r in custom if r.provider is None] == []


def test_no_load_balancer_anywhere(up):
    assert "LoadBalancer" not in json.dumps([r.inputs for r in up.registrations])


def test_outputs_name_the_cluster_registry_image_bucket_job_and_the_commands_to_follow_it(up):
    exports = up.exports
    assert exports["clusterName"] == "trainstack-aws"
    assert exports["kubeconfig"] == KUBECONFIG and "kubeconfig" in up.secret_exports
    assert exports["imageRef"] == f"{exports['registryUrl']}@{DIGEST}"
    assert exports["bucketName"] == "trainstack-snapshots-0a1b2c3"
    assert (exports["jobName"], exports["jobNamespace"]) == ("train", "default")
    trainer = "app.kubernetes.io/instance=train,app.kubernetes.io/component=trainer"
    assert exports["kubeconfigCommand"] == "aws eks update-kubeconfig --region us-west-2 --name trainstack-aws"
    assert exports["statusCommand"] == (f"kubectl get job/train -n default -o wide && "
                                        f"kubectl get pods -n default -l {trainer} -o wide")
    assert exports["eventsCommand"] == ("kubectl describe job/train -n default && "
                                        "kubectl get events -n default --sort-by=.lastTimestamp")
    assert exports["logsCommand"] == (f"kubectl logs -f -n default -l {trainer} -c trainer --prefix "
                                      "--max-log-requests=5")
    assert exports["tensorboardCommand"].startswith("kubectl port-forward -n default svc/train-tensorboard 6006:6006")
    assert exports["uploadDataCommand"] == ("aws s3 sync --delete --exclude '.cache/*' --exclude '.meta.json.tmp' "
                                            "data/prepared s3://trainstack-snapshots-0a1b2c3/data/")
    assert "enableJobCommand" not in exports
    assert ECR_PASSWORD not in json.dumps(exports)


def test_every_component_child_is_parented_and_every_resource_under_the_stack_component(up):
    (stack,) = up.by_type("trainstack:aws:AwsStack")
    top = [r for r in up.registrations if r.parent == stack.parent]
    assert top == [stack]  # one root: the AwsStack component
    assert all(r.parent is not None for r in up.registrations)


def test_the_shared_filesystem_is_protected_until_the_config_releases_it(up):
    # `pulumi destroy` refuses (before deleting anything) while the runs live only on EFS.
    assert up.one(FILE_SYSTEM).protect is True
    released = run_main(config_with({"trainstack:protectSharedFilesystem": False}))
    assert released.one(FILE_SYSTEM).protect is False
    assert up.exports["saveResultsCommand"].endswith(
        f"aws s3 sync results/train s3://{up.exports['bucketName']}/results/train/")


def test_a_second_up_after_destroy_adopts_the_log_group_eks_recreated(monkeypatch):
    # After `pulumi destroy` EKS flushes late control-plane logs and recreates /aws/eks/<name>/cluster;
    # a fresh `up` with the same cluster name must not try to create it again.
    account = CloudWatchAccount()
    account.watch(monkeypatch)
    first = run_main(outputs=account.outputs, calls=account.calls)
    assert account.groups == {"/aws/eks/trainstack-aws/cluster"} and account.imported == []
    assert first.one(LOG_GROUP).inputs["retentionInDays"] == 90

    account.destroy()
    assert account.groups == {"/aws/eks/trainstack-aws/cluster"}  # EKS made it again, never expiring
    second = run_main(outputs=account.outputs, calls=account.calls)
    assert account.imported == ["/aws/eks/trainstack-aws/cluster"]  # adopted, not created
    log_group = second.one(LOG_GROUP)
    assert log_group.inputs["retentionInDays"] == 90  # the import then applies our retention
    assert log_group.urn in second.one(EKS_CLUSTER).dependencies


def test_a_live_cluster_of_the_same_name_keeps_its_log_group(monkeypatch):
    # Another stack's cluster `trainstack-aws` runs in this account and region: its control-plane group
    # exists, but it is not an orphan. Importing it would rewrite its retention and tags, and our destroy
    # would delete its audit logs; the create must fail as before, with the cluster's own create.
    account = CloudWatchAccount()
    account.watch(monkeypatch)
    account.clusters.add("trainstack-aws")
    account.groups.add("/aws/eks/trainstack-aws/cluster")
    with pytest.raises(Exception, match="already exists"):
        run_main(outputs=account.outputs, calls=account.calls)
    assert account.imported == []


def test_the_account_model_refuses_a_second_create():
    # Guards the test above: the modelled service refuses what CloudWatch Logs refuses.
    account = CloudWatchAccount()
    account.outputs(LOG_GROUP, "g", {"name": "/aws/eks/x/cluster"})
    with pytest.raises(ResourceAlreadyExistsException):
        account.outputs(LOG_GROUP, "g", {"name": "/aws/eks/x/cluster"})
