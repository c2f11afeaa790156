"""Every rule of the policy pack, called directly: one resource that passes and one that fails.

(Constructing a pulumi_policy.PolicyPack starts its gRPC server, so the pack itself is checked in
test_pack.py without that.)
"""

from __future__ import annotations

import json

import pytest

from policy.rules import RULES
from policy.rules.common import Resource, Stack

STACK = Stack(name="aws", config={"trainstack:maxHourlyUsd": "12.5"})
TAGS = {"app": "trainstack", "pulumi-stack": "aws"}
GPU_GROUP = {"amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["g4dn.xlarge"], "capacityType": "SPOT",
             "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0}, "launchTemplate": {"id": "lt"}, "tags": TAGS}
GKE_GPU_POOL = {"autoscaling": {"minNodeCount": 0, "maxNodeCount": 4},
                "nodeConfig": {"machineType": "a3-highgpu-8g", "spot": True, "serviceAccount": "nodes@p.iam.gserviceaccount.com",
                               "workloadMetadataConfig": {"mode": "GKE_METADATA"},
                               "resourceLabels": {"app": "trainstack", "pulumi-stack": "aws"}}}
GKE_CLUSTER = {"workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"},
               "privateClusterConfig": {"enablePrivateNodes": True},
               "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24"}]},
               "databaseEncryption": {"state": "ENCRYPTED", "keyName": "k"}, "deletionProtection": True}
LAUNCH_TEMPLATE = {
    "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
    "tags": TAGS,
    "tagSpecifications": [{"resourceType": "instance", "tags": TAGS}, {"resourceType": "volume", "tags": TAGS}],
}
DIGEST = "sha256:" + "0" * 64
TRAINING_RELEASE = {"chart": "workloads/charts/training-job", "values": {"image": {"repository": "r", "digest": DIGEST}}}


def res(type_: str, name: str = "r", **props) -> Resource:
    return Resource(type=type_, name=name, props=props)


def merged(base: dict, **changes) -> dict:
    out = json.loads(json.dumps(base))
    for path, value in changes.items():
        target = out
        *parents, leaf = path.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return out


