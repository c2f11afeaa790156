"""The EKS cluster (pulumi-eks), its nodes, and the Kubernetes provider every in-cluster object uses.

Two managed node groups: a small on-demand one for the system pods (CoreDNS, the EFS CSI controller,
the cluster autoscaler, TensorBoard), which must keep running when the GPU group is at zero, and a
spot GPU group that only pods tolerating the GPU taint may use. Both boot from launch templates that
require IMDSv2 with a hop limit of 1: containers outside the host network cannot reach the node's
role through instance metadata (pods use IRSA; aws-node, kube-proxy and the EFS CSI node plugin run
on the host network, and the EFS CSI controller falls back to the Kubernetes API for its region).

Access: API authentication mode, no aws-auth ConfigMap. Access entries are keyed by principal ARN, so
reordering `trainstack:clusterAdmins` replaces nothing; the identity that creates the cluster is refused
among the admins (EKS makes it admin), which only the account can tell, so preflight.py asks before any
resource. The PR preview role gets read-only access (see `preview_access_policies`); in CI it is the
identity running `pulumi preview`, and that is fine: its entry is the one the preview needs.
Control-plane logs go to a log group this stack owns (bounded retention, removed by destroy; adopted
when EKS recreated it after a destroy, never while a cluster of that name runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from trainstack.infra.aws.config import (
    ApiEndpointConfig,
    GpuNodeGroupConfig,
    NodeGroupConfig,
    access_entry_key,
)
from trainstack.infra.aws.efa import EFA_POD_RESOURCES, EFA_RESOURCE, efa_network_interfaces
from trainstack.infra.aws.efa_networking import EfaNetworking, EfaNetworkingArgs
from trainstack.infra.aws.efa_node_config import efa_node_user_data
from trainstack.infra.aws.node_disk import NODE_TEMPLATE_RESOURCE_TAG, eks_allocatable_ephemeral_storage
from trainstack.infra.aws.placement import creates_placement_group, reservation_placement_group
from trainstack.infra.aws.reserved_updates import guarded_template_version
from trainstack.infra.aws.topology import efa_topology, warn_unless_one_block
from trainstack.infra.config import NAMESPACE
from trainstack.infra.core import versions
from trainstack.infra.core.contracts import GPU_RESOURCE, GpuPlacement
from trainstack.infra.core.ordering import available_after
from trainstack.infra.core.unknown_answers import not_known_yet

# Pods must tolerate this to land on a GPU node, so CPU pods never hold a spot GPU node up.
GPU_TAINT_KEY = GPU_RESOURCE
GPU_TOLERATIONS = ({"key": GPU_TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"},)
# nvidia.com/gpu.present is also what the NVIDIA device plugin chart's default affinity looks for;
# k8s.amazonaws.com/accelerator is the cluster autoscaler's GPU label on AWS (GPULabel in
# cloudprovider/aws/aws_cloud_provider.go): a new node that has it but advertises no GPU yet counts
# as not ready, so the autoscaler waits for the device plugin instead of adding another node.
GPU_NODE_LABELS = {"trainstack/node-pool": "gpu", "nvidia.com/gpu.present": "true",
                   "k8s.amazonaws.com/accelerator": "nvidia"}
SYSTEM_NODE_LABELS = {"trainstack/node-pool": "system"}
# The tag that records a deliberate on-demand GPU group (policy/rules/cost.py ON_DEMAND_OVERRIDE).
ON_DEMAND_TAG = ("trainstack-capacity", "on-demand")

NODE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
ACCESS_POLICY = "arn:aws:eks::aws:cluster-access-policy/"
CLUSTER_ADMIN_POLICY_ARN = ACCESS_POLICY + "AmazonEKSClusterAdminPolicy"
# The preview role reads everything but Secrets cluster-wide (AmazonEKSViewPolicy), and Secrets only in
# the namespaces that hold Helm releases (AmazonEKSAdminViewPolicy: view, Secrets included): a
# helm.v3.Release reads its state from the `sh.helm.release.v1.*` Secrets of its namespace.
VIEW_POLICY_ARN = ACCESS_POLICY + "AmazonEKSViewPolicy"
ADMIN_VIEW_POLICY_ARN = ACCESS_POLICY + "AmazonEKSAdminViewPolicy"
# EKS writes control-plane logs here; created first so that its retention is ours and destroy removes it.
CONTROL_PLANE_LOG_RETENTION_DAYS = 90


@dataclass(frozen=True, kw_only=True)
class EksClusterArgs:
    cluster_name: str
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    system_nodes: NodeGroupConfig
    gpu_nodes: GpuNodeGroupConfig
    api_endpoint: ApiEndpointConfig
    cluster_admin_arns: Sequence[str] = ()
    # Read-only access for `pulumi preview` in pull requests; Secrets readable only in these namespaces.
    preview_role_arn: str | None = None
    preview_secret_namespaces: Sequence[str] = ()
    control_plane_logs: Sequence[str] = ()
    # The cluster autoscaler owns both groups' sizes: `pulumi up` must not reset them.
    autoscaled: bool = False
    # The kubeconfig's `aws eks get-token` uses this profile (set when aws:profile is) and assumes this role
    # (set for a caller's assume-role provider: pulumi-eks signs in with the ambient identity otherwise).
    aws_profile: str | None = None
    kubeconfig_role_arn: pulumi.Input[str] | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    # An EFA GPU group (gpu_nodes.efa) lives in this one private subnet, in its zone's placement group.
    efa_subnet_id: pulumi.Input[str] | None = None


def control_plane_log_group(cluster_name: str) -> str:
    """The log group EKS writes control-plane logs to; EKS chooses the name, not us."""
    return f"/aws/eks/{cluster_name}/cluster"


def log_group_exists(name: str, parent: pulumi.Resource) -> bool:
    """Asked while the program runs (resource options cannot wait for an Output), in previews too."""
    found = aws.cloudwatch.get_log_groups(log_group_name_prefix=name, opts=pulumi.InvokeOptions(parent=parent))
    return name in (found.log_group_names or ())


def eks_cluster_exists(cluster_name: str, parent: pulumi.Resource) -> bool:
    """Whether the region already has a cluster of that name (eks:ListClusters), asked while the program runs."""
    found = aws.eks.get_clusters(opts=pulumi.InvokeOptions(parent=parent))
    return cluster_name in (found.names or ())


def adopts_log_group(cluster_name: str, parent: pulumi.Resource) -> bool:
    """Adopt the control-plane log group only when it is an orphan: it exists and no cluster of that name runs.

    An existing group with a live cluster is either this stack's own (already in its state, so nothing
    to import) or another stack's cluster of the same name: importing that one would rewrite its
    retention and tags, and our destroy would delete its audit logs (an imported resource is deleted
    like any other; import happens whenever the resource has no state, pulumi/pulumi
    pkg/resource/deploy/step_generator.go). The create then fails as it should, next to the cluster's.
    """
    group = control_plane_log_group(cluster_name)
    return log_group_exists(group, parent) and not eks_cluster_exists(cluster_name, parent)


def preview_access_policies(namespaces: Sequence[str]) -> dict[str, eks.AccessPolicyAssociationArgs]:
    policies = {"view": eks.AccessPolicyAssociationArgs(
        policy_arn=VIEW_POLICY_ARN, access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))}
    if namespaces:
        policies["release-state"] = eks.AccessPolicyAssociationArgs(
            policy_arn=ADMIN_VIEW_POLICY_ARN,
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="namespace",
                                                                        namespaces=sorted(set(namespaces))))
    return policies


def node_trust_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }, sort_keys=True)


def arn_partition(arn: str | None) -> pulumi.Input[str]:
    """aws, aws-cn or aws-us-gov from the caller's ARN; unknown when the lookup answered nothing (a preview of
    a caller's provider whose settings are outputs: trainstack/infra/core/unknown_answers.py)."""
    return arn.split(":")[1] if arn else not_known_yet()


