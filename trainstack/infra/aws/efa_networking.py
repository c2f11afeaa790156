"""EfaNetworking: what an EFA node group needs around its instances, before the first one launches.

- A cluster placement group, when asked for (`create_placement_group`): EFA traffic does not cross
  Availability Zones, and a cluster group packs the instances onto nearby network spines
  (terraform-aws-modules/terraform-aws-eks v21.19.0 modules/eks-managed-node-group/main.tf, strategy
  cluster). Not for a group that launches into a reservation or Capacity Block: that capacity was not
  provisioned in a new, empty placement group, and a launch constrained to one fails with
  InsufficientInstanceCapacity or delivers part of the count (terraform-aws-modules/terraform-aws-eks
  PR #3730, enable_efa_placement_group; eksctl-io/eksctl issue #7949).
- A security group that allows all traffic to and from itself, ingress AND egress: "the EFA must be a
  member of a security group that allows all inbound and outbound traffic to and from the security
  group itself" (EC2 user guide efa-start.html, "Prepare an EFA-enabled security group"; the module's
  all_self_efa ingress and egress rules). Without the egress rule the OS-bypass path stays closed.
- The EKS cluster security group, which every interface also carries (the module adds
  cluster_primary_security_group_id to each interface): a launch template that lists its network
  interfaces sets their security groups itself, and without this one the control plane cannot reach
  the kubelet. It is looked up once the cluster exists (eks:DescribeCluster); before that, in the
  first preview, it is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True, kw_only=True)
class EfaNetworkingArgs:
    vpc_id: pulumi.Input[str]
    # The cluster's name, resolved only once the cluster exists (it is what the lookup waits for).
    cluster_name: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)
    create_placement_group: bool = True


class EfaNetworking(pulumi.ComponentResource):
    placement_group_name: pulumi.Output[str] | None  # None: the stack created none
    efa_security_group_id: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: EfaNetworkingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:EfaNetworking", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        placement = (aws.ec2.PlacementGroup(name, strategy="cluster", tags=tags, opts=child)
                     if args.create_placement_group else None)
        group = aws.ec2.SecurityGroup(
            name, vpc_id=args.vpc_id, description="EFA: all traffic between the members of this group",
            tags={**tags, "Name": name}, opts=child)
        self_rule = {"security_group_id": group.id, "referenced_security_group_id": group.id, "ip_protocol": "-1",
                     "description": "node to node EFA (all traffic)", "tags": tags}
        ingress = aws.vpc.SecurityGroupIngressRule(f"{name}-ingress-self", **self_rule, opts=child)
        egress = aws.vpc.SecurityGroupEgressRule(f"{name}-egress-self", **self_rule, opts=child)
        cluster = aws.eks.get_cluster_output(name=args.cluster_name, opts=pulumi.InvokeOutputOptions(parent=self))

        self.placement_group_name = placement.name if placement is not None else None
        # Handed out once both rules exist: no instance boots into the group before its traffic is allowed.
        self.efa_security_group_id = pulumi.Output.all(group.id, ingress.id, egress.id).apply(lambda ids: ids[0])
        self.cluster_security_group_id = cluster.vpc_config.cluster_security_group_id
        outputs = {"efaSecurityGroupId": self.efa_security_group_id}
        if self.placement_group_name is not None:
            outputs["placementGroupName"] = self.placement_group_name
        self.register_outputs(outputs)
