"""A namespace's LimitRanges against the job's pod, as Kueue judges them before it admits the job.

Kueue v0.19.2 applies the LimitRanges' defaults to each container (pkg/workload/resources.go
AdjustResources), then refuses a workload whose requests exceed its limits (ValidateResources) or
fall outside the LimitRanges (ValidateLimitRange, with pkg/util/limitrange/limitrange.go Summarize:
the lowest max, the highest min, the first default of all ranges). Such a workload stays inadmissible
for ever, so `submit` checks it first and refuses with Kueue's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from trainstack.infra.kubernetes.pod_requests import format_quantity, parse_quantity, pod_requests

Resources = dict[str, Fraction]


def _quantities(value: Any) -> Resources:
    out: Resources = {}
    for name, quantity in (value or {}).items() if isinstance(value, Mapping) else ():
        try:
            out[str(name)] = parse_quantity(quantity)
        except ValueError:
            continue  # the API server would not have stored it
    return out


def summarize(limit_ranges: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Resources]]:
    """Type (Container, Pod) -> {max, min, default, defaultRequest}, merged as Kueue's Summarize does."""
    summary: dict[str, dict[str, Resources]] = {}
    for limit_range in limit_ranges:
        for item in ((limit_range.get("spec") or {}).get("limits") or []):
            kind = summary.setdefault(str(item.get("type")), {"max": {}, "min": {}, "default": {},
                                                              "defaultRequest": {}})
            for name, value in _quantities(item.get("max")).items():
                kind["max"][name] = min(value, kind["max"].get(name, value))
            for name, value in _quantities(item.get("min")).items():
                kind["min"][name] = max(value, kind["min"].get(name, value))
            for key in ("default", "defaultRequest"):
                for name, value in _quantities(item.get(key)).items():
                    kind[key].setdefault(name, value)
    return summary


def _defaulted(container: Mapping[str, Any], ranges: Mapping[str, Resources]) -> tuple[Resources, Resources]:
    """A container's requests and limits after the LimitRange defaults (a missing request defaults to
    the default request, else to the limit: Kubernetes' own defaulting)."""
    resources = container.get("resources") or {}
    limits = {**ranges.get("default", {}), **_quantities(resources.get("limits"))}
    requests = {**limits, **ranges.get("defaultRequest", {}),
                **_quantities(resources.get("requests"))}
    return requests, limits


def _with_defaults(pod_spec: Mapping[str, Any], ranges: Mapping[str, Resources]) -> dict[str, Any]:
    """The pod spec with each container's requests and limits as Kueue sees them after the defaults."""
    def defaulted(container: Mapping[str, Any]) -> dict[str, Any]:
        requests, limits = _defaulted(container, ranges)
        return {**container, "resources": {"requests": {k: format_quantity(v) for k, v in requests.items()},
                                           "limits": {k: format_quantity(v) for k, v in limits.items()}}}

    return {**pod_spec, "initContainers": [defaulted(c) for c in pod_spec.get("initContainers") or []],
            "containers": [defaulted(c) for c in pod_spec.get("containers") or []]}


def violations(pod_spec: Mapping[str, Any], limit_ranges: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why Kueue would refuse this pod in a namespace with these LimitRanges ([] when it would not)."""
    summary = summarize(limit_ranges)
    container_range = summary.get("Container", {})
    spec = _with_defaults(pod_spec, container_range)
    problems: list[str] = []
    for container in [*spec["initContainers"], *spec["containers"]]:
        name = container.get("name", "?")
        requests = _quantities(container["resources"]["requests"])
        limits = _quantities(container["resources"]["limits"])
        for resource, request in requests.items():
            if resource in limits and request > limits[resource]:
                problems.append(f"container {name}: {resource} request {format_quantity(request)} is above its "
                                f"limit {format_quantity(limits[resource])} (the LimitRange's default limit)")
        highest = {r: max(requests.get(r, Fraction(0)), limits.get(r, Fraction(0))) for r in {*requests, *limits}}
        lowest = {r: min(v for v in (requests.get(r), limits.get(r)) if v is not None) for r in {*requests, *limits}}
        for resource, cap in container_range.get("max", {}).items():
            if highest.get(resource, Fraction(0)) > cap:
                problems.append(f"container {name}: {resource} {format_quantity(highest[resource])} is above the "
                                f"LimitRange max {format_quantity(cap)}")
        for resource, floor in container_range.get("min", {}).items():
            if lowest.get(resource, Fraction(0)) < floor:
                problems.append(f"container {name}: {resource} {format_quantity(lowest.get(resource, Fraction(0)))} "
                                f"is below the LimitRange min {format_quantity(floor)}")
    # The pod's requests as Kubernetes sums them (sidecars, the largest init container: pod_requests.py).
    total = pod_requests(spec)
    for resource, cap in summary.get("Pod", {}).get("max", {}).items():
        if total.get(resource, Fraction(0)) > cap:
            problems.append(f"the pod's {resource} {format_quantity(total[resource])} is above the LimitRange "
                            f"Pod max {format_quantity(cap)}")
    for resource, floor in summary.get("Pod", {}).get("min", {}).items():
        if total.get(resource, Fraction(0)) < floor:
            problems.append(f"the pod's {resource} {format_quantity(total.get(resource, Fraction(0)))} is below the "
                            f"LimitRange Pod min {format_quantity(floor)}")
    return problems
