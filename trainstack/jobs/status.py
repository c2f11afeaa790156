"""`list`: each job's state, GPUs, age and cost so far, from `helm list`, the Jobs and Kueue's Workloads.

States, from the Job (batch/v1) and its Workload (Kueue v1beta2):
- succeeded / failed: the Job's Complete / Failed condition is True.
- running: every active pod is ready (the Job's status.ready).
- starting: pods are active but not all ready: on a node pulling the image or starting, or without a
  node yet; `not starting: ImagePullBackOff ...` when a container waits for a reason that does not
  fix itself (Kubernetes' own waiting reasons, kubelet pkg/kubelet/images/types.go and
  pkg/kubelet/kuberuntime). Kueue's waitForPodsReady evicts such a job after its timeout
  (trainstack/infra/kubernetes/kueue.py).
- admitted: the Workload's Admitted condition is True (or there is no queue) but no pod runs yet.
- evicted / preempted: the Workload's Evicted condition is True (reason Preempted: preempted) and it
  waits to be admitted again; the reason and Kueue's message are shown.
- deactivated: the Workload's spec.active is false (someone deactivated it, or a Kueue configured with a
  requeue limit gave up; the stack's sets none): it never runs again by itself; the Evicted condition's
  reason is shown, with the kubectl patch that reactivates it.
- submitting / stuck / cancelling / failed / expired / deleted, while the Job is missing: from helm's
  release status (pending-install: stuck once older than STUCK_INSTALL_S, helm having been stopped
  mid-install; uninstalling, failed), else expired once the release is older than the
  chart's job.ttlSecondsAfterFinished (the Job finished and Kubernetes deleted it), else deleted.
- queued: the Job is suspended and its Workload not admitted (Kueue creates queued Jobs suspended;
  kubernetes-sigs/kueue site/content/en/docs/concepts/workload.md, conditions QuotaReserved, Admitted,
  Finished).
"""

from __future__ import annotations

import math
import shlex
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
    note: str | None = None  # what else `list` says about it (an eviction's reason, a pod that cannot start)


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
    finite = isinstance(ttl, int) or (isinstance(ttl, float) and math.isfinite(ttl))
    return int(ttl) if finite and not isinstance(ttl, bool) else None


STUCK_INSTALL_S = 900  # helm install creates a job's few objects in seconds; 15 minutes pending is a dead helm


def missing_job_state(release: Mapping[str, Any], ttl: int | None, now: datetime) -> str:
    """The state of a release whose Job is not there: the release's own status says why."""
    release_status = str(release.get("status", ""))
    updated = helm_time(release.get("updated"))
    if (release_status == "pending-install" and updated is not None
            and (now - updated).total_seconds() > STUCK_INSTALL_S):
        return "stuck"
    if release_status in _RELEASE_STATES:
        return _RELEASE_STATES[release_status]  # failed: helm could not create the job's objects
    if ttl is not None and updated is not None and (now - updated).total_seconds() > ttl:
        return "expired"  # finished, and its Job deleted ttlSecondsAfterFinished later
    return "deleted"  # the release is deployed but its Job was deleted by hand


def _find(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def _said(condition: Mapping[str, Any] | None) -> str:
    """A condition's reason and message, on one line."""
    if condition is None:
        return ""
    reason, message = str(condition.get("reason") or ""), " ".join(str(condition.get("message") or "").split())
    return f"{reason}: {message}" if message and message != reason else reason


def state(job: Mapping[str, Any] | None, workload: Mapping[str, Any] | None, queued_by_kueue: bool) -> str:
    if job is None:
        return "queued"  # the release exists, the Job not yet (helm is creating it)
    if _condition(job, "Complete"):
        return "succeeded"
    if _condition(job, "Failed"):
        return "failed"
    status = job.get("status") or {}
    if not (job.get("spec") or {}).get("suspend") and status.get("active", 0) > 0:
        ready = status.get("ready")
        return "running" if ready is None or ready >= status["active"] else "starting"
    if queued_by_kueue and workload is not None and (workload.get("spec") or {}).get("active") is False:
        return "deactivated"  # Kueue admits it no more: spec.active false
    if queued_by_kueue and not _condition(workload, "Admitted"):
        evicted = _find(workload, "Evicted")
        if evicted is not None:
            return "preempted" if evicted.get("reason") == "Preempted" else "evicted"
        return "queued"
    return "admitted"


# Container waiting reasons that do not clear by themselves (kubelet: pkg/kubelet/images/types.go ErrImagePull,
# ImagePullBackOff, InvalidImageName; pkg/kubelet/kuberuntime CreateContainerConfigError, CrashLoopBackOff).
STUCK_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "CrashLoopBackOff")
_TERMINAL_PHASES = ("Succeeded", "Failed")