# rule name -> (a resource that passes, a resource that fails, a fragment of the failure message)
CASES = {
    "bucket-not-public": [
        (res("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", blockPublicAcls=True, blockPublicPolicy=True,
             ignorePublicAcls=True, restrictPublicBuckets=True),
         res("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", blockPublicAcls=True, blockPublicPolicy=False,
             ignorePublicAcls=True, restrictPublicBuckets=True), "blockPublicPolicy"),
        (res("aws:s3/bucketPolicy:BucketPolicy", policy=json.dumps({"Statement": [
            {"Sid": "TLS", "Effect": "Deny", "Principal": "*", "Action": "s3:*"}]})),
         res("aws:s3/bucketPolicy:BucketPolicy", policy=json.dumps({"Statement": [
             {"Sid": "Open", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:GetObject"}]})), "Open"),
        (res("aws:s3/bucketAclV2:BucketAclV2", acl="private"),
         res("aws:s3/bucketAclV2:BucketAclV2", acl="public-read"), "public-read"),
        (res("gcp:storage/bucket:Bucket", publicAccessPrevention="enforced", uniformBucketLevelAccess=True),
         res("gcp:storage/bucket:Bucket", publicAccessPrevention="inherited", uniformBucketLevelAccess=True),
         "publicAccessPrevention"),
        (res("gcp:storage/bucketIAMMember:BucketIAMMember", role="roles/storage.objectUser",
             member="serviceAccount:job@p.iam.gserviceaccount.com"),
         res("gcp:storage/bucketIAMMember:BucketIAMMember", role="roles/storage.objectViewer", member="allUsers"),
         "allUsers"),
    ],
    "encryption-at-rest": [
        (res("aws:efs/fileSystem:FileSystem", encrypted=True), res("aws:efs/fileSystem:FileSystem"), "encrypted"),
        (res("aws:ec2/launchTemplate:LaunchTemplate", **LAUNCH_TEMPLATE),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, blockDeviceMappings=[
             {"deviceName": "/dev/xvdb", "ebs": {"encrypted": "false"}}])), "/dev/xvdb"),
        (res("aws:ebs/volume:Volume", encrypted=True), res("aws:ebs/volume:Volume", encrypted=False), "encrypted"),
    ],
    "kubernetes-secrets-encryption": [
        (res("eks:index:Cluster", encryptionConfigKeyArn="arn:aws:kms:k"), res("eks:index:Cluster"), "KMS"),
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **merged(GKE_CLUSTER, databaseEncryption={"state": "DECRYPTED"})), "KMS"),
    ],
    "imdsv2-required": [
        (res("aws:ec2/launchTemplate:LaunchTemplate", **LAUNCH_TEMPLATE),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, metadataOptions__httpTokens="optional")),
         "IMDSv2"),
        (res("aws:ec2/instance:Instance", metadataOptions={"httpTokens": "required"}),
         res("aws:ec2/instance:Instance"), "IMDSv2"),
    ],
    "launch-template-interfaces-private": [
        (res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, networkInterfaces=[
            {"networkCardIndex": 0, "interfaceType": "efa", "securityGroups": ["sg-c", "sg-efa"],
             "associatePublicIpAddress": "false"}])),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, networkInterfaces=[
             {"networkCardIndex": 0, "interfaceType": "efa", "securityGroups": ["sg-c"]},
             {"networkCardIndex": 1, "interfaceType": "efa-only"}])), "networkInterfaces[1] names no security groups"),
        (res("aws:ec2/launchTemplate:LaunchTemplate", **LAUNCH_TEMPLATE),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, networkInterfaces=[
             {"securityGroups": ["sg-c"], "associatePublicIpAddress": "true"}])), "associates a public IP"),
    ],
    "all-traffic-only-within-a-group": [
        (res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", ipProtocol="-1", securityGroupId="sg-efa",
             referencedSecurityGroupId="sg-efa"),
         res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", ipProtocol="-1", securityGroupId="sg-efa",
             cidrIpv4="10.0.0.0/16"), "must reference a security group"),
        (res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", ipProtocol="tcp", fromPort=2049, toPort=2049,
             securityGroupId="sg-efs", cidrIpv4="10.0.0.0/16"),
         res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", ipProtocol="-1", securityGroupId="sg-efa",
             referencedSecurityGroupId="sg-efa", prefixListId="pl-1"), "not an address range"),
    ],
    "imds-hop-limit-one": [
        (res("aws:ec2/launchTemplate:LaunchTemplate", **LAUNCH_TEMPLATE),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, metadataOptions__httpPutResponseHopLimit=2)),
         "is 2"),
    ],
    "node-group-launch-template": [
        (res("eks:index:ManagedNodeGroup", **GPU_GROUP),
         res("aws:eks/nodeGroup:NodeGroup", **{k: v for k, v in GPU_GROUP.items() if k != "launchTemplate"}),
         "launchTemplate"),
    ],
    "gke-metadata-server": [
        (res("gcp:container/nodePool:NodePool", **GKE_GPU_POOL),
         res("gcp:container/nodePool:NodePool", **merged(GKE_GPU_POOL, nodeConfig__workloadMetadataConfig={"mode": "GCE_METADATA"})),
         "GKE_METADATA"),
    ],
    "gke-shielded-nodes": [
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **merged(GKE_CLUSTER, enableShieldedNodes=False)), "enableShieldedNodes"),
        (res("gcp:container/nodePool:NodePool", **GKE_GPU_POOL),
         res("gcp:container/nodePool:NodePool", **merged(GKE_GPU_POOL, nodeConfig__shieldedInstanceConfig={
             "enableIntegrityMonitoring": False})), "enableIntegrityMonitoring"),
    ],
    "gke-node-service-account": [
        (res("gcp:container/nodePool:NodePool", **GKE_GPU_POOL),
         res("gcp:container/nodePool:NodePool", **merged(GKE_GPU_POOL, nodeConfig__serviceAccount="123-compute@developer.gserviceaccount.com")),
         "Compute Engine default"),
    ],
    "gke-private-nodes": [
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **merged(GKE_CLUSTER, privateClusterConfig={"enablePrivateNodes": False})),
         "enablePrivateNodes"),
    ],
    "no-open-ssh-or-nfs": [
        (res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", cidrIpv4="10.0.0.0/16", ipProtocol="tcp",
             fromPort=2049, toPort=2049),
         res("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", cidrIpv4="0.0.0.0/0", ipProtocol="tcp",
             fromPort=2049, toPort=2049), "NFS (2049)"),
        (res("aws:ec2/securityGroup:SecurityGroup", ingress=[{"protocol": "tcp", "fromPort": 443, "toPort": 443,
                                                             "cidrBlocks": ["0.0.0.0/0"]}]),
         res("aws:ec2/securityGroup:SecurityGroup", ingress=[{"protocol": "-1", "fromPort": 0, "toPort": 0,
                                                             "ipv6CidrBlocks": ["::/0"]}]), "SSH (22)"),
        (res("aws:ec2/securityGroupRule:SecurityGroupRule", type="ingress", protocol="tcp", fromPort=22, toPort=22,
             cidrBlocks=["10.0.0.0/8"]),
         res("aws:ec2/securityGroupRule:SecurityGroupRule", type="ingress", protocol="tcp", fromPort=20, toPort=30,
             cidrBlocks=["0.0.0.0/0"]), "SSH (22)"),
        (res("gcp:compute/firewall:Firewall", sourceRanges=["35.235.240.0/20"], allows=[{"protocol": "tcp", "ports": ["22"]}]),
         res("gcp:compute/firewall:Firewall", sourceRanges=["0.0.0.0/0"], allows=[{"protocol": "tcp", "ports": ["2000-3000"]}]),
         "NFS (2049)"),
    ],
    "no-load-balancer-services": [
        (res("kubernetes:core/v1:Service", spec={"type": "ClusterIP"}),
         res("kubernetes:core/v1:Service", spec={"type": "LoadBalancer"}), "LoadBalancer"),
    ],
    "api-endpoint-restricted": [
        (res("eks:index:Cluster", endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"]),
         res("eks:index:Cluster", endpointPublicAccess=True), "0.0.0.0/0"),
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **{k: v for k, v in GKE_CLUSTER.items() if k != "masterAuthorizedNetworksConfig"}),
         "masterAuthorizedNetworksConfig"),
    ],
    "no-service-account-keys": [
        (res("gcp:serviceaccount/account:Account", accountId="job"),
         res("gcp:serviceaccount/key:Key", serviceAccountId="job"), "Workload Identity"),
    ],
    "iam-least-privilege": [
        (res("aws:iam/rolePolicy:RolePolicy", policy=json.dumps({"Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::b/*"}]})),
         res("aws:iam/rolePolicy:RolePolicy", policy=json.dumps({"Statement": [
             {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})), "s3:* on Resource *"),
        (res("gcp:projects/iAMMember:IAMMember", role="roles/container.nodeServiceAccount", member="serviceAccount:n"),
         res("gcp:projects/iAMMember:IAMMember", role="roles/editor", member="serviceAccount:n"), "roles/editor"),
    ],
    "gke-workload-identity": [
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **{k: v for k, v in GKE_CLUSTER.items() if k != "workloadIdentityConfig"}),
         "workloadPool"),
    ],
    "no-cluster-wide-rbac-for-workloads": [
        (res("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
             subjects=[{"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}]),
         res("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
             subjects=[{"kind": "ServiceAccount", "name": "train", "namespace": "default"}]), "default/train"),
    ],
    "chart-versions-pinned": [
        (res("kubernetes:helm.sh/v3:Release", chart="nvidia-device-plugin", version="0.20.0"),
         res("kubernetes:helm.sh/v3:Release", chart="nvidia-device-plugin", version="~0.20"), "exact version"),
        (res("kubernetes:helm.sh/v4:Chart", chart="oci://registry.k8s.io/kueue/charts/kueue", version="0.19.2"),
         res("kubernetes:helm.sh/v4:Chart", chart="oci://registry.k8s.io/kueue/charts/kueue"), "exact version"),
        (res("aws:eks/addon:Addon", addonName="aws-efs-csi-driver", addonVersion="v3.3.0-eksbuild.1"),
         res("aws:eks/addon:Addon", addonName="aws-efs-csi-driver"), "addonVersion"),
    ],
    "images-pinned-by-digest": [
        (res("kubernetes:helm.sh/v3:Release", **TRAINING_RELEASE),
         res("kubernetes:helm.sh/v3:Release", **merged(TRAINING_RELEASE, values__image={"repository": "r", "tag": "latest"})),
         "values.image.digest"),
        (res("kubernetes:batch/v1:Job", spec={"template": {"spec": {"containers": [{"name": "t", "image": f"r@{DIGEST}"}]}}}),
         res("kubernetes:apps/v1:DaemonSet", spec={"template": {"spec": {"initContainers": [{"name": "i", "image": "busybox:1"}]}}}),
         "busybox:1"),
        # The gIB installer is published by tag only: its exact tag passes, a moving one does not.
        (res("kubernetes:apps/v1:DaemonSet", spec={"template": {"spec": {"initContainers": [
            {"name": "i", "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.0"}]}}}),
         res("kubernetes:apps/v1:DaemonSet", spec={"template": {"spec": {"initContainers": [
             {"name": "i", "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:latest"}]}}}),
         "nccl-plugin-gib:latest"),
    ],
    "registry-scan-on-push": [
        (res("aws:ecr/repository:Repository", imageScanningConfiguration={"scanOnPush": True}),
         res("aws:ecr/repository:Repository", imageScanningConfiguration={"scanOnPush": False}), "scanOnPush"),
    ],
    "registry-immutable-tags": [
        (res("aws:ecr/repository:Repository", imageTagMutability="IMMUTABLE"),
         res("aws:ecr/repository:Repository", imageTagMutability="MUTABLE"), "mutable"),
        (res("gcp:artifactregistry/repository:Repository", dockerConfig={"immutableTags": True}),
         res("gcp:artifactregistry/repository:Repository", format="DOCKER"), "immutableTags"),
    ],
    "bucket-retained": [
        (res("aws:s3/bucket:Bucket", forceDestroy=False), res("gcp:storage/bucket:Bucket", forceDestroy=True), "forceDestroy"),
        (Resource("aws:s3/bucket:Bucket", "b", {"forceDestroy": False}, options={"retainOnDelete": True}),
         Resource("aws:s3/bucket:Bucket", "b", {"forceDestroy": False}, options={"retainOnDelete": False}), "retainOnDelete"),
    ],
    "deletion-protection": [
        (res("gcp:container/cluster:Cluster", **GKE_CLUSTER),
         res("gcp:container/cluster:Cluster", **merged(GKE_CLUSTER, deletionProtection=False)), "deletionProtection"),
        (res("gcp:filestore/instance:Instance", deletionProtectionEnabled=True),
         res("gcp:filestore/instance:Instance", tier="ZONAL"), "deletionProtectionEnabled"),
    ],
    "gpu-pool-scales-to-zero": [
        (res("eks:index:ManagedNodeGroup", **GPU_GROUP),
         res("eks:index:ManagedNodeGroup", **merged(GPU_GROUP, scalingConfig__minSize=1)), "minSize is 1"),
        (res("gcp:container/nodePool:NodePool", **GKE_GPU_POOL),
         res("gcp:container/nodePool:NodePool", **{k: v for k, v in GKE_GPU_POOL.items() if k != "autoscaling"}),
         "no autoscaling"),
    ],
    "gpu-pool-spot-or-reservation": [
        (res("eks:index:ManagedNodeGroup", **merged(GPU_GROUP, capacityType="ON_DEMAND",
                                                    tags={**TAGS, "trainstack-capacity": "on-demand"})),
         res("eks:index:ManagedNodeGroup", **merged(GPU_GROUP, capacityType="ON_DEMAND")), "ON_DEMAND"),
        (res("gcp:container/nodePool:NodePool", **merged(GKE_GPU_POOL, nodeConfig__spot=False, nodeConfig__reservationAffinity={
            "consumeReservationType": "SPECIFIC_RESERVATION"})),
         res("gcp:container/nodePool:NodePool", **merged(GKE_GPU_POOL, nodeConfig__spot=False)), "on-demand GPUs"),
    ],
    "job-ttl": [
        (res("kubernetes:helm.sh/v3:Release", **TRAINING_RELEASE),  # the chart's default (values.yaml) applies
         res("kubernetes:helm.sh/v3:Release", **merged(TRAINING_RELEASE, values__job={"ttlSecondsAfterFinished": -1})),
         "ttlSecondsAfterFinished"),
        (res("kubernetes:batch/v1:Job", spec={"ttlSecondsAfterFinished": 3600}),
         res("kubernetes:batch/v1:Job", spec={"backoffLimit": 2}), "ttlSecondsAfterFinished"),
    ],
    "billing-labels": [
        (res("aws:ec2/natGateway:NatGateway", tags=TAGS),
         res("aws:ec2/natGateway:NatGateway", tags={"app": "trainstack", "pulumi-stack": "other"}), "pulumi-stack=aws"),
        (res("aws:ec2/launchTemplate:LaunchTemplate", **LAUNCH_TEMPLATE),
         res("aws:ec2/launchTemplate:LaunchTemplate", **merged(LAUNCH_TEMPLATE, tagSpecifications=[
             {"resourceType": "instance", "tags": TAGS}])), "volume"),
        (Resource("gcp:storage/bucket:Bucket", "b", {}, provider_labels=TAGS),  # the provider's defaultLabels count
         res("gcp:storage/bucket:Bucket", labels={"app": "trainstack"}), "pulumi-stack=aws"),
    ],
}
BY_NAME = {rule.name: rule for rule in RULES}
RESOURCE_CASES = [(name, *case) for name, cases in CASES.items() for case in cases]


def test_every_resource_rule_has_cases():
    assert {r.name for r in RULES if r.scope == "resource"} == set(CASES)


@pytest.mark.parametrize(("name", "passing", "failing", "fragment"), RESOURCE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(RESOURCE_CASES)])
def test_rule_passes_and_fails(name, passing, failing, fragment):
    rule = BY_NAME[name]
    assert rule.check(passing, STACK) == []
    messages = rule.check(failing, STACK)
    assert messages and any(fragment in m for m in messages), messages


def test_rules_ignore_other_resource_types():
    unrelated = res("aws:ec2/routeTableAssociation:RouteTableAssociation", routeTableId="rt", subnetId="s")
    assert all(rule.check(unrelated, STACK) == [] for rule in RULES if rule.scope == "resource")


def test_bucket_retained_honours_delete_bucket_on_destroy():
    rule = BY_NAME["bucket-retained"]
    doomed = res("aws:s3/bucket:Bucket", forceDestroy=True)
    assert rule.check(doomed, Stack("aws", {"trainstack:deleteBucketOnDestroy": "true"})) == []


def test_deletion_protection_fix_is_the_policy_config_not_a_stack_key():
    """The GCP program refuses `trainstack:deletionProtection` (unknown key): the fix is the rule's level."""
    rule = BY_NAME["deletion-protection"]
    cluster = res("gcp:container/cluster:Cluster", **merged(GKE_CLUSTER, deletionProtection=False))
    [message] = rule.check(cluster, Stack("gcp", {"trainstack:deletionProtection": "false"}))
    assert '{"deletion-protection": "disabled"}' in message and "trainstack:" not in message


def test_cpu_pools_are_not_gpu_pools():
    system = res("eks:index:ManagedNodeGroup", amiType="AL2023_x86_64_STANDARD", instanceTypes=["t3.medium"],
                 capacityType="ON_DEMAND", scalingConfig={"minSize": 1})
    assert BY_NAME["gpu-pool-scales-to-zero"].check(system, STACK) == []
    assert BY_NAME["gpu-pool-spot-or-reservation"].check(system, STACK) == []


def test_controller_namespaces_are_configurable():
    binding = res("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                  subjects=[{"kind": "ServiceAccount", "name": "op", "namespace": "my-operator"}])
    rule = BY_NAME["no-cluster-wide-rbac-for-workloads"]
    assert rule.check(binding, STACK)
    assert rule.check(binding, STACK, controller_namespaces=["my-operator"]) == []


# --- stack rules ------------------------------------------------------------------------------------

def test_every_bucket_has_a_public_access_block():
    rule = BY_NAME["bucket-public-access-block"]
    bucket = res("aws:s3/bucket:Bucket", "snapshots")
    block = Resource("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "block", {},
                     dependencies=("aws:s3/bucket:Bucket::snapshots",))
    assert rule.check([bucket, block], STACK) == []
    (found, message), = rule.check([bucket, res("aws:s3/bucket:Bucket", "other"), block], STACK)
    assert found.name == "other" and "BucketPublicAccessBlock" in message


@pytest.mark.parametrize(("config", "fragment"), [
    ({}, "maxHourlyUsd is not set"),
    ({"trainstack:maxHourlyUsd": "0"}, "positive number"),
    ({"trainstack:maxHourlyUsd": "lots"}, "positive number"),
    ({"trainstack:maxHourlyUsd": "5", "trainstack:maxRunUsd": "-1"}, "maxRunUsd must be"),
])
def test_budget_present_fails(config, fragment):
    (resource, message), = BY_NAME["budget-present"].check([], Stack("aws", config))
    assert resource is None and fragment in message


def test_budget_present_passes():
    config = {"trainstack:maxHourlyUsd": "12.5", "trainstack:maxRunUsd": "400"}
    assert BY_NAME["budget-present"].check([], Stack("aws", config)) == []


def test_every_rule_is_documented():
    from .graphs import REPO_ROOT

    text = (REPO_ROOT / "docs" / "GUARDRAILS.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line.split("|")[2].strip()
            for line in text.splitlines() if line.startswith("| `")}
    assert rows == {rule.name: rule.level for rule in RULES}
