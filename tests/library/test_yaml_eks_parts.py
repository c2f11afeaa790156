"""examples/yaml-eks-parts: the AWS parts composed in YAML in eu-west-1, on the program's own VPC, subnets and
AWS provider. Checked against the committed schema, then each part constructed as the engine reaches it: the
literals over the wire, each wired value an Output, and the provider its `options` name handed in the resource
options (pulumi/provider/server.py builds them from the Construct request's providers).
"""

import os
import re

import pulumi
import pulumi_aws as aws
import yaml

from tests.aws import stack_runs as aws_runs
from tests.library.test_examples import EXAMPLES, SCHEMA, yaml_example_errors
from tests.library.test_user_program import REGION, assert_all_on, aws_in
from tests.library.wire import over_the_wire, resolved
from tests.pulumi_harness import run_program
from tests.stack_runs import REPO
from trainstack.components import HOSTED
from trainstack.provider import NAME, TrainstackProvider

EXAMPLE = EXAMPLES / "yaml-eks-parts"
PROGRAM = yaml.safe_load((EXAMPLE / "Pulumi.yaml").read_text())
CONFIG = {"deployRoleArn": "arn:aws:iam::210987654321:role/deployer", "apiAccessCidr": "203.0.113.7/32",
          "jobRoleArn": "arn:aws:iam::210987654321:role/training",
          "imageRef": "210987654321.dkr.ecr.eu-west-1.amazonaws.com/trainstack@sha256:" + "ab" * 32}
# What the user's own resources and the parts before resolve to (the values the mocks give them).
OUTPUTS = {"vpc.id": "vpc-0123abcd", "privateA.id": "subnet-0aaa", "privateB.id": "subnet-0bbb",
           "cluster.clusterName": "research", "cluster.oidcProviderArn": aws_runs.OIDC_PROVIDER_ARN,
           "cluster.oidcIssuer": aws_runs.OIDC_ISSUER, "cluster.kubeconfig": aws_runs.KUBECONFIG,
           "shared.volumeName": "default-train-shared", "snapshots.uri": "s3://snapshots-0a1b2c3"}


def test_the_example_is_what_the_schema_says_and_every_part_names_the_users_provider():
    assert yaml_example_errors(PROGRAM) == []
    resources = PROGRAM["resources"]
    assert resources["mine"]["type"] == "pulumi:providers:aws" and resources["mine"]["properties"]["region"] == REGION
    for name, resource in resources.items():
        if resource["type"].startswith("trainstack:aws:"):
            assert resource["options"]["providers"] == ["${mine}"], name
    for reference in re.findall(r"\$\{([^}]+)\}", (EXAMPLE / "Pulumi.yaml").read_text()):
        resource, _, attribute = reference.partition(".")
        if attribute and resources[resource]["type"].startswith("trainstack:"):
            assert attribute in SCHEMA["resources"][resources[resource]["type"]]["properties"], reference
        elif not attribute:
            assert reference in PROGRAM["config"] or reference in resources, reference


def test_each_part_builds_with_the_programs_provider_in_eu_west_1():
    marker = "output-of:"

    def as_outputs(value):
        if isinstance(value, dict):
            return {key: as_outputs(item) for key, item in value.items()}
        if isinstance(value, list):
            return [as_outputs(item) for item in value]
        if isinstance(value, str) and value.startswith(marker):
            return pulumi.Output.from_input(OUTPUTS[value.removeprefix(marker)])
        return value

    def program() -> None:
        mine = aws.Provider("mine", region=REGION, assume_roles=[aws.ProviderAssumeRoleArgs(
            role_arn=CONFIG["deployRoleArn"])], default_tags=aws.ProviderDefaultTagsArgs(tags={"team": "ml"}))
        for name in ("cluster", "shared", "snapshots", "platform"):
            resource = PROGRAM["resources"][name]
            wired = resolved(resource.get("properties", {}), {**CONFIG, **{key: marker + key for key in OUTPUTS}})
            TrainstackProvider(HOSTED, NAME).construct(name, resource["type"], as_outputs(over_the_wire(wired)),
                                                       pulumi.ResourceOptions(providers=[mine]))

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        result = run_program(program, config={}, stack="parts", project="trainstack",
                             outputs=aws_runs.provider_outputs, calls=aws_in(REGION))
    finally:
        os.chdir(cwd)
    assert_all_on(result, "aws", "mine")
    cluster = result.one("eks:index:Cluster")
    assert cluster.inputs["privateSubnetIds"] == ["subnet-0aaa", "subnet-0bbb"]
    # The kubeconfig signs in as the provider's assumed role (the cluster's creator), not the ambient identity.
    assert cluster.inputs["providerCredentialOpts"] == {"roleArn": CONFIG["deployRoleArn"]}
    assert len(result.by_type(aws_runs.MOUNT_TARGET)) == 2
    # The platform claims the file system's volume, on the cluster's kubeconfig.
    claim = result.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert claim.inputs["spec"]["volumeName"] == OUTPUTS["shared.volumeName"]
