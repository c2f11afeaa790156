"""Values inside our types but outside what AWS documents (trainstack/infra/aws/limits.py): each family is refused in one
line before any resource, and what the account alone knows (its zones) fails the preview before any resource."""

from __future__ import annotations

import pulumi
import pytest

from tests import pulumi_harness
from tests.aws.stack_runs import (
    GET_AVAILABILITY_ZONES,
    NODE_GROUP,
    config_with,
    provider_calls,
    run_main,
    run_main_expecting_error,
)
from tests.stack_runs import assert_one_config_error_line
from trainstack.infra.aws.limits import EKS_NODE_TAGS, MAX_PUBLIC_ACCESS_CIDRS, MAX_TAGS

CIDRS = "trainstack:apiPublicAccessCidrs"
TAGS = "trainstack:tags"

# (case id, overrides, the key the message must name, a fragment of the message)
OUTSIDE_AWS_LIMITS = [
    # VPC IPv4 blocks are /16 to /28.
    ("VPC block larger than /16", {"trainstack:vpcCidr": "10.0.0.0/8"}, "trainstack:vpcCidr",
     "larger than a VPC may be (AWS allows /16 to /28)"),
    # 50 tags per resource, counting the 3 trainstack adds and the 5 EKS and the autoscaler put on a GPU
    # node; keys 128, values 256 characters.
    ("too many tags", {TAGS: {f"team{i}": "ml" for i in range(MAX_TAGS - 7)}}, TAGS,
     "43 tags: AWS allows 50 per resource, and a GPU node carries 8 more (app, pulumi-stack, Name, "
     "eks:cluster-name, eks:nodegroup-name"),
    ("tag key too long", {TAGS: {"k" * 129: "v"}}, f"{TAGS}.{'k' * 129}", "tag keys hold at most 128"),
    ("tag value too long", {TAGS: {"team": "v" * 257}}, f"{TAGS}.team", "values 256"),
    ("Name tag (trainstack sets it)", {TAGS: {"Name": "mine"}}, f"{TAGS}.Name", "is set by trainstack"),
    # EKS: 40 public access CIDRs per cluster.
    ("too many public CIDRs", {CIDRS: [f"203.0.{i}.0/24" for i in range(MAX_PUBLIC_ACCESS_CIDRS + 1)]}, CIDRS,
     "41 blocks: EKS accepts at most 40"),
    ("loopback as a public CIDR", {CIDRS: ["127.0.0.1/32"]}, CIDRS, "is in the loopback (127.0.0.0/8) block"),
    ("link-local as a public CIDR", {CIDRS: ["169.254.169.254/32"]}, CIDRS, "link-local (169.254.0.0/16)"),
    ("shared address space as a public CIDR", {CIDRS: ["100.64.0.0/16"]}, CIDRS,
     "shared carrier-grade NAT space (100.64.0.0/10)"),
    ("multicast as a public CIDR", {CIDRS: ["224.0.0.1/32"]}, CIDRS, "multicast"),
    # The same instance type twice, once with a space: one pool to EC2.
    ("instance types equal but for whitespace", {"trainstack:gpuNodes": {"instanceTypes": ["g5.xlarge", " g5.xlarge"]}},
     "trainstack:gpuNodes.instanceTypes", "lists a value twice"),
    # Regions: named as unknown, not as a missing price.
    ("unknown region", {"aws:region": "us-west-9"}, "aws:region", "'us-west-9' is not an AWS Region"),
    ("region typo", {"aws:region": "us-wset-2"}, "aws:region", "(did you mean us-west-2?)"),
    # Other partitions: named as such (the stack's ARNs are arn:aws:), not accepted and failing at apply.
    ("GovCloud region", {"aws:region": "us-gov-west-1"}, "aws:region",
     "us-gov-west-1 is in the aws-us-gov partition, and trainstack builds ARNs of the aws partition only"),
    ("China region", {"aws:region": "cn-north-1"}, "aws:region", "cn-north-1 is in the aws-cn partition"),
]


@pytest.mark.parametrize(("overrides", "key", "fragment"), [case[1:] for case in OUTSIDE_AWS_LIMITS],
                         ids=[case[0] for case in OUTSIDE_AWS_LIMITS])
def test_a_value_aws_would_refuse_stops_before_any_resource_with_one_line(overrides, key, fragment):
    assert_one_config_error_line(*run_main_expecting_error(config_with(overrides)), key, fragment)


def test_limits_are_not_refused_at_the_limit():
    assert len(EKS_NODE_TAGS) == 5
    result = run_main(config_with({
        TAGS: {f"team{i}": "ml" for i in range(MAX_TAGS - 8)},
        CIDRS: ["0.0.0.0/0"],  # any address is allowed (the user asked for it)
        "trainstack:vpcCidr": "10.0.0.0/16",
    }))
    assert result.registrations


def test_a_zone_the_account_lacks_fails_the_preview_before_any_cloud_resource(monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)

    def calls(token: str, args: dict) -> dict:
        if token == GET_AVAILABILITY_ZONES:
            return {"id": "us-west-2", "names": ["us-west-2a", "us-west-2b", "us-west-2c"], "zoneIds": [],
                    "groupNames": []}
        return provider_calls(token, args)

    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=calls)
    message = str(raised.value)
    assert message.startswith("trainstack:availabilityZones: us-west-2d is not an available zone of us-west-2")
    assert "\n" not in message and ". Fix: " in message
    registered = {r.type for r in monitors[0].recorded}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_a_managed_node_group_over_the_default_quota_is_not_refused():
    # "Nodes per managed node group" (450) is an adjustable EKS quota: an account that raised it may use it.
    result = run_main(config_with({"trainstack:gpuNodes": {"max": 500}, "trainstack:systemNodes": {"max": 500},
                                   "trainstack:maxHourlyUsd": 200}))
    assert result.one(NODE_GROUP, "trainstack-eks-gpu").inputs["scalingConfig"]["maxSize"] == 500
    assert result.one(NODE_GROUP, "trainstack-eks-system").inputs["scalingConfig"]["maxSize"] == 500


def test_a_key_of_the_other_cloud_is_named_in_a_warning_not_refused(monkeypatch):
    # A shared Pulumi ESC environment may set gcp:* for every stack: the AWS stack goes on and says so.
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    result = run_main(config_with({"gcp:project": "ml-research-123"}))
    assert result.registrations
    assert [w for w in warnings if w.startswith("gcp:project: belongs to GCP, and this stack builds on AWS")]
    assert all("\n" not in w for w in warnings)
