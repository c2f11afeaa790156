"""EksCluster, hosted: the AWS stack's EKS cluster (trainstack.infra.aws.cluster) on a VPC and subnets given by id.

The cluster (pulumi-eks, access entries, control-plane logs), its system and spot GPU node groups and,
by default, the cluster autoscaler (trainstack.infra.aws.cluster_autoscaler) that grows the GPU group from
zero. The settings are checked and resolved as the AWS stack's (resolve_aws), and its preflight runs, before
anything is created.

It builds with the aws provider it is given (trainstack/components/providers.py), in that provider's region;
without one, it makes one from `region` (and `profile`). The VPC and subnet IDs may be other resources'
outputs (your own aws.ec2.Vpc and Subnet, in any Region): plain IDs are checked now, outputs by EKS.

In Python, `kubernetes_provider` is the cluster's Kubernetes provider, to pass to your own Kubernetes
resources (`opts=ResourceOptions(provider=cluster.kubernetes_provider)`) or to TrainingPlatform. Other languages
make one from the kubeconfig output: `kubernetes.Provider(kubeconfig=cluster.kubeconfig,
clusterIdentifier=cluster.clusterName)`.
"""

import dataclasses
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.components.aws_provider import aws_location
from trainstack.components.part_config import checked_as_inputs, shared_settings
from trainstack.components.providers import given_provider
from trainstack.components.stack_config import stack_errors_as_inputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.aws import preflight
from trainstack.infra.aws.cluster import EksCluster as InfraEksCluster
from trainstack.infra.aws.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from trainstack.infra.aws.config import PROVIDER_FIELDS, resolve_aws
from trainstack.infra.aws.settings import AwsExistingNetwork, AwsStackArgs, EksGpuNodes, EksSystemNodes
from trainstack.infra.aws.stack import eks_cluster_args
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.known_outputs import known_output
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.core.unknown_answers import not_known_yet

# The stack file's keys -> this part's inputs.
RENAMES = {f"existingNetwork.{key}": key for key in ("vpcId", "privateSubnetIds", "publicSubnetIds")}


