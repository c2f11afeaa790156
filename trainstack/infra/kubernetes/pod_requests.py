"""What one pod counts for against a Kueue ClusterQueue's quota, computed the way Kueue computes it.

Kueue v0.19.2 (trainstack/infra/core/versions.py KUEUE_VERSION) sizes a workload's pod set from its pod template:
1. pkg/workload/resources.go AdjustResources: RuntimeClass overhead, LimitRange defaults, then
   UseLimitsAsMissingRequestsInPod (a resource with a limit and no request requests its limit);
2. pkg/workload/workload.go totalRequestsFromPodSets: k8s.io/component-helpers v0.36.2
   resource/helpers.go PodRequests with default options, i.e.
     sum(containers) + sum(sidecars)   (init containers with restartPolicy Always)
     max'd with every plain init container plus the sidecars started before it,
   pod-level requests (cpu, memory, hugepages-*) replacing the containers' sum, plus pod overhead;
3. times the pod count.
A ClusterQueue admits a workload only when every resource it requests is covered and fits, so the
quota has to name every resource in the result. LimitRange defaults and RuntimeClass overheads
live in the cluster, not in the pod: the callers' namespaces have neither.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

_SUFFIXES = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")
_POD_LEVEL = ("cpu", "memory")  # and hugepages-*: component-helpers supportedPodLevelResources


def parse_quantity(quantity: str | int | float) -> Fraction:
    """A Kubernetes quantity ("500m", "1500Gi", "1e3", 8) as an exact number of base units."""
    match = _QUANTITY.match(str(quantity).strip())
    if match is None:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    number, exponent, suffix = match.groups()
    value = Fraction(number)
    return value * (Fraction(10) ** int(exponent[1:]) if exponent else _SUFFIXES[suffix or ""])


def format_quantity(value: Fraction) -> str:
    """The shortest exact quantity: 1501Gi, 362, 1500m. Finer than a milli-unit rounds up (as Kubernetes does)."""
    if value.denominator == 1:
        whole = int(value)
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = int(_SUFFIXES[suffix])
            if whole and whole % unit == 0 and whole >= unit:
                return f"{whole // unit}{suffix}"
        return str(whole)
    return f"{math.ceil(value * 1000)}m"


def _resource_list(resources: Mapping[str, Any] | None) -> dict[str, Fraction]:
    return {name: parse_quantity(q) for name, q in (resources or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    """Requests, with a limit standing in for a missing request (Kueue UseLimitsAsMissingRequestsInPod)."""
    resources = container.get("resources") or {}
    return {**_resource_list(resources.get("limits")), **_resource_list(resources.get("requests"))}


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _keep_max(total: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > total.get(name, Fraction(0)):
            total[name] = value


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """The requests one pod of this spec counts for in Kueue (see the module docstring)."""
    total: dict[str, Fraction] = {}
    for container in pod_spec.get("containers") or []:
        _add(total, _container_requests(container))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in pod_spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            during = dict(sidecars)
        else:
            during = dict(requests)
            _add(during, sidecars)
        _keep_max(init_peak, during)
    _keep_max(total, init_peak)
    pod_level = pod_spec.get("resources") or {}
    pod_level_requests = {**_resource_list(pod_level.get("limits")), **_resource_list(pod_level.get("requests"))}
    for name, value in pod_level_requests.items():
        if name in _POD_LEVEL or name.startswith("hugepages-"):
            total[name] = value
    _add(total, _resource_list(pod_spec.get("overhead")))
    return total


def queue_quota(pod_specs: Iterable[tuple[Mapping[str, Any], int]]) -> dict[str, str]:
    """ClusterQueue nominal quotas that admit all of these pods at once: [(pod spec, pod count), ...]."""
    total: dict[str, Fraction] = {}
    for pod_spec, count in pod_specs:
        _add(total, {name: value * count for name, value in pod_requests(pod_spec).items()})
    return {name: format_quantity(value) for name, value in total.items()}
