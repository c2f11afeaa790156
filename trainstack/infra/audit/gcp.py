"""The GCP side of the audit. Covered: Cloud Storage buckets (JSON API). Not covered here (listed with
the command to check by hand): disks, Filestore instances, GKE clusters and node pools, addresses."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

from trainstack.infra.audit import APP_LABEL, STACK_LABEL_KEY
from trainstack.infra.audit.report import CloudError, Orphan

GCS_API = "https://storage.googleapis.com"


@dataclass(frozen=True)
class Scope:
    stack: str
    project: str
    held: frozenset[str]

    def ours(self, labels: dict | None) -> bool:
        labels = labels or {}
        return labels.get(APP_LABEL[0]) == APP_LABEL[1] and labels.get(STACK_LABEL_KEY) == self.stack

    @property
    def label_filter(self) -> str:
        return f"labels.{APP_LABEL[0]}={APP_LABEL[1]} AND labels.{STACK_LABEL_KEY}={self.stack}"


def not_checked(scope: Scope) -> list[str]:
    project, labels = scope.project, scope.label_filter
    return [
        f"detached disks: gcloud compute disks list --project {project} --filter='{labels} AND -users:*'",
        f"Filestore instances: gcloud filestore instances list --project {project} --filter='{labels}'",
        f"GKE clusters: gcloud container clusters list --project {project} --filter='resourceLabels.{STACK_LABEL_KEY}={scope.stack}'",
        f"addresses: gcloud compute addresses list --project {project} --filter='{labels}'",
    ]


def _endpoint() -> str:
    """STORAGE_EMULATOR_HOST (the convention Google's client libraries follow) or the real API."""
    return os.environ.get("STORAGE_EMULATOR_HOST", GCS_API).rstrip("/")


def _headers() -> dict[str, str]:
    if "STORAGE_EMULATOR_HOST" in os.environ:
        return {}
    token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN") or subprocess.run(
        ["gcloud", "auth", "print-access-token"], capture_output=True, text=True, check=True).stdout.strip()
    return {"Authorization": f"Bearer {token}"}


def _buckets(project: str) -> Iterator[dict]:
    page_token = None
    while True:
        query = {"project": project, **({"pageToken": page_token} if page_token else {})}
        request = urllib.request.Request(f"{_endpoint()}/storage/v1/b?{urllib.parse.urlencode(query)}", headers=_headers())
        with urllib.request.urlopen(request, timeout=30) as response:
            page = json.load(response)
        yield from page.get("items", [])
        page_token = page.get("nextPageToken")
        if not page_token:
            return


def audit(scope: Scope) -> list[Orphan]:
    try:
        buckets = list(_buckets(scope.project))
    except (OSError, subprocess.CalledProcessError) as error:
        raise CloudError(f"Cloud Storage ({scope.project}): {error}; check `gcloud auth login` and the project") from None
    return [
        Orphan("Cloud Storage bucket", bucket["name"], f"gcloud storage rm --recursive gs://{bucket['name']}",
               "kept by `pulumi destroy` on purpose (snapshots, exports): delete only what you no longer need", order=80)
        for bucket in buckets
        if scope.ours(bucket.get("labels")) and bucket["name"] not in scope.held and bucket.get("id") not in scope.held
    ]
