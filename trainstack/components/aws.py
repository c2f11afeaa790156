"""AwsStack, hosted: the whole EKS training stack from typed Args (the keys of `Pulumi.aws.yaml`).

A façade over trainstack.infra.aws.AwsStack. Its Args are the stack file's settings, typed; they become stack config
again and go through parse_aws_config and the budget check exactly as `pulumi up` of this repository's
program does, so the same settings build the same resources (tests/library/test_facades.py compares the
graphs), as children of the infra component.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

import pulumi

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.aws_provider import available_zones, aws_location
from trainstack.components.job_args import Job
from trainstack.components.part_config import checkable_id
from trainstack.components.providers import given_provider
from trainstack.components.stack_config import FROM_ROOT, checked_stack_config, publish_stack_outputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.aws import AwsStack as InfraAwsStack
from trainstack.infra.aws import AwsStackArgs as InfraAwsStackArgs
from trainstack.infra.aws import parse_aws_config
from trainstack.infra.aws.config import AwsStackConfig, ExistingNetwork
from trainstack.infra.aws.cost import estimate_aws_cost

# Settings that configure the AWS provider rather than trainstack (aws:region, aws:profile).
PROVIDER_KEYS = {"region": "aws:region", "profile": "aws:profile"}


@dataclass(kw_only=True)
class AwsExistingNetwork:
    """A VPC and its subnets to use instead of creating them."""

    vpc_id: pulumi.Input[str]
    """The VPC, e.g. vpc-0123abcd, or your own aws.ec2.Vpc's id."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Private subnets (with a NAT route) for the nodes, in two or more zones (outputs: one per zone, each gets an EFS mount target)."""
    public_subnet_ids: list[pulumi.Input[str]] | None = None
    """Public subnets for load balancers, if any."""


@dataclass(kw_only=True)
class EksSystemNodes:
    """The CPU node group for system pods (Kueue, TensorBoard, the autoscaler)."""

    instance_type: str | None = None
    """An x86 instance type without GPUs (default t3.medium)."""
    min: int | None = None
    """Nodes at least (default 1)."""
    desired: int | None = None
    """Nodes now (default 1)."""
    max: int | None = None
    """Nodes at most (default 2)."""
    disk_size_gb: int | None = None
    """Root volume size in GB (default 20)."""


@dataclass(kw_only=True)
class EksGpuNodes:
    """The GPU node group: spot or on-demand, scaling to zero."""

    instance_types: list[str] | None = None
    """x86 GPU instance types with the same GPU count, e.g. [g4dn.xlarge]."""
    min: int | None = None
    """Nodes at least (default 0)."""
    desired: int | None = None
    """Nodes now (default: what the job needs without the autoscaler, else min)."""
    max: int | None = None
    """Nodes at most (default: what the job needs at its largest)."""
    disk_size_gb: int | None = None
    """Root volume size in GB."""
    capacity_type: str | None = None
    """SPOT or ON_DEMAND (default SPOT); with efa also CAPACITY_BLOCK (needs capacity_reservation_id)."""
    capacity_reservation_id: str | None = None
    """cr-...: the On-Demand Capacity Reservation or Capacity Block the group launches into (efa groups only)."""
    ssh_public_key: str | None = None
    """An OpenSSH public key for the nodes (default: no SSH)."""
    ignore_scaling_changes: bool | None = None
    """Leave the group's size to the cluster autoscaler (default: true with the autoscaler)."""
    efa: bool | None = None
    """An EFA group: one p5/p5e/p5en/p6-b200 type, every EFA interface, a cluster placement group (default false)."""
    efa_interfaces: int | None = None
    """Only a check: the EFA interfaces of the type (32 on p5, 16 on p5en, 8 on p6-b200)."""
    zone: str | None = None
    """The EFA group's one zone, for its placement group and subnet (default: the first availability zone)."""
    placement_group: str | None = None
    """An existing cluster placement group of the region the EFA group launches into; preflight reads it (default: a new cluster placement group, none with a reservation)."""
    topology_aware: bool | None = None
    """Kueue places multi-node jobs by the nodes' EC2 instance topology labels (default on with efa where EC2 describes topology)."""


