"""The orphan audit against moto's server on 127.0.0.1: resources made there by the test, some held by
a `pulumi stack export`-shaped state file, some orphaned (as a failed destroy leaves them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest

from trainstack.infra.audit.__main__ import main

from .servers import moto

REGION = "us-west-2"
OURS = [{"Key": "app", "Value": "trainstack"}, {"Key": "pulumi-stack", "Value": "aws"}]
OTHER_STACK = [{"Key": "app", "Value": "trainstack"}, {"Key": "pulumi-stack", "Value": "aws-dev"}]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """moto with a half-destroyed stack in it; yields (env, state file, expected orphans, everything made)."""
    with moto() as url:
        env = {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": REGION}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield (env, *_build(tmp_path_factory.mktemp("audit")))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _tags(kind: str, tags) -> list[dict]:
    return [{"ResourceType": kind, "Tags": tags}]


def _build(tmp):
    ec2, efs, eks, s3 = (boto3.client(s, region_name=REGION) for s in ("ec2", "efs", "eks", "s3"))
    elbv2, ecr = boto3.client("elbv2", region_name=REGION), boto3.client("ecr", region_name=REGION)
    held: list[dict] = []  # the state's resources
    orphans: set[tuple[str, str]] = set()

    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=_tags("vpc", OURS))["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=f"{REGION}a",
                               TagSpecifications=_tags("subnet", OURS))["Subnet"]["SubnetId"]
    subnet_b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.2.0/24", AvailabilityZone=f"{REGION}b")["Subnet"]["SubnetId"]
    held += [{"type": "aws:ec2/vpc:Vpc", "id": vpc}, {"type": "aws:ec2/subnet:Subnet", "id": subnet}]
    group = ec2.create_security_group(GroupName="efs", Description="d", VpcId=vpc,
                                      TagSpecifications=_tags("security-group", OURS))["GroupId"]
    held.append({"type": "aws:ec2/securityGroup:SecurityGroup", "id": group})
    stray_group = ec2.create_security_group(GroupName="stray", Description="d", VpcId=vpc,
                                            TagSpecifications=_tags("security-group", OURS))["GroupId"]
    orphans.add(("security group", stray_group))

    # NAT gateway and its address in the state; a second address left behind.
    kept_ip = ec2.allocate_address(Domain="vpc", TagSpecifications=_tags("elastic-ip", OURS))["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=kept_ip,
                                 TagSpecifications=_tags("natgateway", OURS))["NatGateway"]["NatGatewayId"]
    held += [{"type": "aws:ec2/eip:Eip", "id": kept_ip}, {"type": "aws:ec2/natGateway:NatGateway", "id": nat}]
    lost_ip = ec2.allocate_address(Domain="vpc", TagSpecifications=_tags("elastic-ip", OURS))["AllocationId"]
    orphans.add(("Elastic IP", lost_ip))

    # A node's root volume left detached, an attached-looking one of another stack, and a CNI interface.
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=100, TagSpecifications=_tags("volume", OURS))["VolumeId"]
    orphans.add(("EBS volume", volume))
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=5, TagSpecifications=_tags("volume", OTHER_STACK))
    eni = ec2.create_network_interface(SubnetId=subnet, TagSpecifications=_tags("network-interface", [
        {"Key": "cluster.k8s.amazonaws.com/name", "Value": "trainstack"}]))["NetworkInterface"]["NetworkInterfaceId"]
    orphans.add(("network interface", eni))  # the VPC CNI's, left detached

    # EFS: the stack's file system in the state; an older one lost, with an access point and a mount target.
    kept_fs = efs.create_file_system(CreationToken="kept", Encrypted=True, Tags=OURS)["FileSystemId"]
    held.append({"type": "aws:efs/fileSystem:FileSystem", "id": kept_fs})
    lost_fs = efs.create_file_system(CreationToken="lost", Encrypted=True, Tags=OURS)["FileSystemId"]
    point = efs.create_access_point(FileSystemId=lost_fs)["AccessPointId"]
    target = efs.create_mount_target(FileSystemId=lost_fs, SubnetId=subnet_b)["MountTargetId"]
    orphans |= {("EFS file system", lost_fs), ("EFS access point", point), ("EFS mount target", target)}

    # A load balancer a LoadBalancer Service made in the stack's VPC (never in the state).
    lb = elbv2.create_load_balancer(Name="k8s-default-tb", Subnets=[subnet, subnet_b])["LoadBalancers"][0]
    orphans.add(("load balancer", lb["LoadBalancerName"]))

    # EKS: the cluster in the state, a node group the state lost.
    role = "arn:aws:iam::123456789012:role/eks"
    eks.create_cluster(name="trainstack", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet, subnet_b]},
                       tags=dict((t["Key"], t["Value"]) for t in OURS))
    held.append({"type": "aws:eks/cluster:Cluster", "id": "trainstack", "outputs": {"name": "trainstack"}})
    eks.create_nodegroup(clusterName="trainstack", nodegroupName="gpu-old", nodeRole=role, subnets=[subnet],
                         tags=dict((t["Key"], t["Value"]) for t in OURS))
    orphans.add(("EKS node group", "trainstack/gpu-old"))

    # Buckets: the snapshot bucket in the state, one left by an earlier stack, one of another stack.
    for name, tags in (("snapshots-kept", OURS), ("snapshots-old", OURS), ("snapshots-dev", OTHER_STACK)):
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tags})
    held.append({"type": "aws:s3/bucket:Bucket", "id": "snapshots-kept", "outputs": {"bucket": "snapshots-kept"}})
    orphans.add(("S3 bucket", "snapshots-old"))
    ecr.create_repository(repositoryName="trainstack-registry", tags=OURS)
    orphans.add(("ECR repository", "trainstack-registry"))
    # Control-plane log groups: the live cluster's is its own; the one EKS recreated after the stack's
    # cluster `trainstack-aws` (trainstack-<stack>) was destroyed is untagged and found by its name.
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/aws/eks/trainstack/cluster")
    logs.create_log_group(logGroupName="/aws/eks/trainstack-aws/cluster")
    logs.create_log_group(logGroupName="/aws/eks/trainstack-aws-other/cluster")  # another cluster's name
    orphans.add(("CloudWatch log group", "/aws/eks/trainstack-aws/cluster"))

    state = tmp / "state.json"
    state.write_text(json.dumps({"version": 3, "deployment": {"resources": held}}))
    # Made by Kubernetes or by the nodes, never by Pulumi: no state holds them.
    outside_state = {("load balancer", lb["LoadBalancerName"]), ("network interface", eni), ("EBS volume", volume)}
    everything = dict(held=held, orphans=orphans, outside_state=outside_state)
    full = tmp / "full-state.json"
    full.write_text(json.dumps({"version": 3, "deployment": {"resources": held + [
        {"type": "x", "id": ident if ident.startswith("/aws/") else ident.split("/")[-1]}
        for _, ident in orphans - outside_state]}}))
    return state, full, everything


def _listed(output: str) -> set[tuple[str, str]]:
    found = set()
    for line in output.splitlines():
        if line.startswith("- "):
            words = line[2:].split("  (")[0].rsplit(" ", 1)
            found.add((words[0], words[1]))
    return found


def test_lists_exactly_the_orphans(cloud, capsys):
    _, state, _, made = cloud
    assert main(["--stack", "aws", "--state", str(state)]) == 1
    output = capsys.readouterr().out
    assert _listed(output) == made["orphans"]


def test_each_orphan_comes_with_its_delete_command(cloud, capsys):
    _, state, _, made = cloud
    main(["--stack", "aws", "--state", str(state)])
    output = capsys.readouterr().out
    lines = output.splitlines()
    for kind, ident in made["orphans"]:
        (index,) = [i for i, line in enumerate(lines) if line.startswith(f"- {kind} {ident}")]
        command = lines[index + 1].strip()
        assert command.startswith("aws ") and ident.split("/")[-1] in command, (kind, command)
    # Dependents before what they block: access points and mount targets before their file system.
    order = [line for line in lines if line.startswith("- ")]
    position = {kind: i for i, line in enumerate(order) for kind in ("EFS access point", "EFS file system", "load balancer")
                if line.startswith(f"- {kind}")}
    assert position["load balancer"] < position["EFS access point"] < position["EFS file system"]


def test_audit_only_reads(cloud, capsys):
    _, state, _, made = cloud
    main(["--stack", "aws", "--state", str(state)])
    capsys.readouterr()
    ec2, efs = boto3.client("ec2", region_name=REGION), boto3.client("efs", region_name=REGION)
    volumes = {ident for kind, ident in made["orphans"] if kind == "EBS volume"}
    assert volumes <= {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]}
    assert len(efs.describe_file_systems()["FileSystems"]) == 2
    assert {"snapshots-kept", "snapshots-old", "snapshots-dev"} <= {
        b["Name"] for b in boto3.client("s3", region_name=REGION).list_buckets()["Buckets"]}


def test_a_state_that_holds_everything_leaves_only_what_kubernetes_and_nodes_made(cloud, capsys):
    _, _, full, made = cloud
    assert main(["--stack", "aws", "--state", str(full)]) == 1
    assert _listed(capsys.readouterr().out) == made["outside_state"]


def test_nothing_to_report_for_a_stack_without_leftovers(cloud, capsys):
    env, _, full, _ = cloud
    assert main(["--stack", "aws", "--state", str(full), "--region", "eu-west-1"]) == 0
    assert "No orphans" in capsys.readouterr().out


def test_command_line(cloud):
    env, state, _, made = cloud
    done = subprocess.run([sys.executable, "-m", "trainstack.infra.audit", "--stack", "aws", "--state", str(state)],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
    assert done.returncode == 1, done.stderr
    assert _listed(done.stdout) == made["orphans"]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--stack", "azure"], "names no cloud"),
    (["--stack", "aws", "--state", "/does/not/exist.json"], "cannot read it"),
])
def test_bad_input_is_one_line_and_exit_2(argv, fragment, capsys, tmp_path):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_a_file_that_is_not_an_export(tmp_path, capsys):
    bad = tmp_path / "state.json"
    bad.write_text(json.dumps({"outputs": {}}))
    assert main(["--stack", "aws", "--state", str(bad), "--region", REGION]) == 2
    assert "deployment.resources" in capsys.readouterr().err


def test_a_json_list_is_not_an_export(tmp_path, capsys):
    bad = tmp_path / "state.json"
    bad.write_text("[1, 2]")
    assert main(["--stack", "aws", "--state", str(bad)]) == 2
    assert "deployment.resources" in capsys.readouterr().err


def test_an_unreachable_cloud_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    from testbed.processes import free_port

    state = tmp_path / "state.json"
    state.write_text(json.dumps({"deployment": {"resources": []}}))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert main(["--stack", "aws", "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainstack.infra.audit: AWS (us-west-2):") and err.count("\n") == 1
