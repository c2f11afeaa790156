"""The EKS cluster (pulumi-eks), its nodes, and the Kubernetes provider every in-cluster object uses.

Two managed node groups: a small on-demand one for the system pods (CoreDNS, the EFS CSI controller),
which must keep running when the GPU group is at zero, and a spot GPU group that only pods tolerating
the GPU taint may use. Both boot from launch templates that require IMDSv2 and encrypt the root disk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from infra import versions
from infra.aws.config import GpuNodeGroupConfig, NodeGroupConfig
from infra.contracts import GPU_RESOURCE, GpuPlacement
from infra.ordering import available_after

# Pods must tolerate this to land on a GPU node, so CPU pods never hold a spot GPU node up.
GPU_TAINT_KEY = GPU_RESOURCE
GPU_TOLERATIONS = ({"key": GPU_TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"},)
# nvidia.com/gpu.present is also what the NVIDIA device plugin chart's default affinity looks for.
GPU_NODE_LABELS = {"trainstack/node-pool": "gpu", "nvidia.com/gpu.present": "true"}
SYSTEM_NODE_LABELS = {"trainstack/node-pool": "system"}

NODE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
CLUSTER_ADMIN_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True, kw_only=True)
class EksClusterArgs:
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    system_nodes: NodeGroupConfig
    gpu_nodes: GpuNodeGroupConfig
    cluster_admin_arns: Sequence[str] = ()
    api_public_access_cidrs: Sequence[str] = ("0.0.0.0/0",)
    # The kubeconfig's `aws eks get-token` uses this profile (set when aws:profile is).
    aws_profile: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def node_trust_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }, sort_keys=True)


class EksCluster(pulumi.ComponentResource):
    cluster_name: pulumi.Output[str]
    kubeconfig_json: pulumi.Output[str]  # secret
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]  # without https://
    provider: k8s.Provider
    system_node_group: eks.ManagedNodeGroup
    gpu_node_group: eks.ManagedNodeGroup
    gpu_placement: GpuPlacement

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)

        cluster = eks.Cluster(
            name,
            name=args.cluster_name,
            version=args.kubernetes_version,
            # Standard support only: past its end EKS upgrades the cluster instead of billing
            # extended support ($0.60/h instead of $0.10/h).
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            vpc_id=args.vpc_id,
            public_subnet_ids=list(args.public_subnet_ids) or None,
            private_subnet_ids=list(args.private_subnet_ids),
            node_associate_public_ip_address=False,
            endpoint_private_access=True,
            endpoint_public_access=True,
            public_access_cidrs=list(args.api_public_access_cidrs),
            # Access entries, not the aws-auth ConfigMap. The identity running `pulumi up` is admin
            # (pulumi-eks bootstraps the cluster creator); trainstack:clusterAdmins adds others.
            authentication_mode=eks.AuthenticationMode.API,
            access_entries={
                f"admin-{index}": eks.AccessEntryArgs(
                    principal_arn=arn,
                    access_policies={"cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=CLUSTER_ADMIN_POLICY_ARN,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )},
                )
                for index, arn in enumerate(args.cluster_admin_arns)
            },
            create_oidc_provider=True,
            # Our own managed node groups below; EKS creates their access entries itself.
            skip_default_node_group=True,
            # The VPC CNI enforces NetworkPolicy only when asked; the training chart's policy (only the
            # job's pods may reach its unauthenticated rendezvous store) depends on it.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            provider_credential_opts=eks.KubeconfigOptionsArgs(profile_name=args.aws_profile)
            if args.aws_profile else None,
            tags=tags,
            opts=child,
        )

        node_role = aws.iam.Role(f"{name}-node", assume_role_policy=node_trust_policy(), tags=tags, opts=child)
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{policy.rsplit('/', 1)[1]}", role=node_role.name,
                                         policy_arn=policy, opts=child)
            for policy in NODE_POLICY_ARNS
        ]
        # Nodes that boot before their policies are attached never join: hand out the ARN after them.
        node_role_arn = available_after(node_role.arn, *attachments)

        key_name = None
        if args.gpu_nodes.ssh_public_key:
            key_name = aws.ec2.KeyPair(f"{name}-gpu-ssh", public_key=args.gpu_nodes.ssh_public_key, tags=tags,
                                       opts=child).key_name

        common = {"cluster": cluster, "node_role_arn": node_role_arn, "subnet_ids": list(args.private_subnet_ids),
                  "version": args.kubernetes_version, "tags": tags}
        self.system_node_group = eks.ManagedNodeGroup(
            f"{name}-system",
            **common,
            ami_type=versions.EKS_SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=list(args.system_nodes.instance_types),
            scaling_config=_scaling(args.system_nodes),
            labels=SYSTEM_NODE_LABELS,
            launch_template=self._launch_template(f"{name}-system", args.system_nodes.disk_size_gb, None, tags),
            opts=child,
        )
        gpu = args.gpu_nodes
        self.gpu_node_group = eks.ManagedNodeGroup(
            f"{name}-gpu",
            **common,
            ami_type=versions.EKS_GPU_AMI_TYPE,
            capacity_type=gpu.capacity_type,
            # Several types widen the spot pools EKS can draw from (capacity-optimized allocation).
            instance_types=list(gpu.instance_types),
            scaling_config=_scaling(gpu),
            labels=GPU_NODE_LABELS,
            taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, value="true", effect="NO_SCHEDULE")],
            launch_template=self._launch_template(f"{name}-gpu", gpu.disk_size_gb, key_name, tags),
            # When an autoscaler owns the size, `pulumi up` must not reset it.
            ignore_scaling_changes=gpu.ignore_scaling_changes,
            opts=child,
        )

        self.gpu_placement = GpuPlacement(
            node_selector=GPU_NODE_LABELS, tolerations=GPU_TOLERATIONS, gpus_per_node=gpu.gpus_per_instance,
            accelerator=gpu.instance_types[0])
        self.cluster_name = pulumi.Output.from_input(args.cluster_name)
        self.kubeconfig_json = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig_json,
            # Replace the provider (and with it every object in the cluster) only when the cluster
            # itself changes, not when its kubeconfig's text does.
            cluster_identifier=args.cluster_name,
            opts=child,
        )
        self.register_outputs({
            "clusterName": self.cluster_name,
            "kubeconfigJson": self.kubeconfig_json,
            "oidcProviderArn": self.oidc_provider_arn,
            "oidcIssuer": self.oidc_issuer,
        })

    def _launch_template(self, name: str, disk_size_gb: int, key_name: pulumi.Input[str] | None,
                         tags: Mapping[str, str]) -> aws.eks.NodeGroupLaunchTemplateArgs:
        template = aws.ec2.LaunchTemplate(
            name,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                # 2, as in EKS's own node launch template: pods that read instance metadata (region,
                # zone) still can; pods with AWS work use IRSA, not the node's role.
                http_put_response_hop_limit=2,
            ),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",  # the AL2023 root volume
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=disk_size_gb, volume_type="gp3", encrypted="true", delete_on_termination="true"),
            )],
            key_name=key_name,
            # Instances and volumes carry the stack's tags (cost allocation); the template's own
            # tags do not propagate.
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**tags, "Name": name})
                for kind in ("instance", "volume")
            ],
            tags=dict(tags),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str))


def _scaling(nodes: NodeGroupConfig) -> aws.eks.NodeGroupScalingConfigArgs:
    return aws.eks.NodeGroupScalingConfigArgs(min_size=nodes.min_size, desired_size=nodes.desired_size,
                                              max_size=nodes.max_size)
