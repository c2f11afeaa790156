"""The AWS stack's settings as one typed model: AwsStack's Args, and what `Pulumi.aws.yaml` loads into.

Each field declares its own check (trainstack/infra/config/loader.py setting: a reader of reader.py and its
options), run with the field's full key when a stack file or a component's inputs are loaded; resolve_aws
(trainstack/infra/aws/config.py) applies the defaults and the rules between fields. No cloud SDK here: the
schema's type names are these classes' names (trainstack.components re-exports them).
"""

import dataclasses
from dataclasses import dataclass

import pulumi

from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.loader import setting
from trainstack.infra.config.reader import (
    as_bool,
    as_choice,
    as_cidr_list,
    as_int,
    as_number,
    as_str,
    as_str_list,
    as_str_map,
)


@dataclass(kw_only=True)
class AwsExistingNetwork:
    """A VPC and its subnets to use instead of creating them."""

    vpc_id: pulumi.Input[str] = setting(as_str, default=dataclasses.MISSING)
    """The VPC, e.g. vpc-0123abcd, or your own aws.ec2.Vpc's id."""
    public_subnet_ids: list[pulumi.Input[str]] | None = setting(as_str_list, allow_empty=True)
    """Public subnets for load balancers, if any."""
    private_subnet_ids: list[pulumi.Input[str]] = setting(as_str_list, default=dataclasses.MISSING)
    """Private subnets (with a NAT route) for the nodes, in two or more zones (outputs: one per zone, each gets an EFS mount target)."""


@dataclass(kw_only=True)
class EksSystemNodes:
    """The CPU node group for system pods (Kueue, TensorBoard, the autoscaler)."""

    instance_type: str | None = setting(as_str)
    """An x86 instance type without GPUs (default t3.medium)."""
    min: int | None = setting(as_int, minimum=1)
    """Nodes at least (default 1)."""
    desired: int | None = setting(as_int, minimum=1)
    """Nodes now (default 1)."""
    max: int | None = setting(as_int, minimum=1)
    """Nodes at most (default 2)."""
    disk_size_gb: int | None = setting(as_int, minimum=20, maximum=16384)
    """Root volume size in GB (default 20)."""


@dataclass(kw_only=True)
class EksGpuNodes:
    """The GPU node group: spot or on-demand, scaling to zero."""

    instance_types: list[str] | None = setting(as_str_list)
    """x86 GPU instance types with the same GPU count, e.g. [g4dn.xlarge]."""
    min: int | None = setting(as_int, minimum=0)
    """Nodes at least (default 0)."""
    desired: int | None = setting(as_int, minimum=0)
    """Nodes now (default: what the job needs without the autoscaler, else min)."""
    max: int | None = setting(as_int, minimum=1)
    """Nodes at most (default: what the job needs at its largest)."""
    disk_size_gb: int | None = setting(as_int, minimum=20, maximum=16384)
    """Root volume size in GB."""
    capacity_type: str | None = setting(as_str)
    """SPOT or ON_DEMAND (default SPOT); with efa also CAPACITY_BLOCK (needs capacity_reservation_id)."""
    ssh_public_key: str | None = setting(as_str)
    """An OpenSSH public key for the nodes (default: no SSH)."""
    ignore_scaling_changes: bool | None = setting(as_bool)
    """Leave the group's size to the cluster autoscaler (default: true with the autoscaler)."""
    efa: bool | None = setting(as_bool)
    """An EFA group: one p5/p5e/p5en/p6-b200 type, every EFA interface, a cluster placement group (default false)."""
    efa_interfaces: int | None = setting(as_int, minimum=1)
    """Only a check: the EFA interfaces of the type (32 on p5, 16 on p5en, 8 on p6-b200)."""
    zone: str | None = setting(as_str)
    """The EFA group's one zone, for its placement group and subnet (default: the first availability zone)."""
    capacity_reservation_id: str | None = setting(as_str)
    """cr-...: the On-Demand Capacity Reservation or Capacity Block the group launches into (efa groups only)."""
    placement_group: str | None = setting(as_str)
    """An existing cluster placement group of the region the EFA group launches into; preflight reads it (default: a new cluster placement group, none with a reservation)."""
    topology_aware: bool | None = setting(as_bool)
    """Kueue places multi-node jobs by the nodes' EC2 instance topology labels (default on with efa where EC2 describes topology)."""


