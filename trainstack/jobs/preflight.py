"""What `submit` asks the cluster before it installs anything: reads only, each one line when it refuses.

- Pods of an earlier job of the same name: `cancel` deletes the Job at once (helm uninstall's default
  background cascade, cmd/helm/uninstall.go:80 at v3.21.4) and Kueue frees its quota as soon as the
  Workload goes, while the old pods still write their SIGTERM checkpoint into runs/NAME for up to the
  grace period. A new job of that name would write the same run directory and bucket prefix.
- The namespace's LimitRanges: Kueue keeps a job that violates them inadmissible for ever
  (trainstack/jobs/limit_ranges.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainstack.jobs.cluster import Cluster
from trainstack.jobs.errors import UsageError
from trainstack.jobs.limit_ranges import violations

# The pod label the Job controller sets to the Job's name (kubernetes pkg/controller/job, batch.kubernetes.io/job-name).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
_TERMINAL = ("Succeeded", "Failed")


def job_pods(cluster: Cluster) -> list[dict[str, Any]]:
    """Every pod the training-job chart made in the stack's namespace, of any job."""
    return cluster.items(["get", "pods", "--selector", "app.kubernetes.io/name=training-job", "--output", "json"])


def check_no_earlier_pods(cluster: Cluster, names: Sequence[str], grace_s: int) -> None:
    """UsageError when a pod of an earlier job named like one of `names` is still there and not finished."""
    for pod in job_pods(cluster):
        labels = pod["metadata"].get("labels") or {}
        name = labels.get(JOB_NAME_LABEL)
        if name in names and (pod.get("status") or {}).get("phase") not in _TERMINAL:
            stopping = "stopping" if pod["metadata"].get("deletionTimestamp") else "still running"
            raise UsageError(f"a pod of an earlier job {name} is {stopping} ({pod['metadata'].get('name')}): it may "
                             f"still write its checkpoint into runs/{name}, which a new {name} would share",
                             f"wait until kubectl get pods -l {JOB_NAME_LABEL}={name} shows none (at most "
                             f"{grace_s}s after cancel), then submit again")


def check_limit_ranges(cluster: Cluster, job: Mapping[str, Any] | None, release: str, *, queued: bool) -> None:
    """UsageError when the namespace's LimitRanges would keep the rendered Job inadmissible."""
    if job is None:
        return  # not rendered here (no helm-python-sdk, no helm): Kueue's reason shows in `list`
    limit_ranges = cluster.items(["get", "limitranges", "--output", "json"])
    if not limit_ranges:
        return
    problems = violations(job["spec"]["template"]["spec"], limit_ranges)
    if problems:
        names = ", ".join(str(r["metadata"].get("name")) for r in limit_ranges)
        # Without a queue the API server's LimitRanger admission refuses the pods themselves, and the Job
        # retries creating them for ever (kubernetes plugin/pkg/admission/limitranger, the same min/max rules).
        outcome = ("Kueue would keep the job queued for ever" if queued else
                   "the API server would refuse its pods and the Job would wait for ever")
        raise UsageError(f"job {release}: {problems[0]} in namespace {cluster.namespace} (LimitRange {names}); "
                         f"{outcome}", "ask the namespace's admin to relax the LimitRange, or change the stack's pod "
                         "resources (trainstack:job resources) and pulumi up")
