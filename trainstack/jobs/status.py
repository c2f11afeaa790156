"""`list`: each job's state, GPUs, age and cost so far, from `helm list`, the Jobs and Kueue's Workloads.

States, from the Job (batch/v1) and its Workload (Kueue v1beta2):
- succeeded / failed: the Job's Complete / Failed condition is True.
- running: pods are active and the Job is not suspended.
- admitted: the Workload's Admitted condition is True (or there is no queue) but no pod runs yet.
- submitting / cancelling / failed / expired / deleted, while the Job is missing: from helm's release
  status (pending-install, uninstalling, failed), else expired once the release is older than the
  chart's job.ttlSecondsAfterFinished (the Job finished and Kubernetes deleted it), else deleted.
- queued: the Job is suspended and its Workload not admitted (Kueue creates queued Jobs suspended;
  kubernetes-sigs/kueue site/content/en/docs/concepts/workload.md, conditions QuotaReserved, Admitted,
  Finished).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from trainstack.infra.kubernetes.training_job import chart_default_values
from trainstack.jobs.submission import SWEEP_LABEL

CHART_NAME = "training-job"  # helm list's `chart` is "<name>-<version>"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class JobRow:
    name: str
    state: str
    gpus: int
    age_seconds: float | None
    cost_usd: float | None
    sweep: str | None
    waiting: str | None = None  # why a queued job waits: its Workload's QuotaReserved=False message


def _condition(obj: Mapping[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def quota_message(workload: Mapping[str, Any] | None) -> str | None:
    """Kueue's reason a Workload has no quota yet: its QuotaReserved=False condition's message (the
    scheduler's "insufficient quota for ..." text), kubernetes-sigs/kueue v0.19.2 pkg/workload/workload.go
    UnsetQuotaReservationWithCondition, called from pkg/scheduler/scheduler.go."""
    for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "QuotaReserved" and condition.get("status") == "False":
            return " ".join(str(condition.get("message") or condition.get("reason") or "").split()) or None
    return None


# helm's release status (helm v3.21.4 pkg/release/status.go) -> the row's state while the Job is missing.
_RELEASE_STATES = {"failed": "failed", "pending-install": "submitting", "uninstalling": "cancelling"}


def helm_time(text: Any) -> datetime | None:
    """helm list's `updated`: Go's time.String(), "2026-11-25 12:00:00.123456789 +0000 UTC"
    (helm v3.21.4 cmd/helm/list.go:164-171)."""
    if not isinstance(text, str):
        return None
    parts = text.split()
    if len(parts) < 3:
        return None
    day, clock, offset = parts[:3]
    whole, _, fraction = clock.partition(".")
    try:
        return datetime.strptime(f"{day} {whole}.{(fraction + '000000')[:6]} {offset}", "%Y-%m-%d %H:%M:%S.%f %z")
    except ValueError:
        return None


def ttl_seconds(values: Mapping[str, Any]) -> int | None:
    """How long a finished Job stays (the chart's job.ttlSecondsAfterFinished) before Kubernetes deletes it."""
    ttl = ((values.get("job") or {}) if isinstance(values, Mapping) else {}).get("ttlSecondsAfterFinished")
    if ttl is None:
        ttl = chart_default_values()["job"].get("ttlSecondsAfterFinished")
    return int(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else None


def missing_job_state(release: Mapping[str, Any], ttl: int | None, now: datetime) -> str:
    """The state of a release whose Job is not there: the release's own status says why."""
    release_status = str(release.get("status", ""))
    if release_status in _RELEASE_STATES:
        return _RELEASE_STATES[release_status]  # failed: helm could not create the job's objects
    updated = helm_time(release.get("updated"))
    if ttl is not None and updated is not None and (now - updated).total_seconds() > ttl:
        return "expired"  # finished, and its Job deleted ttlSecondsAfterFinished later
    return "deleted"  # the release is deployed but its Job was deleted by hand


def state(job: Mapping[str, Any] | None, workload: Mapping[str, Any] | None, queued_by_kueue: bool) -> str:
    if job is None:
        return "queued"  # the release exists, the Job not yet (helm is creating it)
    if _condition(job, "Complete"):
        return "succeeded"
    if _condition(job, "Failed"):
        return "failed"
    status = job.get("status") or {}
    if not (job.get("spec") or {}).get("suspend") and status.get("active", 0) > 0:
        return "running"
    if queued_by_kueue and not _condition(workload, "Admitted"):
        return "queued"
    return "admitted"


def gpus_per_pod(job: Mapping[str, Any]) -> int:
    containers = job["spec"]["template"]["spec"].get("containers", [])
    return sum(int(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0)) for c in containers)


def row(name: str, job: Mapping[str, Any] | None, workload: Mapping[str, Any] | None, *, queued_by_kueue: bool,
        gpus_per_node: int, usd_per_node: float | None, now: datetime) -> JobRow:
    current = state(job, workload, queued_by_kueue)
    if job is None:
        return JobRow(name, current, 0, None, 0.0, None)
    per_pod = gpus_per_pod(job)
    status = job.get("status") or {}
    pods = status.get("active", 0) if current == "running" else (job["spec"].get("parallelism") or 1)
    created = _time(job["metadata"].get("creationTimestamp"))
    # Billed from when the Job last started (status.startTime is reset on each resume) to its end.
    started = _time(status.get("startTime"))
    ended = _time(status.get("completionTime")) or next(
        (_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []
         if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
    cost: float | None = 0.0
    if started is not None and current in ("running", "succeeded", "failed"):
        hours = max(((ended or now) - started).total_seconds(), 0.0) / 3600
        parallelism = job["spec"].get("parallelism") or 1
        nodes = math.ceil(parallelism * per_pod / gpus_per_node) if per_pod and gpus_per_node else parallelism
        cost = None if usd_per_node is None else hours * nodes * usd_per_node
    labels = job["spec"]["template"].get("metadata", {}).get("labels") or {}
    return JobRow(name=name, state=current, gpus=pods * per_pod,
                  age_seconds=(now - created).total_seconds() if created else None,
                  cost_usd=cost, sweep=labels.get(SWEEP_LABEL),
                  waiting=quota_message(workload) if current == "queued" else None)


@dataclass(frozen=True)
class PoolPricing:
    """A GPU pool as `list` prices a job on it: the labels its nodes carry, their GPUs and hourly price."""

    node_selector: Mapping[str, str]
    gpus_per_node: int
    usd_per_node: float | None  # None: no price known for this pool


def pool_of(job: Mapping[str, Any] | None, pools: Sequence[PoolPricing]) -> PoolPricing | None:
    """The pool whose node labels the Job's pods select (`submit --pool` gives them that pool's nodeSelector)."""
    selector = ((job or {}).get("spec", {}).get("template", {}).get("spec") or {}).get("nodeSelector") or {}
    return next((pool for pool in pools
                 if pool.node_selector and all(selector.get(k) == v for k, v in pool.node_selector.items())), None)


def rows(releases: list[Mapping[str, Any]], jobs: Mapping[str, Any], workloads: Mapping[str, Any], *,
         queued_by_kueue: bool, gpus_per_node: int, usd_per_node: float | None,
         now: datetime | None = None, ttl: int | None = None, pools: Sequence[PoolPricing] = ()) -> list[JobRow]:
    """One row per training-job release; `jobs` from `kubectl get jobs -o json`, `workloads` likewise.
    A job on one of `pools` is priced with that pool's nodes; any other with `gpus_per_node` and `usd_per_node`."""
    now = now or datetime.now(timezone.utc)
    by_name = {item["metadata"]["name"]: item for item in (jobs or {}).get("items", [])}
    # A Workload belongs to one Job object: match on the owner's UID, not its name (a Workload left from an
    # earlier job of the same name is another owner; Kueue hashes the owner's UID into the Workload's name,
    # kubernetes-sigs/kueue v0.19.2 pkg/controller/jobframework/workload_names.go).
    by_uid: dict[str, Any] = {}
    for item in (workloads or {}).get("items", []):
        for owner in item["metadata"].get("ownerReferences", []):
            if owner.get("kind") == "Job" and owner.get("uid"):
                by_uid[owner["uid"]] = item
    ordered = sorted((r for r in releases if str(r.get("chart", "")).startswith(f"{CHART_NAME}-")),
                     key=lambda r: r["name"])
    result = []
    for release in ordered:
        name = release["name"]
        job = by_name.get(name)
        workload = by_uid.get((job or {}).get("metadata", {}).get("uid", ""))
        pool = pool_of(job, pools)
        found = row(name, job, workload, queued_by_kueue=queued_by_kueue,
                    gpus_per_node=pool.gpus_per_node if pool else gpus_per_node,
                    usd_per_node=pool.usd_per_node if pool else usd_per_node, now=now)
        if job is None:
            found = replace(found, state=missing_job_state(release, ttl, now))
        result.append(found)
    return result


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{int(seconds)}s"
    if seconds < 7200:
        return f"{int(seconds // 60)}m"
    if seconds < 172800:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def table(job_rows: list[JobRow]) -> str:
    """Jobs of a sweep together under their sweep's name; the rest alone."""
    lines = [f"{'NAME':<52} {'STATE':<10} {'GPUS':>4} {'AGE':>5} {'COST':>9}"]

    def line(r: JobRow, indent: str = "") -> str:
        cost = "?" if r.cost_usd is None else f"${r.cost_usd:.2f}"
        text = f"{indent + r.name:<52} {r.state:<10} {r.gpus:>4} {_age(r.age_seconds):>5} {cost:>9}"
        return text if r.waiting is None else f"{text}  waiting: {r.waiting}"

    sweeps: dict[str, list[JobRow]] = {}
    for r in job_rows:
        if r.sweep is None:
            lines.append(line(r))
        else:
            sweeps.setdefault(r.sweep, []).append(r)
    for sweep, members in sweeps.items():
        costs = [m.cost_usd for m in members]
        total = "?" if None in costs else f"${sum(c for c in costs if c is not None):.2f}"
        lines.append(f"{'sweep ' + sweep:<52} {len(members)} jobs{'':<7}{sum(m.gpus for m in members):>4} "
                     f"{'':>5} {total:>9}")
        lines.extend(line(m, "  ") for m in members)
    lines.append("COST: GPU node-hours since each job started x the stack's price per GPU node (trainstack/infra/cost/prices.yaml)")
    return "\n".join(lines)