class EksCluster(pulumi.ComponentResource):
    cluster_name: pulumi.Output[str]
    kubernetes_version: str
    account_id: pulumi.Output[str]  # of the identity running Pulumi: the cluster's account
    partition: pulumi.Output[str]  # aws, aws-cn, aws-us-gov
    kubeconfig_json: pulumi.Output[str]  # secret
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]  # without https://
    provider: k8s.Provider
    system_node_group: eks.ManagedNodeGroup
    gpu_node_group: eks.ManagedNodeGroup
    gpu_placement: GpuPlacement
    gpu_local_disk: str  # one GPU node's allocatable ephemeral-storage (estimate, trainstack/infra/aws/node_disk.py)

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)

        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        self.account_id = caller.account_id
        self.partition = caller.arn.apply(arn_partition)

        def entry(arn: str, policies: Mapping[str, eks.AccessPolicyAssociationArgs]) -> eks.AccessEntryArgs:
            return eks.AccessEntryArgs(principal_arn=arn, access_policies=dict(policies))

        admin = {"cluster-admin": eks.AccessPolicyAssociationArgs(
            policy_arn=CLUSTER_ADMIN_POLICY_ARN,
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))}
        # Keyed by ARN: a list position would replace entries whenever the list is reordered.
        access_entries = {f"admin-{access_entry_key(arn)}": entry(arn, admin)
                          for arn in args.cluster_admin_arns}
        if args.preview_role_arn:
            access_entries[f"preview-{access_entry_key(args.preview_role_arn)}"] = entry(
                args.preview_role_arn, preview_access_policies(args.preview_secret_namespaces))

        depends_on: list[pulumi.Resource] = []
        if args.control_plane_logs:
            log_group = control_plane_log_group(args.cluster_name)
            depends_on.append(aws.cloudwatch.LogGroup(
                f"{name}-control-plane",
                name=log_group,
                retention_in_days=CONTROL_PLANE_LOG_RETENTION_DAYS,
                tags=tags,
                # After `pulumi destroy` EKS still flushes late log streams and recreates the group (never
                # expiring); creating it again then fails with ResourceAlreadyExistsException
                # (terraform-aws-modules/terraform-aws-eks#2486, #2763). A group that exists is adopted:
                # Pulumi imports it, then applies our retention and tags as an update (the `import`
                # option's behaviour since pulumi/pulumi#19339, documented in pulumi/docs#16580 and
                # #18198); one this stack already holds is simply itself (same ID: no second import,
                # pulumi developer-docs/architecture/import.md). Never a live cluster's (adopts_log_group).
                opts=pulumi.ResourceOptions(parent=self,
                                            import_=log_group if adopts_log_group(args.cluster_name, self) else None),
            ))

        endpoint = args.api_endpoint
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
            endpoint_public_access=not endpoint.private,
            public_access_cidrs=list(endpoint.public_access_cidrs) or None,
            enabled_cluster_log_types=list(args.control_plane_logs) or None,
            # Access entries, not the aws-auth ConfigMap. The identity running `pulumi up` is admin
            # (pulumi-eks bootstraps the cluster creator); trainstack:clusterAdmins adds others.
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries,
            create_oidc_provider=True,
            # Our own managed node groups below; EKS creates their access entries itself.
            skip_default_node_group=True,
            # The VPC CNI enforces NetworkPolicy only when asked; the training chart's policy (only the
            # job's pods may reach its unauthenticated rendezvous store) depends on it.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            provider_credential_opts=eks.KubeconfigOptionsArgs(profile_name=args.aws_profile,
                                                               role_arn=args.kubeconfig_role_arn)
            if args.aws_profile or args.kubeconfig_role_arn is not None else None,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
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
            ignore_scaling_changes=args.autoscaled,
            opts=child,
        )
        gpu = args.gpu_nodes
        # What a node offers pods, for the autoscaler's template node while the group is at 0
        # (trainstack/infra/aws/node_disk.py): without it a pod requesting local disk never triggers a scale-up.
        self.gpu_local_disk = eks_allocatable_ephemeral_storage(gpu.disk_size_gb)
        gpu_tags = {**tags, f"{NODE_TEMPLATE_RESOURCE_TAG}ephemeral-storage": self.gpu_local_disk}
        if gpu.capacity_type == "ON_DEMAND":
            # An on-demand GPU group says it means it (the policy pack's gpu-pool-spot-or-reservation), as
            # the GKE stack labels its on-demand pools; a reservation's instances bill at on-demand rates too.
            gpu_tags[ON_DEMAND_TAG[0]] = ON_DEMAND_TAG[1]
        gpu_group = {**common, "tags": gpu_tags}
        # The cluster's name once it exists: what the EFA group's and the reserved group's reads ask about.
        created_name = pulumi.Output.all(cluster.oidc_provider_arn, args.cluster_name).apply(lambda v: v[1])
        efa_template: dict = {}
        self.efa_networking: EfaNetworking | None = None
        if gpu.efa is not None:
            assert args.efa_subnet_id is not None, "an EFA group needs its subnet"
            # The cluster's name once it exists: the cluster security group is looked up then.
            self.efa_networking = EfaNetworking(f"{name}-gpu-efa", EfaNetworkingArgs(
                vpc_id=args.vpc_id, cluster_name=created_name, tags=tags,
                create_placement_group=creates_placement_group(gpu)), opts=child)
            efa_template = self._efa_launch_template_args(gpu, self.efa_networking,
                                                          reservation_placement_group(
                f"{name}-gpu-reservation", gpu, self.account_id, parent=self))
            # A template node at size 0 has no EFA device plugin to ask: the autoscaler learns the
            # group's EFAs from this tag (node_disk.py's NODE_TEMPLATE_RESOURCE_TAG), or a pod asking
            # for vpc.amazonaws.com/efa never scales the group up from zero.
            gpu_tags[f"{NODE_TEMPLATE_RESOURCE_TAG}{EFA_RESOURCE}"] = str(gpu.efa.instance.efa_interfaces)
            gpu_group["subnet_ids"] = [args.efa_subnet_id]
        self.gpu_node_group = eks.ManagedNodeGroup(
            f"{name}-gpu",
            **gpu_group,
            ami_type=versions.EKS_GPU_AMI_TYPE,
            capacity_type=gpu.capacity_type,
            # Several types widen the spot pools EKS can draw from (capacity-optimized allocation). A
            # Capacity Block's type is the launch template's, and the group names none (the
            # terraform-aws-eks module above: instance_types null for CAPACITY_BLOCK).
            instance_types=None if gpu.capacity_type == "CAPACITY_BLOCK" else list(gpu.instance_types),
            scaling_config=_scaling(gpu),
            labels=GPU_NODE_LABELS,
            taints=[aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, value="true", effect="NO_SCHEDULE")],
            launch_template=self._launch_template(
                f"{name}-gpu", gpu.disk_size_gb, key_name, tags, **efa_template,
                # A reserved group is not rolled while its reserved nodes run (reserved_updates.py).
                version=None if gpu.capacity_reservation_id is None else lambda template: guarded_template_version(
                    template, created_name, labels=GPU_NODE_LABELS, kubernetes_version=args.kubernetes_version,
                    parent=self)),
            # When an autoscaler owns the size, `pulumi up` must not reset it.
            ignore_scaling_changes=gpu.ignore_scaling_changes,
            opts=child,
        )

        warn_unless_one_block(f"{NAMESPACE}:gpuNodes", topology_aware=gpu.efa is not None and gpu.topology_aware,
                              capacity_type=gpu.capacity_type, reservation_id=gpu.capacity_reservation_id)
        self.gpu_placement = GpuPlacement(
            node_selector=GPU_NODE_LABELS, tolerations=GPU_TOLERATIONS, gpus_per_node=gpu.gpus_per_node,
            # The most nodes a job can get: without the autoscaler the group stays at its desired size, and a
            # queue sized from max would admit jobs that then wait for nodes that never come.
            accelerator=gpu.instance_types[0], max_nodes=gpu.max_size if args.autoscaled else gpu.desired_size,
            # One pod per EFA node takes the whole machine (trainstack/infra/aws/efa.py EFA_POD_RESOURCES).
            pod_resources=EFA_POD_RESOURCES if gpu.efa is not None else {},
            # As on GKE: what the jobs run on is ready before them, and on destroy the job owner (and with it
            # every job) goes before the group, so the pods stop on live nodes rather than by EKS's drain.
            ready=[self.gpu_node_group],
            # Kueue places a multi-node job by the nodes' EC2 instance topology (topology.py); from zero,
            # only once the cluster autoscaler has added the nodes (its ProvisioningRequest class).
            topology=efa_topology(gpu.efa.instance, autoscaled=args.autoscaled)
            if gpu.efa is not None and gpu.topology_aware else None)
        self.cluster_name = pulumi.Output.from_input(args.cluster_name)
        self.kubernetes_version = args.kubernetes_version
        self.kubeconfig_json = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.node_role_arn = node_role_arn  # the node groups' role (both groups): for the user's own policies
        self.node_role_name = node_role.name
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

    @staticmethod
    def _efa_launch_template_args(gpu: GpuNodeGroupConfig, efa: EfaNetworking,
                                  reservation_group: pulumi.Output[str | None] | None = None) -> dict:
        """Every EFA interface, the placement group (if any), and the capacity the group launches into.

        Capacity (EKS user guide capacity-blocks-mng.html and the terraform-aws-eks module): a Capacity
        Block's launch template names the instance type, market type `capacity-block` and the block's
        reservation; an On-Demand Capacity Reservation is targeted by ID (capacity_reservation_specification).
        """
        assert gpu.efa is not None
        args: dict = {
            "network_interfaces": efa_network_interfaces(
                gpu.efa.instance.efa_interfaces, [efa.cluster_security_group_id, efa.efa_security_group_id]),
            # The containers' locked-memory limit, which EFA's buffer registration needs (efa_node_config.py).
            "user_data": efa_node_user_data(),
        }
        placement_group = gpu.efa.placement_group or efa.placement_group_name
        if placement_group is not None:
            args["placement"] = aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group)
        elif reservation_group is not None:
            # Known only once the reservation is read: a reservation made in no group (or another account's)
            # gives no placement block at all. An empty one would be a new template version, and so a roll
            # of the reserved group, on every stack launching into such a reservation.
            args["placement"] = reservation_group.apply(
                lambda group: aws.ec2.LaunchTemplatePlacementArgs(group_name=group) if group else None)
        if gpu.capacity_reservation_id is not None:
            args["capacity_reservation_specification"] = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=gpu.capacity_reservation_id))
        if gpu.capacity_type == "CAPACITY_BLOCK":
            args["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
            args["instance_type"] = gpu.instance_types[0]
        return args

    def _launch_template(self, name: str, disk_size_gb: int, key_name: pulumi.Input[str] | None,
                         tags: Mapping[str, str],
                         version: Callable[[aws.ec2.LaunchTemplate], pulumi.Output[str]] | None = None,
                         **extra) -> aws.eks.NodeGroupLaunchTemplateArgs:
        template = aws.ec2.LaunchTemplate(
            name,
            **extra,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                # 1: only the node itself and host-network pods reach instance metadata, so no
                # container can take the node role's credentials (pods use IRSA).
                http_put_response_hop_limit=1,
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
        return aws.eks.NodeGroupLaunchTemplateArgs(
            id=template.id, version=template.latest_version.apply(str) if version is None else version(template))


def _scaling(nodes: NodeGroupConfig) -> aws.eks.NodeGroupScalingConfigArgs:
    return aws.eks.NodeGroupScalingConfigArgs(min_size=nodes.min_size, desired_size=nodes.desired_size,
                                              max_size=nodes.max_size)
