"""Render the training-job chart with Helm's own engine (helm-python-sdk, offline) for the tests."""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from trainstack.infra.kubernetes.training_job import (
    deep_merge,  # re-exported for the chart tests too (Helm merge semantics)
)

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "workloads" / "charts" / "training-job"
VALUES_DIR = Path(__file__).parent / "values"
VALUE_SETS = sorted(path.stem for path in VALUES_DIR.glob("*.yaml"))
PROFILES_DIR = CHART_DIR / "profiles"

# Value sets that start from the chart's shipped profiles (`helm install -f <profile> ... -f <set>`),
# in order; the value set's own file is applied last.
PROFILES = {
    "a3-nemo": ("a3-highgpu", "nemo-megatron"),
    "a3-nccl-check": ("a3-highgpu", "nccl-check"),
    "a3-mega-nccl-check": ("a3-megagpu", "nccl-check"),
    "a3-allreduce-check": ("a3-highgpu", "nccl-allreduce"),
    "eks-efa-train": ("eks-efa",),
    "eks-efa-allreduce-check": ("eks-efa", "nccl-allreduce"),
    "a4-rdma": ("a4-highgpu",),
    "a4-allreduce-check": ("a4-highgpu", "nccl-allreduce"),
}

RELEASE = "gpt2-run"
NAMESPACE = "ml"


def _minimum_kubernetes_version() -> str:
    """The oldest Kubernetes the chart supports, from Chart.yaml `kubeVersion: ">=1.31.0-0"`."""
    constraint = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["kubeVersion"]
    match = re.fullmatch(r">=\s*(\d+\.\d+)\.\d+(-0)?", constraint)
    assert match, f"Chart.yaml kubeVersion {constraint!r} is not of the form '>=X.Y.Z-0'"
    return match.group(1)


# Manifests are validated against the oldest version the chart claims to support: a field that
# appeared later would be silently dropped (or rejected) by such a cluster.
KUBERNETES_VERSION = _minimum_kubernetes_version()


@functools.cache
def chart() -> helm.Chart:
    return helm.Chart.load(CHART_DIR)


def chart_values() -> dict[str, Any]:
    """The chart's own values.yaml (its defaults)."""
    return yaml.safe_load((CHART_DIR / "values.yaml").read_text())


def load_profile(name: str) -> dict[str, Any]:
    return yaml.safe_load((PROFILES_DIR / f"{name}.yaml").read_text())


def load_values(name: str) -> dict[str, Any]:
    """A value set as `helm install -f <its profiles...> -f values/<name>.yaml` would merge it."""
    values: dict[str, Any] = {}
    for profile in PROFILES.get(name, ()):
        values = deep_merge(values, load_profile(profile))
    return deep_merge(values, yaml.safe_load((VALUES_DIR / f"{name}.yaml").read_text()))


def is_nccl_check(name: str) -> bool:
    return bool(load_values(name).get("ncclCheck", {}).get("enabled"))


def nccl_check_runner(name: str) -> str:
    return deep_merge(chart_values(), load_values(name))["ncclCheck"]["runner"]


# Sets whose Job trains (a `trainer` container), and sets whose Job runs the NCCL check instead:
# nccl-tests in the plugin image, or an all-reduce in the training image.
TRAINING_SETS = [name for name in VALUE_SETS if not is_nccl_check(name)]
NCCL_CHECK_SETS = [name for name in VALUE_SETS if is_nccl_check(name) and nccl_check_runner(name) == "nccl-tests"]
ALLREDUCE_CHECK_SETS = [name for name in VALUE_SETS if is_nccl_check(name) and nccl_check_runner(name) == "trainer"]


def render_templates(values: dict[str, Any], *, release: str = RELEASE, namespace: str = NAMESPACE,
                     **options: Any) -> dict[str, str]:
    """Template path -> rendered text, exactly as `helm template` produces it."""
    return chart().render(values, name=release, namespace=namespace, **options)


def render(values: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    """Every Kubernetes object the chart renders for these values (NOTES.txt left out)."""
    objects = []
    for path, text in sorted(render_templates(values, **kwargs).items()):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [obj for obj in by_kind(objects, kind) if name is None or obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod spec of every workload (Job, Deployment, ...)."""
    return [obj["spec"]["template"]["spec"] for obj in objects if "template" in obj.get("spec", {})]


def trainer(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objects, "Job")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "trainer")


def parse_launch(container: dict[str, Any]) -> argparse.Namespace:
    """The container's command parsed by torchrun's own argument parser (torch.distributed.run)."""
    from torch.distributed.run import get_args_parser  # imported late: torch is slow to import

    # Our launcher takes exactly torchrun's flags (it is torchrun's own launcher underneath).
    assert container["command"] in (["python", "-m", "training.launch"], ["torchrun"]), container["command"]
    return get_args_parser().parse_args(container["args"])
