"""The AWS stack's configuration resolved: the typed settings (settings.py), loaded from a stack file or given to
a component, with defaults applied and the rules between them checked once, before anything is registered.

Bad config stops the program before any resource is registered, with one line that names the key and
the fix (ConfigError is a pulumi.RunError, which the Pulumi runtime prints as a single error line
without a traceback).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import shlex
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

# The GPU node group's names, where they were before gpu_node_config.py (cluster.py and tests import them here).
from trainstack.infra.aws.gpu_node_config import GPU_INSTANCE_FAMILIES as GPU_INSTANCE_FAMILIES
from trainstack.infra.aws.gpu_node_config import GPU_NODE_KEYS as GPU_NODE_KEYS
from trainstack.infra.aws.gpu_node_config import EfaConfig as EfaConfig
from trainstack.infra.aws.gpu_node_config import GpuNodeGroupConfig, NodeGroupConfig, gpu_nodes_and_job
from trainstack.infra.aws.limits import (
    AWS_REGIONS,
    EKS_NODE_TAGS,
    MAX_PUBLIC_ACCESS_CIDRS,
    MAX_TAG_KEY,
    MAX_TAG_VALUE,
    MAX_TAGS,
    OTHER_PARTITIONS,
    TAG_SYMBOLS,
    TAG_UNICODE_CATEGORIES,
    VPC_LARGEST_PREFIX,
)
from trainstack.infra.aws.settings import AwsStackArgs, EksSystemNodes
from trainstack.infra.config import NAMESPACE, ConfigError, JobConfig, raw_config, set_hint
from trainstack.infra.config.loader import keys_of, load_stack, or_default
from trainstack.infra.config.reader import (
    PRIVATE_BLOCKS_TEXT,
    RFC1918_BLOCKS,
    check_scaling,
    ipv4_block,
    is_private_block,
    unroutable_reason,
)
from trainstack.infra.core import versions
from trainstack.infra.cost.budget import Budget

# Control-plane log types EKS can send to CloudWatch Logs (EKS API: LogSetup.types).
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
DEFAULT_CONTROL_PLANE_LOGS = ("audit", "authenticator")  # who did what, and who signed in

# The seed's zones; other regions must list theirs (zone letters differ from region to region).
DEFAULT_ZONES: Mapping[str, tuple[str, ...]] = {
    "us-west-2": ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"),
}

# trainstack builds its AWS provider explicitly from these; any other aws:* key would be ignored.
AWS_PROVIDER_KEYS = ("region", "profile")
PROVIDER_FIELDS = {name: f"aws:{name}" for name in AWS_PROVIDER_KEYS}

_IAM_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):(?P<kind>role|user)/(?P<path>[\w+=,.@/-]+)$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC the stack uses instead of creating one (its CIDR is looked up, never copied by hand)."""

    vpc_id: pulumi.Input[str]  # a component's caller may pass its own resources' IDs (outputs), which EKS checks
    public_subnet_ids: tuple[pulumi.Input[str], ...]
    private_subnet_ids: tuple[pulumi.Input[str], ...]
    # How an error names the private subnets: the stack file's key, or the part's input.
    subnets_key: str = "trainstack:existingNetwork.privateSubnetIds"


@dataclass(frozen=True)
class NetworkConfig:
    availability_zones: tuple[str, ...]
    vpc_cidr: str
    nat_gateway_per_zone: bool
    existing: ExistingNetwork | None = None


@dataclass(frozen=True)
class ApiEndpointConfig:
    """Who reaches the Kubernetes API: a public endpoint limited to CIDR blocks, or a private one only."""

    private: bool  # True: reachable from inside the VPC only (VPN, peering, a runner in the VPC)
    public_access_cidrs: tuple[str, ...]  # empty when private


@dataclass(frozen=True)
class AwsStackConfig:
    region: str
    aws_profile: str | None  # aws:profile, for the explicit AWS provider and the kubeconfig
    cluster_name: str
    kubernetes_version: str
    network: NetworkConfig
    system_nodes: NodeGroupConfig
    gpu_nodes: GpuNodeGroupConfig
    job: JobConfig
    delete_bucket_on_destroy: bool
    # The shared filesystem holds the runs: `pulumi destroy` refuses while this is on (Pulumi's protect).
    protect_shared_filesystem: bool
    cluster_admin_arns: tuple[str, ...]
    api_endpoint: ApiEndpointConfig
    tags: Mapping[str, str]
    budget: Budget = Budget()  # trainstack:maxHourlyUsd / maxRunUsd
    preview_role_arn: str | None = None  # read-only access entry for PR previews
    cluster_autoscaler: bool = True  # cluster-autoscaler owns the GPU group's size (scale from and to 0)
    control_plane_logs: tuple[str, ...] = DEFAULT_CONTROL_PLANE_LOGS