@dataclass(kw_only=True)
class AwsStackArgs:
    """The EKS stack's settings: the keys of Pulumi.aws.yaml (trainstack:* and aws:region, aws:profile)."""

    region: str | None = None
    """The AWS region (aws:region; default: the given aws provider's, needed without an aws provider, or with one whose settings are other resources' outputs)."""
    profile: str | None = None
    """A named AWS CLI profile for the kubeconfig, and for the provider the stack makes when none is given (aws:profile)."""
    kubeconfig_role_arn: pulumi.Input[str] | None = setting(stack_file=False)
    """An IAM role the kubeconfig (and the cluster's Kubernetes provider) assumes to sign in: set it to your aws provider's assume-role ARN, or the Kubernetes objects are made as the ambient identity, which is not a cluster admin unless listed in clusterAdmins. Not a stack file key: a stack's own provider has no assume-role."""
    cluster_name: str | None = setting(as_str)
    """The EKS cluster's name (default trainstack-<stack>)."""
    kubernetes_version: str | None = setting(as_str)
    """The EKS Kubernetes version (one trainstack supports)."""
    availability_zones: list[str] | None = setting(as_str_list, allow_empty=True)
    """Two or more zones of the region (default: with a given aws provider, up to four zones of its region that are available to the account; else the region's seed zones)."""
    vpc_cidr: str | None = setting(as_str)
    """The VPC the stack creates (default 10.0.0.0/16)."""
    nat_gateway_per_zone: bool | None = setting(as_bool)
    """One NAT gateway per zone instead of one in all (default false)."""
    existing_network: AwsExistingNetwork | None = None
    """A VPC and subnets to use instead of creating them."""
    system_nodes: EksSystemNodes | None = None
    """The CPU node group."""
    gpu_nodes: EksGpuNodes | None = None
    """The GPU node group."""
    job: Job | None = None
    """The training job."""
    max_hourly_usd: float | None = setting(as_number, minimum=0.01)
    """Refuse to deploy when the estimate at the groups' maximum exceeds this many USD an hour."""
    max_run_usd: float | None = setting(as_number, minimum=0.01)
    """Refuse to deploy when the job's estimated run exceeds this many USD."""
    delete_bucket_on_destroy: bool | None = setting(as_bool)
    """Delete the snapshot bucket and its contents on destroy (default false)."""
    protect_shared_filesystem: bool | None = setting(as_bool)
    """Refuse to destroy the EFS file system, which holds the runs (default true)."""
    cluster_admins: list[str] | None = setting(as_str_list, allow_empty=True)
    """IAM principals (ARNs) given cluster-admin access."""
    preview_role_arn: str | None = setting(as_str)
    """An IAM role given read-only access for pull-request previews."""
    api_endpoint: str | None = setting(as_choice, choices=("public", "private"))
    """public or private (default public)."""
    api_public_access_cidrs: list[str] | None = setting(as_cidr_list)
    """CIDR blocks that may reach a public endpoint."""
    control_plane_logs: list[str] | None = setting(as_str_list, allow_empty=True)
    """EKS control-plane log types to send to CloudWatch."""
    cluster_autoscaler: bool | None = setting(as_bool)
    """Run cluster-autoscaler for the GPU group (scale from and to zero; default true)."""
    tags: dict[str, str] | None = setting(as_str_map)
    """Extra tags on every AWS resource that takes tags (plus app and pulumi-stack)."""
