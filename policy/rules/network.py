"""Network exposure: no SSH or NFS open to the internet, no public load balancers, a restricted API endpoint."""

from __future__ import annotations

from .common import OPEN_CIDRS, Resource, Stack, as_int, as_list, get, truthy

SENSITIVE_PORTS = {22: "SSH", 2049: "NFS"}
ALL_PROTOCOLS = frozenset({"-1", "all"})


def _exposed(protocol, from_port, to_port) -> list[str]:
    """Names of the sensitive ports a TCP (or all-protocol) range covers."""
    if str(protocol).lower() not in ALL_PROTOCOLS | {"tcp", "6"}:
        return []
    if str(protocol).lower() in ALL_PROTOCOLS:
        low, high = 0, 65535
    else:
        low, high = as_int(from_port), as_int(to_port)
        if low is None or high is None:
            return []
    return [f"{name} ({port})" for port, name in SENSITIVE_PORTS.items() if low <= port <= high]


def _gcp_ports(allow) -> list[str]:
    protocol = str(get(allow, "protocol", "")).lower()
    if protocol not in ("tcp", "all", "6"):
        return []
    ranges = as_list(get(allow, "ports")) or ["0-65535"]  # no ports: every port
    found = []
    for entry in ranges:
        low, _, high = str(entry).partition("-")
        found += _exposed("tcp", low, high or low)
    return found


def no_open_ssh_or_nfs(resource: Resource, stack: Stack) -> list[str]:
    props, kind = resource.props, resource.type
    rules = []  # (cidrs, protocol, from, to)
    if kind == "aws:ec2/securityGroup:SecurityGroup":
        rules = [(as_list(get(r, "cidrBlocks")) + as_list(get(r, "ipv6CidrBlocks")), get(r, "protocol"),
                  get(r, "fromPort"), get(r, "toPort")) for r in as_list(get(props, "ingress"))]
    elif kind == "aws:ec2/securityGroupRule:SecurityGroupRule" and get(props, "type") == "ingress":
        rules = [(as_list(get(props, "cidrBlocks")) + as_list(get(props, "ipv6CidrBlocks")), get(props, "protocol"),
                  get(props, "fromPort"), get(props, "toPort"))]
    elif kind == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        rules = [([get(props, "cidrIpv4"), get(props, "cidrIpv6")], get(props, "ipProtocol"),
                  get(props, "fromPort"), get(props, "toPort"))]
    elif kind == "gcp:compute/firewall:Firewall" and get(props, "direction", "INGRESS") == "INGRESS":
        if OPEN_CIDRS & set(as_list(get(props, "sourceRanges"))):
            return [f"firewall opens {port} to the internet; allow your own ranges only"
                    for allow in as_list(get(props, "allows")) for port in _gcp_ports(allow)]
        return []
    return [f"ingress opens {port} to {cidr}; allow the VPC or your own ranges only"
            for cidrs, protocol, low, high in rules for cidr in cidrs if cidr in OPEN_CIDRS
            for port in _exposed(protocol, low, high)]


def all_traffic_only_within_a_group(resource: Resource, stack: Stack) -> list[str]:
    """An all-protocol ingress rule (what EFA needs) references a security group, never an address range:
    EFA's rule is the group's members to each other (EC2 user guide efa-start.html, step 1)."""
    props = resource.props
    if resource.type != "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        return []
    if str(get(props, "ipProtocol", "")).lower() not in ALL_PROTOCOLS:
        return []
    if get(props, "referencedSecurityGroupId") and not any(
            get(props, key) for key in ("cidrIpv4", "cidrIpv6", "prefixListId")):
        return []
    return ["an all-traffic ingress rule must reference a security group (referencedSecurityGroupId), not an "
            "address range: EFA needs all traffic between the group's members only"]


def no_load_balancer_services(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == "kubernetes:core/v1:Service" and get(resource.props, "spec.type") == "LoadBalancer":
        return ["Service type LoadBalancer puts a billable, internet-facing load balancer in front of the cluster "
                "(and blocks `pulumi destroy` of the VPC when left behind); use ClusterIP and port-forward"]
    return []


def api_endpoint_restricted(resource: Resource, stack: Stack) -> list[str]:
    props = resource.props
    if resource.type == "eks:index:Cluster" and get(props, "endpointPublicAccess") is not False:
        cidrs = as_list(get(props, "publicAccessCidrs")) or ["0.0.0.0/0"]
        if OPEN_CIDRS & set(cidrs):
            return ["the public API endpoint accepts 0.0.0.0/0; set trainstack:apiPublicAccessCidrs to your ranges"]
    if (resource.type == "gcp:container/cluster:Cluster"
            and not truthy(get(props, "privateClusterConfig.enablePrivateEndpoint"))
            and not as_list(get(props, "masterAuthorizedNetworksConfig.cidrBlocks"))):
        return ["the public API endpoint has no masterAuthorizedNetworksConfig.cidrBlocks"]
    return []


def gke_private_nodes(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == "gcp:container/cluster:Cluster" and not truthy(get(resource.props, "privateClusterConfig.enablePrivateNodes")):
        return ["privateClusterConfig.enablePrivateNodes must be true: nodes get no public IP"]
    if resource.type == "gcp:container/nodePool:NodePool" and get(resource.props, "networkConfig.enablePrivateNodes") is False:
        return ["networkConfig.enablePrivateNodes must not be false"]
    return []
