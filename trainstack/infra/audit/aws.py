"""The AWS side of the audit: tagged resources (and what Kubernetes made for a tagged cluster or VPC)
that the state does not hold. Read-only: Describe/List/Get calls only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from trainstack.infra.audit import APP_LABEL, STACK_LABEL_KEY
from trainstack.infra.audit.report import CloudError, Orphan

CNI_TAG = "cluster.k8s.amazonaws.com/name"  # on every interface the Amazon VPC CNI creates


@dataclass(frozen=True)
class Scope:
    stack: str
    region: str
    held: frozenset[str]  # identifiers in the stack's state
    profile: str | None = None
    cluster_name: str | None = None  # the stack's EKS cluster name (trainstack:clusterName or its default)

    def cli(self, command: str) -> str:
        profile = f" --profile {self.profile}" if self.profile else ""
        return f"aws {command} --region {self.region}{profile}"

    def ours(self, tags: Iterable) -> bool:
        """Tags as a dict or as [{Key, Value}] carry app=trainstack and pulumi-stack=<stack>."""
        found = tags if isinstance(tags, dict) else {t["Key"]: t["Value"] for t in tags or ()}
        return found.get(APP_LABEL[0]) == APP_LABEL[1] and found.get(STACK_LABEL_KEY) == self.stack

    def ec2_filters(self) -> list[dict]:
        return [{"Name": f"tag:{APP_LABEL[0]}", "Values": [APP_LABEL[1]]},
                {"Name": f"tag:{STACK_LABEL_KEY}", "Values": [self.stack]}]


def audit(scope: Scope) -> list[Orphan]:
    try:
        return _audit(scope)
    except (BotoCoreError, ClientError) as error:
        raise CloudError(f"AWS ({scope.region}): {error}; check the credentials and region "
                         "(read-only access is enough)") from None


def _audit(scope: Scope) -> list[Orphan]:
    session = boto3.Session(region_name=scope.region, profile_name=scope.profile)
    ec2 = session.client("ec2")
    vpcs = [v["VpcId"] for v in ec2.describe_vpcs(Filters=scope.ec2_filters())["Vpcs"]]
    clusters = _tagged_clusters(session.client("eks"), scope)
    orphans = [
        *_eks(session.client("eks"), scope, clusters),
        *_load_balancers(session, scope, vpcs, clusters),
        *_efs(session.client("efs"), scope),
        *_ec2(ec2, scope, vpcs),
        *_ecr(session.client("ecr"), scope),
        *_s3(session.client("s3"), scope),
        *_control_plane_log_group(session.client("logs"), scope, session.client("eks")),
    ]
    return orphans


def _tagged_clusters(eks, scope: Scope) -> list[str]:
    names = [n for page in eks.get_paginator("list_clusters").paginate() for n in page["clusters"]]
    return [n for n in names if scope.ours(eks.describe_cluster(name=n)["cluster"].get("tags") or {})]


def _eks(eks, scope: Scope, clusters: list[str]) -> Iterator[Orphan]:
    for name in clusters:
        cluster = eks.describe_cluster(name=name)["cluster"]
        if name not in scope.held and cluster["arn"] not in scope.held:
            yield Orphan("EKS cluster", name, scope.cli(f"eks delete-cluster --name {name}"),
                         "delete its node groups first", order=30)
    for cluster in [n for page in eks.get_paginator("list_clusters").paginate() for n in page["clusters"]]:
        for group in eks.list_nodegroups(clusterName=cluster)["nodegroups"]:
            detail = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)["nodegroup"]
            if scope.ours(detail.get("tags") or {}) and not {group, detail["nodegroupArn"]} & scope.held:
                yield Orphan("EKS node group", f"{cluster}/{group}",
                             scope.cli(f"eks delete-nodegroup --cluster-name {cluster} --nodegroup-name {group}"),
                             "its nodes bill until it is gone", order=20)


def _load_balancers(session, scope: Scope, vpcs: list[str], clusters: list[str]) -> Iterator[Orphan]:
    """Load balancers in the stack's VPCs, or tagged for it or its clusters: Kubernetes makes them for
    LoadBalancer Services, outside Pulumi's state, and they block deleting the VPC."""
    cluster_tags = {f"kubernetes.io/cluster/{name}" for name in clusters}

    def belongs(vpc: str | None, tags: dict[str, str]) -> bool:
        return vpc in vpcs or scope.ours(tags) or bool(cluster_tags & set(tags))

    elbv2 = session.client("elbv2")
    balancers = [lb for page in elbv2.get_paginator("describe_load_balancers").paginate() for lb in page["LoadBalancers"]]
    tags = _elbv2_tags(elbv2, [lb["LoadBalancerArn"] for lb in balancers])
    for lb in balancers:
        if belongs(lb.get("VpcId"), tags.get(lb["LoadBalancerArn"], {})) and lb["LoadBalancerArn"] not in scope.held:
            yield Orphan("load balancer", lb["LoadBalancerName"],
                         scope.cli(f"elbv2 delete-load-balancer --load-balancer-arn {lb['LoadBalancerArn']}"), order=10)
    elb = session.client("elb")
    for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]:
        name = lb["LoadBalancerName"]
        described = elb.describe_tags(LoadBalancerNames=[name])["TagDescriptions"]
        lb_tags = {t["Key"]: t["Value"] for d in described for t in d.get("Tags", [])}
        if belongs(lb.get("VPCId"), lb_tags) and name not in scope.held:
            yield Orphan("classic load balancer", name, scope.cli(f"elb delete-load-balancer --load-balancer-name {name}"),
                         order=10)


