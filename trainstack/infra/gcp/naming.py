"""Names GCP limits more tightly than Pulumi does."""

from __future__ import annotations


def service_account_id(cluster_name: str, purpose: str) -> str:
    """A service account ID (6-30 characters: lowercase letters, digits, -) for `purpose` in this cluster."""
    head = cluster_name[: 29 - len(purpose)].rstrip("-")
    return f"{head}-{purpose}"
