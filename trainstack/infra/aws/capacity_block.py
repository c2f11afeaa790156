"""A Capacity Block for ML the GPU group launches into (gpuNodes.capacityType CAPACITY_BLOCK): read once
for preflight, and its end as a stack output.

The read is ec2:DescribeCapacityReservations through the provider's getCapacityBlockReservation. A block
of another Region or account, or a mistyped ID, fails the invoke itself; so the invoke is awaited here and
its failure turned into one line, which would otherwise be the provider's not-found error. Its docstring
says it returns only `capacity-block` reservations, but the provider's lookup
(terraform-provider-aws ec2_capacity_block_reservation_data_source.go, findCapacityReservation) filters by
neither type nor state, so an On-Demand Capacity Reservation's ID may come back: its reservationType is
checked too.

The end: EC2 starts terminating a block's instances 30 minutes before it ends (EC2 user guide
capacity-blocks-using.html), and EKS says to scale the group to zero more than 30 minutes before the
end (EKS user guide capacity-blocks.html). The stack outputs `capacityBlockEndDate` so that a run can
be planned, and docs/aws.md gives the command.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from trainstack.infra.aws.config import AwsStackConfig
from trainstack.infra.config import NAMESPACE

GET_CAPACITY_BLOCK_RESERVATION = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
RESERVATION_KEY = f"{NAMESPACE}:gpuNodes.capacityReservationId"


class NotACapacityBlock:
    """The invoke's failure, kept as its first line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason.strip().splitlines()[0] if reason.strip() else "no answer"


async def _read(reservation_id: str, opts: pulumi.InvokeOptions) -> Any:
    try:
        return await pulumi.runtime.invoke_async(GET_CAPACITY_BLOCK_RESERVATION, {"id": reservation_id}, opts,
                                                 typ=aws.ec2.GetCapacityBlockReservationResult)
    except Exception as error:  # noqa: BLE001 - any failure of the read is the one line below
        return NotACapacityBlock(str(error))


def read_capacity_block(reservation_id: str, provider: aws.Provider, parent: pulumi.Resource) -> pulumi.Output[Any]:
    """The block (GetCapacityBlockReservationResult), or NotACapacityBlock when EC2 has no block of that ID."""
    return pulumi.Output.from_input(_read(reservation_id, pulumi.InvokeOptions(parent=parent, provider=provider)))


def checked_is_block(answer: Any, reservation_id: str, region: str) -> Any:
    """The block itself, or one line: the ID names no Capacity Block this account can launch into here."""
    if isinstance(answer, NotACapacityBlock):
        raise pulumi.RunError(
            f"{RESERVATION_KEY}: {reservation_id} is not a Capacity Block of this account in {region} "
            f"(ec2:DescribeCapacityReservations answered: {answer.reason}). Fix: for an On-Demand Capacity "
            f"Reservation, pulumi config set --path {NAMESPACE}:gpuNodes.capacityType ON_DEMAND; else name a "
            "Capacity Block (aws ec2 describe-capacity-reservations --filters "
            "Name=reservation-type,Values=capacity-block)")
    if getattr(answer, "reservation_type", None) not in (None, "", "capacity-block"):
        checked_is_block(NotACapacityBlock(f"reservation type {answer.reservation_type}, not capacity-block"),
                         reservation_id, region)
    return answer


def capacity_block_outputs(cfg: AwsStackConfig, provider: aws.Provider, parent: pulumi.Resource
                           ) -> dict[str, pulumi.Output[str]]:
    """`capacityBlockEndDate` (RFC 3339, as EC2 gives it) for a Capacity Block group; nothing otherwise."""
    reservation = cfg.gpu_nodes.capacity_reservation_id
    if cfg.gpu_nodes.capacity_type != "CAPACITY_BLOCK" or reservation is None:
        return {}
    block = read_capacity_block(reservation, provider, parent)
    return {"capacityBlockEndDate": block.apply(
        lambda answer: "" if isinstance(answer, NotACapacityBlock) else answer.end_date)}
