"""AwsStack, hosted: the whole EKS training stack from typed Args (the keys of `Pulumi.aws.yaml`).

Its Args are the AWS stack's one typed model (trainstack/infra/aws/settings.py), which a stack file loads into
too: each field checked as it is loaded, then resolved by resolve_aws and the budget check exactly as `pulumi up`
of this repository's program does, so the same settings build the same resources (tests/library/test_facades.py
compares the graphs), as children of the infra component. IDs that are other resources' outputs (your own VPC
and subnets in existingNetwork) go to the infra stack as they are: EKS and EFS check them.
"""

import dataclasses
from typing import Any

import pulumi

from trainstack.components.aws_provider import available_zones, aws_location
from trainstack.components.providers import given_provider
from trainstack.components.stack_config import (
    FROM_ROOT,
    checked_stack,
    publish_stack_outputs,
    stack_errors_as_inputs,
)
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.aws import AwsStack as InfraAwsStack
from trainstack.infra.aws import AwsStackArgs as InfraAwsStackArgs
from trainstack.infra.aws.config import PROVIDER_FIELDS, AwsStackConfig, resolve_aws
from trainstack.infra.aws.cost import estimate_aws_cost
from trainstack.infra.aws.settings import AwsExistingNetwork, AwsStackArgs, EksGpuNodes, EksSystemNodes
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.loader import from_inputs

__all__ = ["AwsExistingNetwork", "AwsStack", "AwsStackArgs", "EksGpuNodes", "EksSystemNodes"]


class AwsStack(pulumi.ComponentResource):
    """The EKS GPU training stack: network, cluster, node groups, EFS, bucket, registry, image, IRSA and the training platform."""

    cluster_name: pulumi.Output[str]
    """The EKS cluster's name."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret; tokens from `aws eks get-token`)."""
    image_ref: pulumi.Output[str]
    """The training image by digest."""
    bucket_name: pulumi.Output[str]
    """The snapshot bucket: data set, checkpoints and exports."""
    stack_outputs: pulumi.Output[dict[str, Any]]
    """Every output this repository's aws stack exports, by the same camelCase names, except the kubeconfig (its own output)."""

    def __init__(self, name: str, args: AwsStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        given = given_provider(opts, "aws")
        # The stack file's program (__main__.py) hands over the config it loaded and resolved, in the stack
        # file's terms; its infra stack sat at the stack's root before this component existed (FROM_ROOT).
        from_stack_file = isinstance(args, AwsStackConfig)
        if from_stack_file:
            config, settings_known, kubeconfig_role_arn = args, True, None
        else:
            args = checked_args(args)
            config, settings_known = checked_config(name, args, given)
            kubeconfig_role_arn = args.kubeconfig_role_arn
        super().__init__(token("AwsStack"), name, None, moved_from_index("AwsStack", opts))

        stack = InfraAwsStack(name, InfraAwsStackArgs(
            config=config, provider=given, provider_settings_known=settings_known,
            kubeconfig_role_arn=kubeconfig_role_arn), opts=pulumi.ResourceOptions(
            parent=self, aliases=FROM_ROOT if from_stack_file else None))
        self.outputs = stack.outputs  # Python: the stack file's exports, kubeconfig included
        publish_stack_outputs(self, stack.outputs)


def checked_args(args: Any) -> AwsStackArgs:
    """The caller's Args (or the provider's dict of them), each field checked, in the caller's terms."""
    with stack_errors_as_inputs(PROVIDER_FIELDS):
        return from_inputs(AwsStackArgs, args, key=NAMESPACE)


def checked_config(name: str, args: AwsStackArgs,
                   given: pulumi.ProviderResource | None) -> tuple[AwsStackConfig, bool]:
    """`args` (checked_args) resolved and through the budget check, in the caller's terms, and whether the given
    provider's settings are known (aws_location). IDs that are outputs (your own Vpc and Subnets) go through as
    they are, checked by AWS."""
    region, settings_known = aws_location(given, args.region)
    zones = args.availability_zones
    if zones is None and args.existing_network is None and given is not None:
        zones = available_zones(given)  # any region: the zones the caller's account sees there
    located = dataclasses.replace(args, region=region, availability_zones=zones)
    config = checked_stack(f"AwsStack {name!r}", PROVIDER_FIELDS, lambda: resolve_aws(located, pulumi.get_stack()),
                           estimate_aws_cost)
    return config, settings_known
