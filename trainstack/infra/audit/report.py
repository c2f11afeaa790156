"""An orphan and how the audit prints them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class CloudError(Exception):
    """The cloud could not be listed (credentials, region, project): one line naming it."""


@dataclass(frozen=True)
class Orphan:
    kind: str  # e.g. "EFS access point"
    identifier: str  # what the delete command names
    delete_command: str
    note: str = ""  # why it is there, or a caution before deleting
    order: int = 50  # delete dependents first: load balancers before subnets, access points before file systems


def render(stack: str, orphans: Sequence[Orphan], not_checked: Sequence[str] = ()) -> str:
    lines = []
    if not orphans:
        lines.append(f"No orphans: everything labelled pulumi-stack={stack} is in the stack's state.")
    else:
        lines.append(f"{len(orphans)} resource(s) labelled pulumi-stack={stack} that the stack's state does not hold "
                     "(delete in this order):")
        for orphan in sorted(orphans, key=lambda o: (o.order, o.kind, o.identifier)):
            note = f"  ({orphan.note})" if orphan.note else ""
            lines.append(f"- {orphan.kind} {orphan.identifier}{note}\n    {orphan.delete_command}")
    lines += [f"Not checked: {item}" for item in not_checked]
    return "\n".join(lines)