def job_pods(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Job's own live pods: its controller-uid label (set by the Job controller), not its name."""
    uid = job["metadata"].get("uid")
    return [p for p in pods if uid and (p.get("metadata", {}).get("labels") or {}).get(
        "batch.kubernetes.io/controller-uid") == uid and (p.get("status") or {}).get("phase") not in _TERMINAL_PHASES]


def not_starting(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """`not starting: <reason>: <message>` for the first container stuck for a reason that will not clear."""
    for pod in pods:
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_REASONS:
                message = " ".join(str(waiting.get("message") or "").split())[:200]
                return f"not starting: {waiting['reason']}" + (f": {message}" if message else "")
    return None


def gpus_per_pod(job: Mapping[str, Any]) -> int:
    containers = job["spec"]["template"]["spec"].get("containers", [])
    return sum(int(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0)) for c in containers)


def _note(current: str, workload: Mapping[str, Any] | None, live: Sequence[Mapping[str, Any]] | None) -> str | None:
    if current == "starting" and live is not None:
        stuck = not_starting(live)
        if stuck:
            return stuck
        if live and not any((p.get("spec") or {}).get("nodeName") for p in live):
            return "waiting for a GPU node (no pod is on a node yet)"
        return None
    if current in ("evicted", "preempted"):
        return f"{current}: {_said(_find(workload, 'Evicted'))}; requeued, it waits to be admitted again"
    if current == "deactivated":
        why = _said(_find(workload, "Evicted")) or "spec.active is false"
        meta = (workload or {}).get("metadata") or {}
        name, namespace = shlex.quote(str(meta.get("name", "WORKLOAD"))), shlex.quote(str(meta.get("namespace", "NS")))
        # Reactivating keeps the Job, its pods' identity and its run directory's lock; Kueue clears the
        # requeue count on deactivation (workload_controller.go), so it starts afresh.
        return (f"deactivated: {why}; it will not run again by itself: once the cause is fixed, "
                f"kubectl -n {namespace} patch workload {name} --type=merge -p '{{\"spec\":{{\"active\":true}}}}'")
    return None


def _nodes(pods: int, per_pod: int, gpus_per_node: int) -> int:
    return math.ceil(pods * per_pod / gpus_per_node) if per_pod and gpus_per_node else pods


def row(name: str, job: Mapping[str, Any] | None, workload: Mapping[str, Any] | None, *, queued_by_kueue: bool,
        gpus_per_node: int, usd_per_node: float | None, now: datetime,
        pods: Sequence[Mapping[str, Any]] | None = None) -> JobRow:
    """`pods`: the namespace's training pods (None: not asked, every active pod is taken as on a node)."""
    current = state(job, workload, queued_by_kueue)
    if job is None:
        return JobRow(name, current, 0, None, 0.0, None)
    per_pod = gpus_per_pod(job)
    status = job.get("status") or {}
    live = job_pods(job, pods) if pods is not None else None
    active = current in ("running", "starting")
    pods = status.get("active", 0) if active else (job["spec"].get("parallelism") or 1)
    created = _time(job["metadata"].get("creationTimestamp"))
    # Billed from when the Job last started (status.startTime is reset on each resume) to its end.
    started = _time(status.get("startTime"))
    ended = _time(status.get("completionTime")) or next(
        (_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []
         if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
    parallelism = job["spec"].get("parallelism") or 1
    # Node-hours: the runs before each Kueue eviction (the Workload's accumulated admitted time; Kueue resets
    # the Job's startTime on each resume, job_controller.go Stop), then this run: only pods on a node are billed.
    past = ((workload or {}).get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0
    node_hours = (past if isinstance(past, int) else 0) / 3600 * _nodes(parallelism, per_pod, gpus_per_node)
    if started is not None and current in ("running", "starting", "succeeded", "failed"):
        hours = max(((ended or now) - started).total_seconds(), 0.0) / 3600
        # A ready pod is on a node too (the pod list and the Job are read a moment apart).
        on_nodes = parallelism if live is None or not active else max(
            sum(1 for p in live if (p.get("spec") or {}).get("nodeName")), status.get("ready") or 0)
        node_hours += hours * _nodes(on_nodes, per_pod, gpus_per_node)
    cost = None if usd_per_node is None else node_hours * usd_per_node
    labels = job["spec"]["template"].get("metadata", {}).get("labels") or {}
    return JobRow(name=name, state=current, gpus=pods * per_pod,
                  age_seconds=(now - created).total_seconds() if created else None,
                  cost_usd=cost, sweep=labels.get(SWEEP_LABEL),
                  waiting=quota_message(workload) if current in ("queued", "evicted", "preempted") else None,
                  note=_note(current, workload, live))


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
         now: datetime | None = None, ttl: int | None = None, pools: Sequence[PoolPricing] = (),
         pods: Sequence[Mapping[str, Any]] | None = None) -> list[JobRow]:
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
                    usd_per_node=pool.usd_per_node if pool else usd_per_node, now=now, pods=pods)
        if job is None:
            found = replace(found, state=missing_job_state(release, ttl, now))
            if found.state == "stuck":
                found = replace(found, note=f"stuck: helm install never finished (pending-install since "
                                            f"{release.get('updated')}); trainstack cancel {name}, then submit again")
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
    lines = [f"{'NAME':<52} {'STATE':<11} {'GPUS':>4} {'AGE':>5} {'COST':>9}"]

    def line(r: JobRow, indent: str = "") -> str:
        cost = "?" if r.cost_usd is None else f"${r.cost_usd:.2f}"
        text = f"{indent + r.name:<52} {r.state:<11} {r.gpus:>4} {_age(r.age_seconds):>5} {cost:>9}"
        said = [f"waiting: {r.waiting}"] if r.waiting is not None else []
        said += [r.note] if r.note is not None else []
        return text if not said else f"{text}  {'; '.join(said)}"

    sweeps: dict[str, list[JobRow]] = {}
    for r in job_rows:
        if r.sweep is None:
            lines.append(line(r))
        else:
            sweeps.setdefault(r.sweep, []).append(r)
    for sweep, members in sweeps.items():
        costs = [m.cost_usd for m in members]
        total = "?" if None in costs else f"${sum(c for c in costs if c is not None):.2f}"
        lines.append(f"{'sweep ' + sweep:<52} {len(members)} jobs{'':<8}{sum(m.gpus for m in members):>4} "
                     f"{'':>5} {total:>9}")
        lines.extend(line(m, "  ") for m in members)
    lines.append("COST: GPU node-hours of each job's pods on a node (runs before an eviction included) x the stack's "
                 "price per GPU node (trainstack/infra/cost/prices.yaml)")
    return "\n".join(lines)