# --- the sections -----------------------------------------------------------------------------------

# What a stack file may set under trainstack: (the model's fields, aws:region and aws:profile aside).
TOP_LEVEL_KEYS = ("cloud", *(key for key in keys_of(AwsStackArgs) if key not in AWS_PROVIDER_KEYS))


def _network(args: AwsStackArgs, region: str) -> NetworkConfig:
    """The VPC the stack creates, or the one given: IDs that are other resources' outputs go through as they are
    (EKS and EFS check them); plain IDs are checked here."""
    zones_key = f"{NAMESPACE}:availabilityZones"
    zones = tuple(or_default(args.availability_zones, DEFAULT_ZONES.get(region, ())))
    existing = None
    existing_key = f"{NAMESPACE}:existingNetwork"
    if args.existing_network is not None:
        given = args.existing_network
        vpc_id = given.vpc_id
        if vpc_id is None or (isinstance(vpc_id, str) and not vpc_id.startswith("vpc-")):
            raise ConfigError(f"{existing_key}.vpcId", f"expected a VPC ID like vpc-0123abcd, got {vpc_id!r}",
                              set_hint(f"{existing_key}.vpcId", "vpc-0123abcd"))
        private = tuple(given.private_subnet_ids or ())
        public = tuple(given.public_subnet_ids or ())
        if not private:
            raise ConfigError(f"{existing_key}.privateSubnetIds", "no private subnets given (nodes and EFS mount "
                              "targets live there)", set_hint(f"{existing_key}.privateSubnetIds[0]", "subnet-..."))
        for subnet_key, subnets in (("privateSubnetIds", private), ("publicSubnetIds", public)):
            for subnet in subnets:
                if isinstance(subnet, str) and not subnet.startswith("subnet-"):
                    raise ConfigError(f"{existing_key}.{subnet_key}", f"{subnet!r} is not a subnet ID",
                                      "use IDs like subnet-0123abcd")
        existing = ExistingNetwork(vpc_id=vpc_id, public_subnet_ids=public, private_subnet_ids=private)
    elif not zones:
        raise ConfigError(zones_key, f"no availability zones for region {region}",
                          f"pulumi config set --path '{zones_key}[0]' {region}a (list two or more zones)")
    if existing is None and len(zones) < 2:
        raise ConfigError(zones_key, f"{len(zones)} zone: EKS needs subnets in at least two zones for its control "
                          "plane", f"list a second zone, e.g. pulumi config set --path '{zones_key}[1]' {region}b")
    if len(zones) > 8:
        raise ConfigError(zones_key, f"{len(zones)} zones: the VPC layout has room for 8", "list at most 8 zones")
    for zone in zones:
        if zone != zone.strip().lower():
            raise ConfigError(zones_key, f"{zone!r}: zone names are lower case, without spaces",
                              f"use {zone.strip().lower()}")
        if not (zone.startswith(region) and re.fullmatch(r"[a-z]", zone[len(region):])):
            raise ConfigError(zones_key, f"{zone!r} is not a zone of region {region}",
                              f"use zones like {region}a, {region}b")
    cidr_key = f"{NAMESPACE}:vpcCidr"
    cidr = or_default(args.vpc_cidr, "10.0.0.0/16")
    network = ipv4_block(cidr, cidr_key, set_hint(cidr_key, "10.0.0.0/16"))
    # Two subnets per zone, each a /20 or larger when the VPC is a /16: see network.py.
    # RFC 1918 and 100.64.0.0/10, or another private range (198.18.0.0/15, ...) a stack may already use; never
    # a block no VPC can hold (loopback, link-local, 0.0.0.0/8, multicast, 240.0.0.0/4), which Python's
    # is_private lets through (AWS VPC user guide, vpc-cidr-blocks.html).
    unroutable = unroutable_reason(str(network), allow_shared=True)
    if unroutable is not None:
        raise ConfigError(cidr_key, f"{cidr} is in the {unroutable} block, which no VPC can use",
                          set_hint(cidr_key, "10.0.0.0/16") + " (a new stack; an existing VPC cannot be renumbered "
                          "in place)")
    if network.prefixlen > 20 or not (is_private_block(network) or network.is_private):
        raise ConfigError(cidr_key, f"{cidr} must be a private block ({PRIVATE_BLOCKS_TEXT}) of size /20 or larger",
                          set_hint(cidr_key, "10.0.0.0/16"))
    if network.prefixlen < VPC_LARGEST_PREFIX:
        raise ConfigError(cidr_key, f"{cidr} is larger than a VPC may be (AWS allows /{VPC_LARGEST_PREFIX} to /28)",
                          set_hint(cidr_key, f"{network.network_address}/{VPC_LARGEST_PREFIX}"))
    return NetworkConfig(availability_zones=zones, vpc_cidr=str(network),
                         nat_gateway_per_zone=or_default(args.nat_gateway_per_zone, False), existing=existing)


