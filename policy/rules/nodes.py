"""Node hardening: instance metadata (IMDSv2, one hop), our launch templates, GKE's metadata server,
shielded nodes, and a node service account that is not the project's Editor default."""

from __future__ import annotations

from .common import Resource, Stack, as_int, as_list, get, is_false, truthy

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_INSTANCE = "aws:ec2/instance:Instance"
EKS_NODE_GROUPS = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"


def imdsv2_required(resource: Resource, stack: Stack) -> list[str]:
    if resource.type not in (LAUNCH_TEMPLATE, EC2_INSTANCE):
        return []
    options = get(resource.props, "metadataOptions", {})
    if get(options, "httpEndpoint") == "disabled" or get(options, "httpTokens") == "required":
        return []
    return ["metadataOptions.httpTokens must be 'required' (IMDSv2): IMDSv1 hands the node's "
            "credentials to any request a pod can make the node send"]


def imds_hop_limit_one(resource: Resource, stack: Stack) -> list[str]:
    if resource.type not in (LAUNCH_TEMPLATE, EC2_INSTANCE):
        return []
    options = get(resource.props, "metadataOptions", {})
    if get(options, "httpEndpoint") == "disabled":
        return []
    hops = as_int(get(options, "httpPutResponseHopLimit"))
    if hops is not None and hops <= 1:
        return []
    return [f"metadataOptions.httpPutResponseHopLimit is {hops if hops is not None else 'unset'}; 1 keeps pods "
            "(one hop further) away from the node role, which IRSA makes unnecessary"]


def node_group_launch_template(resource: Resource, stack: Stack) -> list[str]:
    """EKS's own default launch template would decide IMDS and disk encryption instead of ours."""
    if resource.type not in EKS_NODE_GROUPS or get(resource.props, "launchTemplate") is not None:
        return []
    return ["node group has no launchTemplate: IMDSv2 and disk encryption are then left to EKS's defaults"]


def launch_template_interfaces_private(resource: Resource, stack: Stack) -> list[str]:
    """A launch template that lists its network interfaces (an EFA group's, one per network card) sets their
    security groups itself: an interface without any gets the VPC's default group, and one with a public
    IP puts the node on the internet."""
    if resource.type != LAUNCH_TEMPLATE:
        return []
    problems = []
    for index, interface in enumerate(as_list(get(resource.props, "networkInterfaces"))):
        if truthy(get(interface, "associatePublicIpAddress")):
            problems.append(f"networkInterfaces[{index}] associates a public IP: nodes stay in private subnets")
        if not as_list(get(interface, "securityGroups")):
            problems.append(f"networkInterfaces[{index}] names no security groups: the VPC's default group would apply")
    return problems


def gke_metadata_server(resource: Resource, stack: Stack) -> list[str]:
    if resource.type != GKE_NODE_POOL or get(resource.props, "nodeConfig.workloadMetadataConfig.mode") == "GKE_METADATA":
        return []
    return ["nodeConfig.workloadMetadataConfig.mode must be GKE_METADATA: pods must not read the node's credentials"]


def gke_shielded_nodes(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == GKE_CLUSTER and is_false(get(resource.props, "enableShieldedNodes")):
        return ["enableShieldedNodes must not be false"]
    if resource.type == GKE_NODE_POOL and is_false(get(resource.props, "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring")):
        return ["nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring must not be false"]
    return []


def gke_node_service_account(resource: Resource, stack: Stack) -> list[str]:
    if resource.type != GKE_NODE_POOL:
        return []
    account = get(resource.props, "nodeConfig.serviceAccount")
    if account and account != "default" and not str(account).endswith("-compute@developer.gserviceaccount.com"):
        return []
    return ["nodeConfig.serviceAccount must be a dedicated service account, not the Compute Engine default "
            "(project Editor)"]
