"""EksCluster, hosted: the AWS stack's EKS cluster (trainstack.infra.aws.cluster) on a VPC and subnets given by id.

The cluster (pulumi-eks, access entries, control-plane logs), its system and spot GPU node groups and,
by default, the cluster autoscaler (trainstack.infra.aws.cluster_autoscaler) that grows the GPU group from
zero. The settings go through the AWS stack's parser and its preflight before anything is created.
"""

import dataclasses
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.aws import EksGpuNodes, EksSystemNodes
from trainstack.components.part_config import checked_as_inputs, parsed_as_inputs, raw_config
from trainstack.infra.aws import preflight
from trainstack.infra.aws.cluster import EksCluster as InfraEksCluster
from trainstack.infra.aws.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from trainstack.infra.aws.config import parse_aws_config
from trainstack.infra.aws.stack import eks_cluster_args

PROVIDER_KEYS = {"region": "aws:region", "profile": "aws:profile"}
# The stack file's keys -> this part's inputs.
RENAMES = {f"existingNetwork.{key}": key for key in ("vpcId", "privateSubnetIds", "publicSubnetIds")}


@dataclass(kw_only=True)
class EksClusterArgs:
    """An EKS cluster for GPU training on an existing VPC; unset inputs keep the AWS stack's defaults."""

    region: str
    """The AWS region."""
    vpc_id: pulumi.Input[str]
    """The VPC, e.g. vpc-0123abcd."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Private subnets (with a NAT route) for the nodes, in two or more zones."""
    public_subnet_ids: list[pulumi.Input[str]] | None = None
    """Public subnets for load balancers, if any."""
    profile: str | None = None
    """A named AWS CLI profile for the provider and the kubeconfig."""
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
    """Labels every GPU node carries (what TrainingPlatform's plain gpu.nodeSelector must say)."""
    gpu_tolerations: pulumi.Output[list[dict[str, str]]]
    """Tolerations for the GPU nodes' taint (what TrainingPlatform's plain gpu.tolerations must say)."""
    gpus_per_node: pulumi.Output[int]
    """GPUs on each GPU node (TrainingPlatform's plain gpu.gpusPerNode)."""
    gpu_accelerator: pulumi.Output[str]
    """The GPU group's first instance type (TrainingPlatform's plain gpu.accelerator)."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = args_from_inputs(EksClusterArgs, args)
        raw = raw_config(
            {"aws:region": args.region, "aws:profile": args.profile},
            clusterName=args.cluster_name, kubernetesVersion=args.kubernetes_version, systemNodes=args.system_nodes,
            gpuNodes=args.gpu_nodes, clusterAdmins=args.cluster_admins, previewRoleArn=args.preview_role_arn,
            apiEndpoint=args.api_endpoint, apiPublicAccessCidrs=args.api_public_access_cidrs,
            controlPlaneLogs=args.control_plane_logs, clusterAutoscaler=args.cluster_autoscaler, tags=args.tags,
            job={"enabled": False}, existingNetwork=known_network(args))
        config = parsed_as_inputs(parse_aws_config, raw, PROVIDER_KEYS, RENAMES)
        # The subnets are given: their zones are not the parser's defaults (the preflight checks no zones).
        config = dataclasses.replace(config, network=dataclasses.replace(config.network, availability_zones=()))
        super().__init__("trainstack:index:EksCluster", name, None, opts)

        tags = {"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **config.tags}
        provider = aws.Provider(f"{name}-aws", region=config.region, profile=config.aws_profile,
                                opts=pulumi.ResourceOptions(parent=self))
        checks = preflight.gate(config, provider, parent=self,
                                checked=lambda check: checked_as_inputs(check, PROVIDER_KEYS, RENAMES))
        child = pulumi.ResourceOptions(parent=self, providers={"aws": provider}, depends_on=checks)
        # EFA groups are refused with existingNetwork by the parser, so no EFA subnet is needed here.
        cluster = InfraEksCluster(name, eks_cluster_args(
            config, vpc_id=args.vpc_id, public_subnet_ids=list(args.public_subnet_ids or ()),
            private_subnet_ids=list(args.private_subnet_ids), tags=tags), opts=child)
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
        self.gpu_node_selector = pulumi.Output.from_input(dict(placement.node_selector))
        self.gpu_tolerations = pulumi.Output.from_input([dict(t) for t in placement.tolerations])
        self.gpus_per_node = pulumi.Output.from_input(placement.gpus_per_node)
        self.gpu_accelerator = pulumi.Output.from_input(placement.accelerator)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig,
                               "oidcProviderArn": self.oidc_provider_arn, "oidcIssuer": self.oidc_issuer,
                               "gpuNodeSelector": self.gpu_node_selector, "gpuTolerations": self.gpu_tolerations,
                               "gpusPerNode": self.gpus_per_node, "gpuAccelerator": self.gpu_accelerator})


def known_network(args: EksClusterArgs) -> dict | None:
    """The VPC and subnets as the stack parser's existingNetwork, to check their IDs, when all are known now
    (plain strings); IDs that are other resources' outputs are left to EKS."""
    network = {"vpcId": args.vpc_id, "privateSubnetIds": args.private_subnet_ids,
               "publicSubnetIds": args.public_subnet_ids or []}
    values = [args.vpc_id, *args.private_subnet_ids, *(args.public_subnet_ids or ())]
    return network if all(isinstance(value, str) for value in values) else None
