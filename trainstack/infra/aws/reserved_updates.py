"""A reserved GPU group is not rolled while its reserved nodes run: `pulumi up` refuses, with the steps.

EKS updates a managed node group by launching new nodes first, then draining the old ones (EKS user
guide managed-node-update-behavior.html, "Scale up phase"). A group that launches into an On-Demand
Capacity Reservation or a Capacity Block has no spare reserved instance to launch, so the update
retries until it fails (NodeCreationFailure) or times out, with `pulumi up` hanging and the reserved
nodes billing; the EKS user guide capacity-blocks-mng.html says: "When upgrading a managed node group
with Capacity Blocks, make sure you set the desired size of the node group to 0."

What rolls the group: a new launch-template version (user data, interfaces, tags, disk size, a provider
default) or another Kubernetes version. Both are compared with what the running group has
(eks:DescribeNodegroup through the provider's getNodeGroup, found by the GPU group's label among
eks:ListNodegroups). The check sits on the launch-template version the group is given, so the group's
update waits for it and nothing else does; on a refusal the template has a new version the group does
not use, which costs nothing.

Why refuse rather than scale the group to zero first: scaling to zero stops the running job's nodes at
a moment the stack cannot choose (the job loses the steps since its last checkpoint), and a reserved
instance takes minutes to be launchable again. The person running `up` picks the moment: after a
checkpoint, or between runs. A preview cannot show the refusal when the template changes (its new
version is unknown until `up` writes it); `up` refuses before the group is touched.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from trainstack.infra.config import NAMESPACE

GET_NODE_GROUPS = "aws:eks/getNodeGroups:getNodeGroups"
GET_NODE_GROUP = "aws:eks/getNodeGroup:getNodeGroup"


def rolling_change(running: aws.eks.GetNodeGroupResult, template: tuple[str, str], kubernetes_version: str
                   ) -> str | None:
    """What in this update would roll the running group's nodes, or None. `template`: (ID, version)."""
    template_id, template_version = template
    running_templates = running.launch_templates or ()
    if running_templates and running_templates[0].id != template_id:
        return f"its launch template ({running_templates[0].id} -> {template_id})"
    running_version = running_templates[0].version if running_templates else None
    if running_version is not None and str(running_version) != str(template_version):
        return f"its launch template (version {running_version} -> {template_version})"
    if running.version and running.version != kubernetes_version:
        return f"its Kubernetes version ({running.version} -> {kubernetes_version})"
    return None


def checked_reserved_update(running: aws.eks.GetNodeGroupResult | None, *, template: tuple[str, str],
                            kubernetes_version: str, stack: str) -> str:
    """The template version to hand the group, once no reserved node would have to be replaced by a surge."""
    if running is None:
        return template[1]
    nodes = running.scaling_configs[0].desired_size if running.scaling_configs else 0
    change = rolling_change(running, template, kubernetes_version)
    if nodes and change:
        group = running.node_group_name
        raise pulumi.RunError(
            f"{NAMESPACE}:gpuNodes: this update changes {change} of node group {group}, which runs {nodes} reserved "
            "node(s): EKS launches new nodes before it removes old ones, and the reservation has none to spare, so "
            "the update would hang while the nodes bill. Fix: after a checkpoint, stop the jobs on it (trainstack "
            f"cancel <job> --stack {stack}; the stack's own job: {NAMESPACE}:job.enabled false), then aws eks "
            f"update-nodegroup-config --region {running.region} --cluster-name {running.cluster_name} --nodegroup-name {group} --scaling-config "
            "minSize=0,desiredSize=0, wait until kubectl get nodes -l trainstack/node-pool=gpu lists none, and run "
            "pulumi up again (docs/upgrading.md)")
    return template[1]


async def running_gpu_group(cluster_name: str, labels: Mapping[str, str], opts: pulumi.InvokeOptions
                            ) -> aws.eks.GetNodeGroupResult | None:
    """The cluster's node group that carries the GPU group's labels, as EKS describes it; None before it exists."""
    names = await pulumi.runtime.invoke_async(GET_NODE_GROUPS, {"clusterName": cluster_name}, opts,
                                              typ=aws.eks.GetNodeGroupsResult)
    for name in sorted(names.names or ()):
        group = await pulumi.runtime.invoke_async(GET_NODE_GROUP, {"clusterName": cluster_name, "nodeGroupName": name},
                                                  opts, typ=aws.eks.GetNodeGroupResult)
        if all((group.labels or {}).get(key) == value for key, value in labels.items()):
            return group
    return None


def guarded_template_version(template: aws.ec2.LaunchTemplate, cluster_name: pulumi.Output[str], *,
                             labels: Mapping[str, str], kubernetes_version: str, parent: pulumi.Resource
                             ) -> pulumi.Output[str]:
    """The launch-template version for a reserved GPU group, resolved only once the update is safe."""
    opts = pulumi.InvokeOptions(parent=parent)
    stack = pulumi.get_stack()

    async def checked(values: list) -> str:
        template_id, version, name = values[0], str(values[1]), values[2]
        running = await running_gpu_group(name, labels, opts)
        return checked_reserved_update(running, template=(template_id, version),
                                       kubernetes_version=kubernetes_version, stack=stack)

    return pulumi.Output.all(template.id, template.latest_version, cluster_name).apply(checked)
