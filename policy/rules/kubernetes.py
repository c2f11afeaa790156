"""Kubernetes objects and Helm releases: jobs that clean up, no cluster-wide RBAC for workloads, pinned
charts and images.

Objects inside a helm.v3 Release are opaque to policies; for the training chart the rules read the
Release's values over the chart's own defaults (workloads/charts/training-job/values.yaml).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .common import Resource, Stack, as_int, as_list, get

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # policy/rules/ -> the Pulumi project
HELM_RELEASES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
TRAINING_CHART = "training-job"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
# Controllers that need cluster-wide rights run here; anything else is a workload. A policy config
# property `controllerNamespaces` replaces the list.
CONTROLLER_NAMESPACES = ("kube-system", "kueue-system", "nvidia-device-plugin", "gmp-system", "gke-managed-system",
                         "gpu-operator", "cert-manager")
ALL_SERVICE_ACCOUNTS = ("system:serviceaccounts", "system:authenticated", "system:unauthenticated")
_EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS = {
    "Pod": "spec", "Job": "spec.template.spec", "Deployment": "spec.template.spec",
    "StatefulSet": "spec.template.spec", "DaemonSet": "spec.template.spec", "ReplicaSet": "spec.template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
}


def _kind(resource: Resource) -> str | None:
    """`Job` for kubernetes:batch/v1:Job and the like; None for anything that is not a Kubernetes object."""
    if not resource.type.startswith("kubernetes:") or resource.type.startswith("kubernetes:helm.sh"):
        return None
    return resource.type.rsplit(":", 1)[1]


def _local_chart(chart: Any) -> Path | None:
    if not isinstance(chart, str) or "://" in chart:
        return None
    path = (PROJECT_ROOT / chart).resolve()
    return path if (path / "Chart.yaml").is_file() else None


@cache
def _chart_defaults(chart_dir: Path) -> Mapping[str, Any]:
    return yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}


def _training_chart_value(resource: Resource, path: str) -> tuple[bool, Any]:
    """(is the training chart, the value at `path` as the release sets it or the chart defaults it)."""
    if resource.type not in HELM_RELEASES:
        return False, None
    chart_dir = _local_chart(get(resource.props, "chart"))
    if chart_dir is None or yaml.safe_load((chart_dir / "Chart.yaml").read_text()).get("name") != TRAINING_CHART:
        return False, None
    return True, get(resource.props, f"values.{path}", get(_chart_defaults(chart_dir), path))


def job_ttl(resource: Resource, stack: Stack) -> list[str]:
    if _kind(resource) == "Job":
        ttl = get(resource.props, "spec.ttlSecondsAfterFinished")
    else:
        is_training, ttl = _training_chart_value(resource, "job.ttlSecondsAfterFinished")
        if not is_training:
            return []
    if as_int(ttl) is not None and as_int(ttl) >= 0:
        return []
    return ["the Job has no ttlSecondsAfterFinished: finished Jobs and their pods stay (and hold their "
            "volumes) until someone deletes them"]


def no_cluster_wide_rbac_for_workloads(resource: Resource, stack: Stack, controller_namespaces=CONTROLLER_NAMESPACES) -> list[str]:
    if resource.type != CLUSTER_ROLE_BINDING:
        return []
    problems = []
    for subject in as_list(get(resource.props, "subjects")):
        kind, name, namespace = get(subject, "kind"), get(subject, "name"), get(subject, "namespace")
        if kind == "ServiceAccount" and namespace not in controller_namespaces:
            problems.append(f"binds ServiceAccount {namespace}/{name} cluster-wide; use a RoleBinding in its namespace")
        elif kind == "Group" and str(name).startswith(ALL_SERVICE_ACCOUNTS):
            problems.append(f"binds group {name} cluster-wide")
    return problems


def chart_versions_pinned(resource: Resource, stack: Stack) -> list[str]:
    """Charts from a repository at an exact version (local charts are pinned by this repository); EKS
    add-ons at an exact build."""
    if resource.type == "aws:eks/addon:Addon":
        return [] if get(resource.props, "addonVersion") else ["addonVersion must be set: EKS would pick the default build"]
    if resource.type not in HELM_RELEASES or _local_chart(get(resource.props, "chart")) is not None:
        return []
    version = get(resource.props, "version")
    if version and _EXACT_VERSION.match(str(version)):
        return []
    return [f"chart {get(resource.props, 'chart')} needs an exact version (got {version!r}): an unpinned chart "
            "changes under an unchanged program"]


# Images allowed by exact version tag, each with why (a digest could not be taken from a published source).
TAG_PINNED_EXCEPTIONS = {
    # Google publishes the GPUDirect NCCL plugin installers by version tag only (its own manifests in
    # container-engine-accelerators and cluster-toolkit pin tags); the tag is the pair of the RxDM
    # daemon pinned in the training chart.
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev",
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev",
    # The NCCL gIB (GPUDirect-RDMA) installer likewise: container-engine-accelerators gpudirect-rdma and
    # cluster-toolkit's gke-a4 / gke-a3-ultragpu blueprints pin it by tag (v1.1.1 here, versions.py).
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib",
    # TCPXO's pre-installation step runs the node's own tools through nsenter; the image is only a shell.
    "ubuntu",
}


def _pinned(image: str) -> bool:
    if _DIGEST.search(image):
        return True
    repository, _, tag = image.rpartition(":")
    return bool(tag) and "/" not in tag and repository in TAG_PINNED_EXCEPTIONS and tag != "latest"


def images_pinned_by_digest(resource: Resource, stack: Stack) -> list[str]:
    is_training, digest = _training_chart_value(resource, "image.digest")
    if is_training:
        return [] if digest and re.fullmatch(r"sha256:[0-9a-f]{64}", str(digest)) else [
            "the training image is not pinned: set values.image.digest (TrainingImage.ref gives it)"]
    path = POD_SPEC_PATHS.get(_kind(resource) or "")
    if path is None:
        return []
    spec = get(resource.props, path, {})
    containers = as_list(get(spec, "containers")) + as_list(get(spec, "initContainers"))
    return [f"container {get(c, 'name')}: image {get(c, 'image')} is not pinned by digest (@sha256:...)"
            for c in containers if not _pinned(str(get(c, "image", "")))]