@dataclass(kw_only=True)
class AwsStackArgs:
    """The EKS stack's settings: the keys of Pulumi.aws.yaml (trainstack:* and aws:region, aws:profile)."""

    region: str | None = None
    """The AWS region (aws:region; default: the given aws provider's, needed without an aws provider, or with one whose settings are other resources' outputs)."""
    profile: str | None = None
    """A named AWS CLI profile for the kubeconfig, and for the provider the stack makes when none is given (aws:profile)."""
    cluster_name: str | None = None
    """The EKS cluster's name (default trainstack-<stack>)."""
    kubernetes_version: str | None = None
    """The EKS Kubernetes version (one trainstack supports)."""
    availability_zones: list[str] | None = None
    """Two or more zones of the region (default: with a given aws provider, up to four zones of its region that are available to the account; else the region's seed zones)."""
    vpc_cidr: str | None = None
    """The VPC the stack creates (default 10.0.0.0/16)."""
    nat_gateway_per_zone: bool | None = None
    """One NAT gateway per zone instead of one in all (default false)."""
    existing_network: AwsExistingNetwork | None = None
    """A VPC and subnets to use instead of creating them."""
    system_nodes: EksSystemNodes | None = None
    """The CPU node group."""
    gpu_nodes: EksGpuNodes | None = None
    """The GPU node group."""
    job: Job | None = None
    """The training job."""
    max_hourly_usd: float | None = None
    """Refuse to deploy when the estimate at the groups' maximum exceeds this many USD an hour."""
    max_run_usd: float | None = None
    """Refuse to deploy when the job's estimated run exceeds this many USD."""
    delete_bucket_on_destroy: bool | None = None
    """Delete the snapshot bucket and its contents on destroy (default false)."""
    protect_shared_filesystem: bool | None = None
    """Refuse to destroy the EFS file system, which holds the runs (default true)."""
    cluster_admins: list[str] | None = None
    """IAM principals (ARNs) given cluster-admin access."""
    preview_role_arn: str | None = None
    """An IAM role given read-only access for pull-request previews."""
    api_endpoint: str | None = None
    """public or private (default public)."""
    api_public_access_cidrs: list[str] | None = None
    """CIDR blocks that may reach a public endpoint."""
    control_plane_logs: list[str] | None = None
    """EKS control-plane log types to send to CloudWatch."""
    cluster_autoscaler: bool | None = None
    """Run cluster-autoscaler for the GPU group (scale from and to zero; default true)."""
    tags: dict[str, str] | None = None
    """Extra tags on every AWS resource that takes tags (plus app and pulumi-stack)."""


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
        # The stack file's program (__main__.py) hands over the config it parsed and checked, in the stack
        # file's terms; its infra stack sat at the stack's root before this façade existed (FROM_ROOT).
        from_stack_file = isinstance(args, AwsStackConfig)
        config, settings_known = (args, True) if from_stack_file else checked_config(
            name, args_from_inputs(AwsStackArgs, args), given)
        super().__init__(token("AwsStack"), name, None, moved_from_index("AwsStack", opts))

        stack = InfraAwsStack(name, InfraAwsStackArgs(config=config, provider=given,
                                                       provider_settings_known=settings_known), opts=pulumi.ResourceOptions(
            parent=self, aliases=FROM_ROOT if from_stack_file else None))
        self.outputs = stack.outputs  # Python: the stack file's exports, kubeconfig included
        publish_stack_outputs(self, stack.outputs)


def checked_config(name: str, args: AwsStackArgs,
                   given: pulumi.ProviderResource | None) -> tuple[AwsStackConfig, bool]:
    """`args` through the stack's parser and budget check, in the caller's terms, and whether the given provider's
    settings are known (aws_location). IDs that are outputs (your own Vpc and Subnets) are checked by AWS: the
    parser sees stand-ins, the stack gets the IDs."""
    existing = args.existing_network
    region, settings_known = aws_location(given, args.region)
    zones = args.availability_zones
    if zones is None and existing is None and given is not None:
        zones = available_zones(given)  # any region: the zones the caller's account sees there
    checkable = dataclasses.replace(args, region=region, availability_zones=zones, existing_network=existing and (
        AwsExistingNetwork(vpc_id=checkable_id(existing.vpc_id, "vpc"),
                           private_subnet_ids=[checkable_id(s, "subnet", i)
                                               for i, s in enumerate(existing.private_subnet_ids)],
                           public_subnet_ids=[checkable_id(s, "subnet", 100 + i)
                                              for i, s in enumerate(existing.public_subnet_ids or ())])))
    config = checked_stack_config(f"AwsStack {name!r}", checkable, PROVIDER_KEYS, parse_aws_config, estimate_aws_cost)
    if existing is None:
        return config, settings_known
    return dataclasses.replace(config, network=dataclasses.replace(config.network, existing=ExistingNetwork(
        vpc_id=existing.vpc_id, private_subnet_ids=tuple(existing.private_subnet_ids),
        public_subnet_ids=tuple(existing.public_subnet_ids or ())))), settings_known
