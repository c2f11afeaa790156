"""Placement-group ARNs as EC2 answers them for a reservation (DescribeCapacityReservations PlacementGroupArn)."""

from __future__ import annotations


def group_name(arn: str) -> str:
    """arn:aws:ec2:<region>:<account>:placement-group/<name> -> <name>."""
    return arn.rpartition("/")[2]


def group_account(arn: str) -> str:
    """arn:aws:ec2:<region>:<account>:placement-group/<name> -> <account>, the group's owner ("" when the
    answer is not such an ARN: then it is no account's, and a named group is not the reservation's)."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[5].startswith("placement-group/") else ""