# Graviton (Arm) families: the system nodes boot the x86_64 AL2023 AMI, which cannot run on them.
_ARM_FAMILY = re.compile(r"^(a1|[a-z]+\d+g[a-z]*)$")
_INSTANCE_TYPE = re.compile(r"^([a-z][a-z0-9-]*)\.(nano|micro|small|medium|large|metal|\d*xlarge|metal-\d+xl)$")


def _system_instance_type(nodes: EksSystemNodes) -> str:
    key = f"{NAMESPACE}:systemNodes.instanceType"
    value = or_default(nodes.instance_type, "t3.medium")
    match = _INSTANCE_TYPE.fullmatch(value)
    if match is None:
        raise ConfigError(key, f"{value!r} is not an EC2 instance type (family.size, e.g. t3.medium)",
                          set_hint(key, "t3.medium"))
    if _ARM_FAMILY.fullmatch(match.group(1)):
        raise ConfigError(key, f"{value} is an Arm (Graviton) type; the system nodes run the x86_64 AMI",
                          set_hint(key, "t3.medium"))
    return value


# Tags trainstack puts on resources itself, with the user's: they count toward AWS's 50.
TRAINSTACK_TAGS = ("app", "pulumi-stack", "Name")


def _check_tag_characters(key: str, name: str, value: str) -> None:
    """Each character of the tag's key and value in AWS's tag set; the error shows the bad ones as repr (a NUL
    as '\\x00'), so the line stays one line, and suggests the text with each replaced by -."""
    for part, text in (("key", name), ("value", value)):
        bad = [c for c in text if c not in TAG_SYMBOLS and unicodedata.category(c)[0] not in TAG_UNICODE_CATEGORIES]
        if not bad:
            continue
        shown = ", ".join(repr(c) for c in dict.fromkeys(bad))
        cleaned = "".join("-" if c in bad else c for c in text)
        problem = (f"the tag {part} {text!r} has {shown}: AWS tags (IAM, EFS) take only letters, digits, spaces "
                   "and _ . : / = + - @")
        if part == "key":  # the key itself cannot go into the error's key or a command line
            raise ConfigError(key, problem, f"rename the tag in {key} without {shown}, e.g. {cleaned!r}")
        raise ConfigError(f"{key}.{name}", problem, set_hint(f"{key}.{name}", shlex.quote(cleaned)))


def check_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    """trainstack:tags (loaded): AWS's tag rules, and room for the tags trainstack adds."""
    key = f"{NAMESPACE}:tags"
    tags = dict(tags or {})
    for name in tags:
        if not name:  # IAM's and EFS's tag keys hold at least one character
            raise ConfigError(key, f"a tag with an empty key (value {tags[name]!r})", f"give that tag a key in {key}")
        _check_tag_characters(key, name, tags[name])
        if name.lower().startswith("aws:") or name.startswith("kubernetes.io/") or name.startswith("k8s.io/"):
            raise ConfigError(f"{key}.{name}", "is in a reserved namespace (aws:, kubernetes.io/, k8s.io/ belong to "
                              "AWS, EKS and the cluster autoscaler)", f"pulumi config rm --path '{key}.{name}'")
        if name in TRAINSTACK_TAGS:
            raise ConfigError(f"{key}.{name}", "is set by trainstack on every resource (cost reports and the orphan "
                              "audit rely on it)", f"pulumi config rm --path '{key}.{name}'")
        if len(name) > MAX_TAG_KEY or len(tags[name]) > MAX_TAG_VALUE:
            raise ConfigError(f"{key}.{name}", f"AWS tag keys hold at most {MAX_TAG_KEY} characters and values "
                              f"{MAX_TAG_VALUE} (this key has {len(name)}, its value {len(tags[name])})",
                              f"shorten {key}.{name}")
    added = (*TRAINSTACK_TAGS, *EKS_NODE_TAGS)
    room = MAX_TAGS - len(added)
    if len(tags) > room:
        raise ConfigError(key, f"{len(tags)} tags: AWS allows {MAX_TAGS} per resource, and a GPU node carries "
                          f"{len(added)} more ({', '.join(added)})", f"keep at most {room} in {key}")
    return tags


