"""The EFA group's placement group: whether the stack creates one, and the one a reservation was made in
(its ARN as EC2 answers it, DescribeCapacityReservations PlacementGroupArn)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from trainstack.infra.aws.config import GpuNodeGroupConfig


def group_name(arn: str) -> str:
    """arn:aws:ec2:<region>:<account>:placement-group/<name> -> <name>."""
    return arn.rpartition("/")[2]


def group_account(arn: str) -> str:
    """arn:aws:ec2:<region>:<account>:placement-group/<name> -> <account>, the group's owner ("" when the
    answer is not such an ARN: then it is no account's, and a named group is not the reservation's)."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[5].startswith("placement-group/") else ""


def creates_placement_group(gpu: GpuNodeGroupConfig) -> bool:
    """A new cluster placement group only for an EFA group that names none and launches outside a reservation.

    A reservation or Capacity Block already fixes the zone (and, for a block, its placement); a new, empty
    placement group would constrain the launch to capacity the reservation does not hold
    (efa_networking.py). A reservation made inside a placement group places its instances there itself.
    """
    return gpu.efa is not None and gpu.efa.placement_group is None and gpu.capacity_reservation_id is None


def reservation_placement_group(name: str, gpu: GpuNodeGroupConfig, account_id: pulumi.Input[str], *,
                                parent: pulumi.Resource) -> pulumi.Output[str | None] | None:
    """The cluster placement group an On-Demand Capacity Reservation was made in, when this account owns it.

    The EC2 user guide (capacity-reservations-launch.html) launches into such a reservation by naming
    its cluster placement group and the reservation, so the launch template names both. A group of
    another account (a shared reservation) is left to the reservation, which places its instances in
    its own group (aws/aws-parallelcluster PR #7252); a Capacity Block is launched into without a group
    (EC2 user guide capacity-blocks-using.html: no need for one); a named gpuNodes.placementGroup wins
    (preflight.py refuses one that is not the reservation's).
    """
    assert gpu.efa is not None
    if gpu.capacity_type == "CAPACITY_BLOCK" or gpu.capacity_reservation_id is None or gpu.efa.placement_group:
        return None
    reservation = aws.ec2.CapacityReservation.get(name, gpu.capacity_reservation_id,
                                                  opts=pulumi.ResourceOptions(parent=parent))
    return pulumi.Output.all(reservation.placement_group_arn, account_id).apply(
        lambda v: group_name(v[0]) if v[0] and group_account(v[0]) == v[1] else None)