def _elbv2_tags(elbv2, arns: list[str]) -> dict[str, dict[str, str]]:
    found = {}
    for start in range(0, len(arns), 20):  # the API's batch limit
        for description in elbv2.describe_tags(ResourceArns=arns[start:start + 20])["TagDescriptions"]:
            found[description["ResourceArn"]] = {t["Key"]: t["Value"] for t in description.get("Tags", [])}
    return found


def _efs(efs, scope: Scope) -> Iterator[Orphan]:
    """A file system the state lost, with the access points (the CSI driver's, one per claim) and mount
    targets that have to go before it."""
    for fs in [f for page in efs.get_paginator("describe_file_systems").paginate() for f in page["FileSystems"]]:
        fs_id = fs["FileSystemId"]
        if not scope.ours(fs.get("Tags", [])) or {fs_id, fs.get("FileSystemArn", "")} & scope.held:
            continue
        yield Orphan("EFS file system", fs_id, scope.cli(f"efs delete-file-system --file-system-id {fs_id}"),
                     "checkpoints on it go with it: copy what you need first", order=42)
        for point in efs.describe_access_points(FileSystemId=fs_id)["AccessPoints"]:
            yield Orphan("EFS access point", point["AccessPointId"],
                         scope.cli(f"efs delete-access-point --access-point-id {point['AccessPointId']}"), order=40)
        for target in efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]:
            yield Orphan("EFS mount target", target["MountTargetId"],
                         scope.cli(f"efs delete-mount-target --mount-target-id {target['MountTargetId']}"), order=41)


# Tagged EC2 resources the state should hold: (kind, describe call, its filter argument, list key, id key,
# delete command, note, delete order).
TAGGED_EC2 = (
    ("NAT gateway", "describe_nat_gateways", "Filter", "NatGateways", "NatGatewayId",
     "ec2 delete-nat-gateway --nat-gateway-id {}", "bills per hour and per GB", 45),
    ("Elastic IP", "describe_addresses", "Filters", "Addresses", "AllocationId",
     "ec2 release-address --allocation-id {}", "", 46),
    ("security group", "describe_security_groups", "Filters", "SecurityGroups", "GroupId",
     "ec2 delete-security-group --group-id {}", "", 48),
    ("subnet", "describe_subnets", "Filters", "Subnets", "SubnetId", "ec2 delete-subnet --subnet-id {}", "", 49),
)