def _system_nodes(nodes: EksSystemNodes | None) -> NodeGroupConfig:
    key = f"{NAMESPACE}:systemNodes"
    nodes = nodes or EksSystemNodes()
    min_size = or_default(nodes.min, 1)
    desired = or_default(nodes.desired, 1)
    max_size = or_default(nodes.max, 2)
    check_scaling(key, min_size, max_size, desired)
    return NodeGroupConfig(
        instance_types=(_system_instance_type(nodes),),
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gb=or_default(nodes.disk_size_gb, 20),
    )


def access_entry_key(arn: str) -> str:
    """A stable name for an access entry of `arn`: reordering the list never replaces an entry."""
    match = _IAM_ARN.fullmatch(arn)
    assert match is not None, arn  # checked by _access
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{match['account']}-{match['kind']}-{match['path']}")


def _access(args: AwsStackArgs) -> tuple[tuple[str, ...], str | None]:
    """(cluster admin ARNs, the preview role's ARN): IAM roles or users, each given one access entry."""
    admins_key = f"{NAMESPACE}:clusterAdmins"
    admins = tuple(or_default(args.cluster_admins, ()))
    preview_key = f"{NAMESPACE}:previewRoleArn"
    preview_role = args.preview_role_arn
    for key, arns in ((admins_key, admins), (preview_key, (preview_role,) if preview_role else ())):
        for arn in arns:
            if not _IAM_ARN.fullmatch(arn):
                raise ConfigError(key, f"{arn!r} is not an IAM role or user ARN",
                                  "use ARNs like arn:aws:iam::123456789012:role/Admin")
    principals = [(admins_key, arn) for arn in admins] + ([(preview_key, preview_role)] if preview_role else [])
    seen: dict[str, str] = {}
    for key, arn in principals:
        name = access_entry_key(arn)
        if name in seen:
            problem = (f"{arn} is listed twice" if seen[name] == arn
                       else f"{arn} and {seen[name]} map to the same access entry name")
            raise ConfigError(key, problem, "give each IAM principal one access entry: remove one of them")
        seen[name] = arn
    return admins, preview_role


def _api_endpoint(args: AwsStackArgs) -> ApiEndpointConfig:
    """Private, or public for an explicit allow-list: there is no default that opens the API to everyone."""
    endpoint_key = f"{NAMESPACE}:apiEndpoint"
    endpoint = or_default(args.api_endpoint, "public")
    cidrs_key = f"{NAMESPACE}:apiPublicAccessCidrs"
    if endpoint == "private":
        if args.api_public_access_cidrs is not None:
            raise ConfigError(cidrs_key, "set, but trainstack:apiEndpoint is private (no public endpoint to limit)",
                              f"pulumi config rm {cidrs_key}, or pulumi config set {endpoint_key} public")
        return ApiEndpointConfig(private=True, public_access_cidrs=())
    if args.api_public_access_cidrs is None:
        raise ConfigError(cidrs_key, "not set: the public Kubernetes API endpoint would accept any address",
                          f"pulumi config set --path '{cidrs_key}[0]' \"$(curl -s https://checkip.amazonaws.com)/32\" "
                          f"(list 0.0.0.0/0 to accept any address, or set {endpoint_key} private)")
    cidrs = tuple(args.api_public_access_cidrs)
    if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        raise ConfigError(cidrs_key, f"{len(cidrs)} blocks: EKS accepts at most {MAX_PUBLIC_ACCESS_CIDRS} public "
                          "access CIDR ranges per cluster", f"merge blocks until at most {MAX_PUBLIC_ACCESS_CIDRS} remain")
    for cidr in cidrs:
        network = ipaddress.IPv4Network(cidr)
        unroutable = unroutable_reason(cidr)
        if unroutable is not None:
            raise ConfigError(cidrs_key, f"{cidr} is in the {unroutable} block: no client reaches the public "
                              "endpoint from there", "list public addresses, e.g. 203.0.113.7/32")
        if any(network.subnet_of(block) for block in RFC1918_BLOCKS):
            raise ConfigError(cidrs_key, f"{cidr} is a private block: the public endpoint never sees those addresses "
                              "(from inside the VPC the private endpoint answers)",
                              "list public addresses, e.g. 203.0.113.7/32")
    return ApiEndpointConfig(private=False, public_access_cidrs=cidrs)


