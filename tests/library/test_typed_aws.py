"""The AWS stack's one typed model: resolve_aws takes the Args a component is given, Outputs included, with no
stand-ins and no stack-config strings in between; AwsStack passes the caller's kubeconfig role on like EksCluster."""

import asyncio

import pulumi
import pulumi_aws as aws
import pytest

from tests.library.test_cluster_parts import run
from tests.library.test_user_program import REGION, ROLE, aws_in
from trainstack import components
from trainstack.infra.aws.config import resolve_aws
from trainstack.infra.aws.settings import AwsExistingNetwork, AwsStackArgs
from trainstack.infra.config import NAMESPACE, ConfigError
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.loader import from_inputs


def test_the_resolver_hands_output_ids_to_the_infra_as_they_are():
    # Before: checkable_id replaced each output by "vpc-givenasanoutput0" for the parser, and the part put the
    # outputs back into the parsed config afterwards.
    asyncio.set_event_loop(asyncio.new_event_loop())
    vpc = pulumi.Output.from_input("vpc-0123abcd")
    subnets = [pulumi.Output.from_input(f"subnet-{i}") for i in "ab"]
    args = from_inputs(AwsStackArgs, AwsStackArgs(
        region="eu-west-1", api_endpoint="private", job=Job(enabled=False),
        existing_network=AwsExistingNetwork(vpc_id=vpc, private_subnet_ids=subnets)), key=NAMESPACE)
    existing = resolve_aws(args, "dev").network.existing
    assert existing.vpc_id is vpc
    assert len(existing.private_subnet_ids) == 2
    assert all(given is kept for given, kept in zip(subnets, existing.private_subnet_ids, strict=True))


def test_a_plain_id_is_still_checked_beside_outputs():
    asyncio.set_event_loop(asyncio.new_event_loop())
    args = from_inputs(AwsStackArgs, AwsStackArgs(
        region="eu-west-1", api_endpoint="private", existing_network=AwsExistingNetwork(
            vpc_id=pulumi.Output.from_input("vpc-1"), private_subnet_ids=[pulumi.Output.from_input("subnet-1"),
                                                                          "sn-typo"])), key=NAMESPACE)
    with pytest.raises(ConfigError) as raised:
        resolve_aws(args, "dev")
    assert str(raised.value) == ("trainstack:existingNetwork.privateSubnetIds: 'sn-typo' is not a subnet ID. Fix: use "
                                 "IDs like subnet-0123abcd")


def test_a_component_field_is_checked_by_its_declared_reader_in_the_stack_files_line():
    with pytest.raises(ConfigError) as raised:
        from_inputs(AwsStackArgs, {"gpuNodes": {"max": 0}}, key=NAMESPACE)
    assert str(raised.value) == ("trainstack:gpuNodes.max: must be at least 1, got 0. Fix: pulumi config set --path "
                                 "'trainstack:gpuNodes.max' 1")


def test_the_aws_stack_signs_its_kubeconfig_in_as_the_given_role():
    # EksCluster took kubeconfigRoleArn; AwsStack did not, so its Kubernetes objects were made as the ambient
    # identity even when the caller's provider assumed a role (the cluster's creator and only admin).
    def program() -> None:
        mine = aws.Provider("mine", region=REGION, assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=ROLE)])
        components.AwsStack("trainstack", components.AwsStackArgs(
            api_public_access_cidrs=["203.0.113.7/32"], job=components.Job(enabled=False),
            kubeconfig_role_arn=ROLE), opts=pulumi.ResourceOptions(provider=mine))

    result, stopped = run(program, "aws", calls=aws_in(REGION))
    assert not stopped, stopped
    assert result.one("eks:index:Cluster").inputs["providerCredentialOpts"] == {"roleArn": ROLE}


def test_kubeconfig_role_arn_is_no_stack_file_key():
    from trainstack.infra.aws.config import parse_aws_config

    with pytest.raises(ConfigError, match=r"^trainstack:kubeconfigRoleArn: unknown key"):
        parse_aws_config({"aws:region": "us-west-2", "trainstack:kubeconfigRoleArn": ROLE}, stack="aws")


def test_a_section_that_is_not_an_object_lists_the_keys_as_the_stack_parser_did():
    from trainstack.infra.aws.config import parse_aws_config

    with pytest.raises(ConfigError) as raised:
        parse_aws_config({"aws:region": "us-west-2", "trainstack:gpuNodes": "[1]"}, stack="aws")
    assert str(raised.value) == (
        "trainstack:gpuNodes: expected an object with keys instanceTypes, min, desired, max, diskSizeGb, capacityType, "
        "sshPublicKey, ignoreScalingChanges, efa, efaInterfaces, zone, capacityReservationId, placementGroup, "
        "topologyAware, got [1]. Fix: write trainstack:gpuNodes as a YAML mapping in Pulumi.<stack>.yaml")
    with pytest.raises(ConfigError, match=r"^trainstack:existingNetwork: expected an object with keys vpcId, "
                                          r"publicSubnetIds, privateSubnetIds, got 'vpc-1'\. Fix"):
        parse_aws_config({"aws:region": "us-west-2", "trainstack:existingNetwork": "vpc-1"}, stack="aws")


def test_ids_not_known_yet_over_the_wire_go_through_and_the_plain_ones_beside_them_are_checked():
    # The review of the typed model: the provider server decodes a value not known yet without its dependencies as
    # the SDK's raw Unknown (rpc.deserialize_properties(keep_unknowns=True)), not an Output. The loader refused it
    # ("expected a non-empty string, got <pulumi.output.Unknown ...>"), and a plain subnet listed twice beside an
    # output went unchecked (two EFS mount targets on one subnet: EFS refuses the second at `up`).
    from pulumi.runtime import rpc

    from tests.library.wire import over_the_wire

    given = over_the_wire({"region": "eu-west-1", "apiEndpoint": "private", "job": {"enabled": False},
                           "existingNetwork": {"vpcId": rpc.UNKNOWN,
                                               "privateSubnetIds": [rpc.UNKNOWN, " subnet-b"]}})
    args = from_inputs(AwsStackArgs, given, key=NAMESPACE)
    existing = resolve_aws(args, "dev").network.existing
    assert isinstance(existing.vpc_id, pulumi.output.Unknown)
    assert isinstance(existing.private_subnet_ids[0], pulumi.output.Unknown)
    assert existing.private_subnet_ids[1] == "subnet-b"  # stripped, as in an all-plain list

    twice = over_the_wire({"region": "eu-west-1", "existingNetwork": {
        "vpcId": "vpc-1", "privateSubnetIds": [rpc.UNKNOWN, "subnet-a", "subnet-a"]}})
    with pytest.raises(ConfigError, match=r"^trainstack:existingNetwork\.privateSubnetIds: lists a value twice"):
        from_inputs(AwsStackArgs, twice, key=NAMESPACE)

    with pytest.raises(Exception, match=r"^clusterName: takes a plain value, not an output or a secret"):
        from_inputs(AwsStackArgs, over_the_wire({"clusterName": rpc.UNKNOWN}))


def test_a_map_inputs_fix_reads_as_an_input_not_a_mangled_command():
    # Before: "Fix: set the input --path to 'tags.<name>' <text>" (the key pattern stopped at '<').
    def program() -> None:
        components.S3SnapshotBucket("snapshots", components.S3SnapshotBucketArgs(region="eu-west-1",
                                                                                  tags={"team": 7}))

    _, stopped = run(program)
    assert [str(error) for error in stopped] == [
        "tags: expected a map of strings, got {'team': 7}. Fix: set the input tags.<name> to <text>"]