def _ec2(ec2, scope: Scope, vpcs: list[str]) -> Iterator[Orphan]:
    tagged = scope.ec2_filters()
    for kind, call, filter_arg, key, id_key, command, note, order in TAGGED_EC2:
        for item in getattr(ec2, call)(**{filter_arg: tagged})[key]:
            if item[id_key] not in scope.held and item.get("State") not in ("deleted", "deleting"):
                yield Orphan(kind, item[id_key], scope.cli(command.format(item[id_key])), note, order=order)
    # Volumes and network interfaces are never in the state (nodes and the VPC CNI make them): a
    # detached one is a leftover.
    detached = [{"Name": "status", "Values": ["available"]}]
    for volume in ec2.describe_volumes(Filters=tagged + detached)["Volumes"]:
        yield Orphan("EBS volume", volume["VolumeId"], scope.cli(f"ec2 delete-volume --volume-id {volume['VolumeId']}"),
                     f"{volume['Size']} GiB, detached", order=47)
    if vpcs:
        in_vpcs = [{"Name": "vpc-id", "Values": vpcs}]
        for eni in ec2.describe_network_interfaces(Filters=in_vpcs + detached)["NetworkInterfaces"]:
            tags = {t["Key"]: t["Value"] for t in eni.get("TagSet", [])}
            # The VPC CNI's (it tags them) or ours; service-managed ones go with their service.
            if (CNI_TAG in tags or scope.ours(tags)) and not eni.get("RequesterManaged"):
                yield Orphan("network interface", eni["NetworkInterfaceId"],
                             scope.cli(f"ec2 delete-network-interface --network-interface-id {eni['NetworkInterfaceId']}"),
                             "detached; blocks deleting its subnet", order=44)
    for vpc in vpcs:
        if vpc not in scope.held:
            yield Orphan("VPC", vpc, scope.cli(f"ec2 delete-vpc --vpc-id {vpc}"),
                         "detach and delete its internet gateway and route tables first", order=60)


def _control_plane_log_group(logs, scope: Scope, eks) -> Iterator[Orphan]:
    """EKS recreates /aws/eks/<cluster>/cluster from late log streams after `pulumi destroy`, untagged
    and never expiring (terraform-aws-modules/terraform-aws-eks#2486): tags cannot find it, its name
    can. Listed only when no cluster of that name runs (a live cluster's group is its own)."""
    if not scope.cluster_name:
        return
    name = f"/aws/eks/{scope.cluster_name}/cluster"
    groups = [g for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
              for g in page["logGroups"] if g["logGroupName"] == name]
    live = {n for page in eks.get_paginator("list_clusters").paginate() for n in page["clusters"]}
    if groups and name not in scope.held and scope.cluster_name not in live:
        yield Orphan("CloudWatch log group", name, scope.cli(f"logs delete-log-group --log-group-name {name}"),
                     "EKS recreated it after the cluster was deleted; it never expires (the next `pulumi up` "
                     "with this cluster name adopts it instead)", order=90)


def _ecr(ecr, scope: Scope) -> Iterator[Orphan]:
    for repo in [r for page in ecr.get_paginator("describe_repositories").paginate() for r in page["repositories"]]:
        tags = ecr.list_tags_for_resource(resourceArn=repo["repositoryArn"])["tags"]
        if scope.ours(tags) and not {repo["repositoryName"], repo["repositoryArn"]} & scope.held:
            yield Orphan("ECR repository", repo["repositoryName"],
                         scope.cli(f"ecr delete-repository --repository-name {repo['repositoryName']} --force"), order=70)


def _s3(s3, scope: Scope) -> Iterator[Orphan]:
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        try:
            tags = s3.get_bucket_tagging(Bucket=name)["TagSet"]
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchTagSet", "NoSuchBucket", "AccessDenied"):
                continue
            raise
        if scope.ours(tags) and name not in scope.held:
            yield Orphan("S3 bucket", name, f"aws s3 rb s3://{name} --force" + (f" --profile {scope.profile}" if scope.profile else ""),
                         "kept by `pulumi destroy` on purpose (snapshots, exports): delete only what you no longer need",
                         order=80)