def _control_plane_logs(args: AwsStackArgs) -> tuple[str, ...]:
    key = f"{NAMESPACE}:controlPlaneLogs"
    logs = tuple(or_default(args.control_plane_logs, DEFAULT_CONTROL_PLANE_LOGS))
    for log in logs:
        if log not in CONTROL_PLANE_LOG_TYPES:
            raise ConfigError(key, f"{log!r} is not an EKS control-plane log type",
                              f"use some of {', '.join(CONTROL_PLANE_LOG_TYPES)}")
    return logs


def _kubernetes_version(args: AwsStackArgs) -> str:
    key = f"{NAMESPACE}:kubernetesVersion"
    version = or_default(args.kubernetes_version, versions.EKS_KUBERNETES_VERSION)
    if version not in versions.EKS_SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(versions.EKS_SUPPORTED_KUBERNETES_VERSIONS)
        raise ConfigError(key, f"Kubernetes {version} is not one trainstack supports ({supported})",
                          set_hint(key, versions.EKS_KUBERNETES_VERSION))
    return version


def check_region(region: str | None) -> str:
    """aws:region: set, a Region of the aws partition that trainstack knows."""
    if not region:
        raise ConfigError("aws:region", "not set", "pulumi config set aws:region us-west-2")
    partition = next((p for prefix, p in OTHER_PARTITIONS.items() if region.startswith(prefix)), None)
    if partition is not None:
        raise ConfigError("aws:region", f"{region} is in the {partition} partition, and trainstack builds ARNs of the "
                          "aws partition only (arn:aws:...)", "pulumi config set aws:region <a Region of the aws "
                          "partition, e.g. us-west-2>")
    if region not in AWS_REGIONS:
        close = difflib.get_close_matches(region, sorted(AWS_REGIONS), n=1)
        raise ConfigError("aws:region", f"{region!r} is not an AWS Region" + (f" (did you mean {close[0]}?)"
                          if close else ""), f"pulumi config set aws:region {close[0] if close else 'us-west-2'} "
                          "(aws ec2 describe-regions lists them; a Region newer than trainstack/infra/aws/limits.py goes there)")
    return region


def parse_aws_config(raw: Mapping[str, str] | None = None, stack: str | None = None) -> AwsStackConfig:
    """All of a stack file's AWS config (`raw`: every key as the CLI hands it), loaded and resolved; raises
    ConfigError on the first bad key."""
    raw = raw_config() if raw is None else raw
    return resolve_aws(load_stack(AwsStackArgs, raw, "aws", PROVIDER_FIELDS,
                                  " and set the matching AWS_* environment variable instead"), stack)


def resolve_aws(args: AwsStackArgs, stack: str | None = None) -> AwsStackConfig:
    """The AWS stack's settings (loaded: trainstack/infra/config/loader.py) with every default applied and the rules
    between them checked, in a stack file's terms. IDs that are other resources' outputs (an existing network's)
    pass through; EKS and EFS check them."""
    stack = pulumi.get_stack() if stack is None else stack
    region = check_region(args.region)

    name_key = f"{NAMESPACE}:clusterName"
    cluster_name = or_default(args.cluster_name, f"{NAMESPACE}-{stack}")
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ConfigError(name_key, f"{cluster_name!r} is not a valid EKS cluster name (letters, digits, - and _, "
                          "at most 100)", set_hint(name_key, f"{NAMESPACE}-{stack}"))

    autoscaler = or_default(args.cluster_autoscaler, True)
    network = _network(args, region)
    gpu_nodes, job = gpu_nodes_and_job(args, autoscaler, network.availability_zones, network.existing is not None,
                                        region=region)
    admins, preview_role = _access(args)
    return AwsStackConfig(
        region=region,
        aws_profile=args.profile or None,
        cluster_name=cluster_name,
        kubernetes_version=_kubernetes_version(args),
        network=network,
        system_nodes=_system_nodes(args.system_nodes),
        gpu_nodes=gpu_nodes,
        job=job,
        delete_bucket_on_destroy=or_default(args.delete_bucket_on_destroy, False),
        protect_shared_filesystem=or_default(args.protect_shared_filesystem, True),
        cluster_admin_arns=admins,
        api_endpoint=_api_endpoint(args),
        tags=check_tags(args.tags),
        budget=Budget(max_hourly_usd=args.max_hourly_usd, max_run_usd=args.max_run_usd),
        preview_role_arn=preview_role,
        cluster_autoscaler=autoscaler,
        control_plane_logs=_control_plane_logs(args),
    )