@dataclass(kw_only=True)
class EksClusterArgs:
    """An EKS cluster for GPU training on an existing VPC; unset inputs keep the AWS stack's defaults."""

    region: str | None = None
    """The AWS region (default: the given aws provider's; needed without an aws provider, or with one whose settings are other resources' outputs)."""
    vpc_id: pulumi.Input[str]
    """The VPC, e.g. vpc-0123abcd."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Private subnets (with a NAT route) for the nodes, in two or more zones."""
    public_subnet_ids: list[pulumi.Input[str]] | None = None
    """Public subnets for load balancers, if any."""
    profile: str | None = None
    """A named AWS CLI profile for the kubeconfig, and for the provider the part makes when none is given."""
    kubeconfig_role_arn: pulumi.Input[str] | None = None
    """An IAM role the kubeconfig (and the cluster's Kubernetes provider) assumes to sign in: set it to your aws provider's assume-role ARN, or the Kubernetes objects are made as the ambient identity, which is not a cluster admin unless listed in clusterAdmins."""
    cluster_name: str | None = None
    """The EKS cluster's name (default trainstack-<stack>)."""
    kubernetes_version: str | None = None
    """The EKS Kubernetes version (one trainstack supports)."""
    system_nodes: EksSystemNodes | None = None
    """The CPU node group."""
    gpu_nodes: EksGpuNodes | None = None
    """The GPU node group."""
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


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with a system node group and a spot GPU node group (IMDSv2, access entries, IRSA), and the cluster autoscaler."""

    cluster_name: pulumi.Output[str]
    """The cluster's name, once it and its system nodes exist: EfsStorage's clusterName."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret; tokens from `aws eks get-token`): the kubeconfig of the in-cluster parts."""
    oidc_provider_arn: pulumi.Output[str]
    """The cluster's IAM OIDC provider, for IRSA roles (EfsStorage's oidcProviderArn)."""
    oidc_issuer: pulumi.Output[str]
    """The cluster's OIDC issuer without https:// (EfsStorage's oidcIssuer)."""
    gpu_node_selector: pulumi.Output[dict[str, str]]
    """Labels every GPU node carries (TrainingPlatform's gpu.nodeSelector: passed on in Python; written out in other languages, where it is plain)."""
    gpu_tolerations: pulumi.Output[list[dict[str, str]]]
    """Tolerations for the GPU nodes' taint (TrainingPlatform's gpu.tolerations: passed on in Python; written out in other languages, where it is plain)."""
    gpus_per_node: pulumi.Output[int]
    """GPUs on each GPU node (TrainingPlatform's gpu.gpusPerNode: passed on in Python; written out in other languages, where it is plain)."""
    gpu_accelerator: pulumi.Output[str]
    """The GPU group's first instance type (TrainingPlatform's gpu.accelerator: passed on in Python; written out in other languages, where it is plain)."""
    cluster_security_group_id: pulumi.Output[str]
    """The security group EKS made for the cluster, which its managed node groups' nodes carry: open your own resources (a database, an FSx file system) to it."""
    node_role_arn: pulumi.Output[str]
    """The IAM role of both node groups' nodes, once its policies are attached."""
    node_role_name: pulumi.Output[str]
    """The node role's name, to attach your own policies to."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(EksClusterArgs, args)
        given = given_provider(opts, "aws")
        region, settings_known = aws_location(given, args.region)
        with stack_errors_as_inputs(PROVIDER_FIELDS, RENAMES):
            config = resolve_aws(stack_settings(args, region), pulumi.get_stack())
        # The subnets are given: their zones are not the resolver's defaults (the preflight checks no zones).
        config = dataclasses.replace(config, network=dataclasses.replace(config.network, availability_zones=()))
        super().__init__(token("EksCluster"), name, None, moved_from_index("EksCluster", opts))

        tags = {"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **config.tags}
        provider = given or aws.Provider(f"{name}-aws", region=config.region, profile=config.aws_profile,
                                         opts=pulumi.ResourceOptions(parent=self))
        checks = preflight.gate(config, provider, parent=self,
                                checked=lambda check: checked_as_inputs(check, PROVIDER_FIELDS, RENAMES),
                                settings_known=settings_known)
        child = pulumi.ResourceOptions(parent=self, providers={"aws": provider}, depends_on=checks)
        # EFA groups are refused with existingNetwork by resolve_aws, so no EFA subnet is needed here.
        cluster = InfraEksCluster(name, eks_cluster_args(
            config, vpc_id=args.vpc_id, public_subnet_ids=list(args.public_subnet_ids or ()),
            private_subnet_ids=list(args.private_subnet_ids), tags=tags,
            kubeconfig_role_arn=args.kubeconfig_role_arn), opts=child)
        if config.cluster_autoscaler:
            ClusterAutoscaler(f"{name}-autoscaler", ClusterAutoscalerArgs(cluster=cluster, region=config.region,
                                                                          tags=tags), opts=child)
        placement = cluster.gpu_placement
        # Resolves after the cluster (its OIDC issuer) and the system node group: a part given the name
        # (EfsStorage's CSI add-on, whose controller needs a node) waits for both.
        self.cluster_name = pulumi.Output.all(cluster.cluster_name, cluster.oidc_issuer,
                                              cluster.system_node_group.urn).apply(lambda values: values[0])
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        # Known now (decided by the inputs): TrainingPlatform's gpu may take them in Python (known_outputs.py).
        self.gpu_node_selector = known_output(dict(placement.node_selector))
        self.gpu_tolerations = known_output([dict(t) for t in placement.tolerations])
        self.gpus_per_node = known_output(placement.gpus_per_node)
        self.gpu_accelerator = known_output(placement.accelerator)
        self.kubernetes_provider = cluster.provider  # Python only: a resource, not a schema output
        # Unknown at preview when the provider's settings are (its lookup answers nothing: unknown_answers.py).
        self.cluster_security_group_id = aws.eks.get_cluster_output(
            name=self.cluster_name, opts=pulumi.InvokeOutputOptions(parent=self, provider=provider)
        ).apply(lambda found: found.vpc_config.cluster_security_group_id if found.vpc_config else not_known_yet())
        self.node_role_arn = cluster.node_role_arn
        self.node_role_name = cluster.node_role_name
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig,
                               "oidcProviderArn": self.oidc_provider_arn, "oidcIssuer": self.oidc_issuer,
                               "gpuNodeSelector": self.gpu_node_selector, "gpuTolerations": self.gpu_tolerations,
                               "gpusPerNode": self.gpus_per_node, "gpuAccelerator": self.gpu_accelerator,
                               "clusterSecurityGroupId": self.cluster_security_group_id,
                               "nodeRoleArn": self.node_role_arn, "nodeRoleName": self.node_role_name})


def stack_settings(args: EksClusterArgs, region: str) -> AwsStackArgs:
    """The part's inputs as the AWS stack's settings (no job), each field checked as a stack file's would be. The
    VPC and subnet IDs go through as given: plain ones are checked by resolve_aws, outputs by EKS."""
    network = AwsExistingNetwork(vpc_id=args.vpc_id, private_subnet_ids=args.private_subnet_ids,
                                 public_subnet_ids=args.public_subnet_ids)
    return from_inputs(AwsStackArgs, {**shared_settings(args, AwsStackArgs), "region": region,
                                      "job": Job(enabled=False), "existing_network": network}, key=NAMESPACE)
