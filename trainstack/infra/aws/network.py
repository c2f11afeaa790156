"""The VPC the cluster runs in: public and private subnets per zone, NAT, and an S3 gateway endpoint.

Or, given an existing VPC, nothing is created: its CIDR block and its private subnets' zones are looked
up (the seed copied the CIDR by hand). EFS allows one mount target per zone, so `mount_subnet_ids`
holds one private subnet per zone: two private subnets in one zone must not become two mount targets.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainstack.infra.aws.config import ExistingNetwork
from trainstack.infra.core.ordering import available_after


@dataclass(frozen=True, kw_only=True)
class NetworkArgs:
    region: str
    availability_zones: Sequence[str]
    vpc_cidr: str = "10.0.0.0/16"
    # One NAT gateway (the default) costs a third of one per zone; a zone outage then cuts egress.
    nat_gateway_per_zone: bool = False
    existing: ExistingNetwork | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def subnet_blocks(vpc_cidr: str, zones: int) -> tuple[list[str], list[str]]:
    """(private, public) CIDR blocks: the VPC cut in 16 equal blocks, private from the first half."""
    blocks = [str(b) for b in ipaddress.IPv4Network(vpc_cidr).subnets(prefixlen_diff=4)]
    if zones > 8:
        raise ValueError(f"{zones} zones do not fit in 16 blocks of {vpc_cidr}")
    return blocks[:zones], blocks[8 : 8 + zones]


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    # Known-length lists: one mount target per private subnet is decided while the program runs.
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    mount_subnet_ids: dict[str, pulumi.Output[str]]  # zone -> the first private subnet there

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:Network", name, None, opts)
        if args.existing is not None:
            self._use_existing(args.existing)
        else:
            self._create(name, args)
        self.register_outputs({
            "vpcId": self.vpc_id,
            "vpcCidr": self.vpc_cidr,
            "publicSubnetIds": self.public_subnet_ids,
            "privateSubnetIds": self.private_subnet_ids,
        })

    def _use_existing(self, existing: ExistingNetwork) -> None:
        invoke = pulumi.InvokeOutputOptions(parent=self)  # the provider this component was given
        vpc = aws.ec2.get_vpc_output(id=existing.vpc_id, opts=invoke)
        self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
        self.vpc_cidr = vpc.cidr_block
        self.public_subnet_ids = [pulumi.Output.from_input(s) for s in existing.public_subnet_ids]
        self.private_subnet_ids = [pulumi.Output.from_input(s) for s in existing.private_subnet_ids]
        plain = all(isinstance(s, str) for s in (existing.vpc_id, *existing.private_subnet_ids))
        # Plain (blocking) lookups: the IDs are config, and how many mount targets to create must be
        # known while the program runs, never inside an apply. They run in previews too.
        subnets = [aws.ec2.get_subnet(id=subnet_id, opts=pulumi.InvokeOptions(parent=self))
                   for subnet_id in existing.private_subnet_ids] if plain else []
        if not plain or any(subnet.id is None for subnet in subnets):
            # IDs that are other resources' outputs (the caller's own aws.ec2.Subnet), or lookups that answered
            # nothing (a preview of a caller's provider whose settings are outputs: preflight.gate): the zones
            # are not known while the program runs, so each subnet gets a mount target (give one subnet per
            # zone: EFS refuses a second mount target in a zone, and a subnet outside the VPC, when it creates
            # them). Their names differ from the per-zone ones (docs/library.md, "Providers and regions").
            self.mount_subnet_ids = {f"subnet{index}": pulumi.Output.from_input(subnet_id)
                                     for index, subnet_id in enumerate(existing.private_subnet_ids)}
            return
        zones: dict[str, str] = {}
        for subnet_id, subnet in zip(existing.private_subnet_ids, subnets, strict=True):
            if subnet.vpc_id != existing.vpc_id:
                raise pulumi.RunError(f"{existing.subnets_key}: {subnet_id} is in {subnet.vpc_id}, "
                                      f"not in {existing.vpc_id}. Fix: list subnets of {existing.vpc_id}")
            zones.setdefault(subnet.availability_zone, subnet_id)
        self.mount_subnet_ids = {zone: pulumi.Output.from_input(subnet_id) for zone, subnet_id in zones.items()}

    def _create(self, name: str, args: NetworkArgs) -> None:
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            # EKS nodes and the EFS mount targets' DNS names need both.
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": name},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": name}, opts=child)
        public_table = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-public"},
                                          opts=child)
        public_route = aws.ec2.Route(f"{name}-public-internet", route_table_id=public_table.id,
                                     destination_cidr_block="0.0.0.0/0", gateway_id=gateway.id, opts=child)

        private_blocks, public_blocks = subnet_blocks(args.vpc_cidr, len(args.availability_zones))
        public_subnets = [
            self._subnet(f"{name}-public-{zone}", vpc, zone, block, public_table, public_route, tags)
            for zone, block in zip(args.availability_zones, public_blocks, strict=True)
        ]
        self.public_subnet_ids = [ready_id for _, ready_id in public_subnets]

        nat_zones = args.availability_zones if args.nat_gateway_per_zone else args.availability_zones[:1]
        nat_gateways = []
        for zone, (subnet, _) in zip(nat_zones, public_subnets, strict=False):
            address = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags={**tags, "Name": f"{name}-nat-{zone}"},
                                  opts=child)
            nat_gateways.append(aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=address.id,
                subnet_id=subnet.id,
                tags={**tags, "Name": f"{name}-nat-{zone}"},
                # AWS: the NAT gateway needs the internet gateway attached first (and is deleted before it).
                opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
            ))

        private_tables = []
        self.private_subnet_ids = []
        for index, (zone, block) in enumerate(zip(args.availability_zones, private_blocks, strict=True)):
            nat = nat_gateways[index] if args.nat_gateway_per_zone else nat_gateways[0]
            if args.nat_gateway_per_zone or index == 0:
                table = aws.ec2.RouteTable(f"{name}-private-{zone}", vpc_id=vpc.id,
                                           tags={**tags, "Name": f"{name}-private-{zone}"}, opts=child)
                route = aws.ec2.Route(f"{name}-private-{zone}-nat", route_table_id=table.id,
                                      destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat.id, opts=child)
                private_tables.append((table, route))
            table, route = private_tables[-1]
            _, ready_id = self._subnet(f"{name}-private-{zone}", vpc, zone, block, table, route, tags)
            self.private_subnet_ids.append(ready_id)
        self.mount_subnet_ids = dict(zip(args.availability_zones, self.private_subnet_ids, strict=True))

        # Free: S3 traffic (snapshots, and the ECR image layers, which ECR serves from S3) skips the NAT
        # gateway and its per-GB processing charge.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[table.id for table, _ in private_tables],
            tags={**tags, "Name": f"{name}-s3"},
            opts=child,
        )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block

    def _subnet(self, name: str, vpc: aws.ec2.Vpc, zone: str, block: str, table: aws.ec2.RouteTable,
                route: aws.ec2.Route, tags: Mapping[str, str]) -> tuple[aws.ec2.Subnet, pulumi.Output[str]]:
        """A subnet on `table`, and its ID handed out only once its route out exists (nodes never boot
        without egress)."""
        subnet = aws.ec2.Subnet(
            name,
            vpc_id=vpc.id,
            cidr_block=block,
            availability_zone=zone,
            # Nothing gets a public address by default, not even in a public subnet (only the NAT does).
            map_public_ip_on_launch=False,
            tags={**tags, "Name": name},
            opts=pulumi.ResourceOptions(parent=self),
        )
        association = aws.ec2.RouteTableAssociation(name, subnet_id=subnet.id, route_table_id=table.id,
                                                    opts=pulumi.ResourceOptions(parent=self))
        return subnet, available_after(subnet.id, association, route)
