"""The training-job releases on the stack's namespace, as `helm list` reports them, and `cancel`.

`cancel NAME` and `cancel --all` remove only releases the CLI installed (the release label
trainstack.dev/submitted-by=cli): the stack's own job is Pulumi's, a release installed by hand is its
owner's. `--all` goes on past a release that fails and names each at the end.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from trainstack.infra.kubernetes.job_submission import SUBMITTED_BY_CLI
from trainstack.infra.kubernetes.training_job import chart_default_values
from trainstack.jobs import submission
from trainstack.jobs.cluster import Cluster, CommandFailed
from trainstack.jobs.errors import UsageError
from trainstack.jobs.helm_version import check_helm
from trainstack.jobs.stack_outputs import StackOutputs
from trainstack.jobs.status import CHART_NAME

MAX_GRACE_S = 86_400  # a day: longer than any checkpoint write; bounds the wait for a cancel
UNINSTALL_MARGIN_S = 120  # past the grace period: the Job controller and the GC deleting the pods


def grace_seconds(values: Mapping[str, Any]) -> int:
    """The pods' terminationGracePeriodSeconds: the stack's job values, else the chart's default."""
    grace = ((values.get("job") or {}) if isinstance(values, Mapping) else {}).get("terminationGracePeriodSeconds")
    if not isinstance(grace, int) or isinstance(grace, bool):
        grace = chart_default_values()["job"]["terminationGracePeriodSeconds"]
    if not 0 <= grace <= MAX_GRACE_S:
        raise UsageError(f"the stack's job values give terminationGracePeriodSeconds {str(grace)[:24]}, not 0 to "
                         f"{MAX_GRACE_S} seconds", "set trainstack:job's grace period in range and pulumi up, "
                         "or pass --outputs FILE with the stack's real outputs")
    return int(grace)


def job_releases(cluster: Cluster, *, submitted_by_cli: bool = False) -> list[dict]:
    # --all: a failed or pending release still holds its name (helm list's default shows deployed and failed).
    # --max 0: helm list returns at most 256 releases by default, cut after sorting by name (helm v3.21.4
    # cmd/helm/list.go:126, pkg/action/list.go:206-214); 0 returns all of them.
    args = ["list", "--all", "--max", "0", "--output", "json"]
    if submitted_by_cli:
        args += ["--selector", "=".join(SUBMITTED_BY_CLI)]  # helm list -l (cmd/helm/list.go:129)
    listed = cluster.json("helm", args, expect=list)
    if not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in listed):
        raise CommandFailed("helm list answered with entries that are not releases (no name)")
    # `training-job-<version>` only: another chart named training-job-something is not ours.
    return [r for r in listed if re.fullmatch(rf"{CHART_NAME}-\d[\w.+-]*", str(r.get("chart", "")))]


def known(cluster: Cluster, name: str) -> None:
    names = sorted(r["name"] for r in job_releases(cluster))
    if name not in names:
        listed = ", ".join(names) if names else "none"
        raise UsageError(f"no job {name!r} on this stack (jobs: {listed})", "trainstack list shows them")


def cancel(args: argparse.Namespace, outputs: StackOutputs) -> int:
    if (args.name is None) == (not args.all):
        raise UsageError("cancel takes a NAME or --all", "trainstack cancel NAME, or trainstack cancel --all")
    if args.name is not None and args.name == outputs.stack_job:
        raise UsageError(f"{args.name} is the stack's own job (trainstack:job): pulumi up would bring it back",
                         "pulumi config set --path trainstack:job.enabled false && pulumi up")
    grace = grace_seconds(outputs.values)
    with Cluster(outputs) as cluster:
        check_helm(cluster, "cancel")
        # Only the releases the CLI installed (their label), for one name as for --all: the stack's own job is
        # Pulumi's (pulumi destroy or job.enabled=false removes it), and a release installed by hand is its owner's.
        ours = [r["name"] for r in job_releases(cluster, submitted_by_cli=True) if r["name"] != outputs.stack_job]
        if args.all:
            names = ours
            # Before pulumi destroy: return only once the pods are gone (they hold the shared claim), not
            # helm uninstall's default of no --wait and --cascade background (cmd/helm/uninstall.go:79-80).
            # Helm's --timeout (300 s by default) must outlast the pods' grace period, or a job that uses it for
            # its checkpoint fails the uninstall after the release is already gone.
            wait = grace + UNINSTALL_MARGIN_S
            how = ["--wait", "--cascade", "foreground", "--timeout", f"{wait}s"]
        else:
            known(cluster, args.name)
            if args.name not in ours:
                raise UsageError(f"{args.name} was not submitted by trainstack (its release has no "
                                 f"{'='.join(SUBMITTED_BY_CLI)} label): cancel removes only the CLI's jobs",
                                 f"if you mean it, helm uninstall {shlex.quote(args.name)} --namespace "
                                 f"{shlex.quote(outputs.namespace)}")
            names, wait, how = [args.name], 0, []
        failed = []
        for name in names:
            # Uninstall deletes the Job, its pods and Service; the bucket prefix is never touched. A failure
            # does not stop the others: each is named at the end.
            try:
                cluster.run("helm", ["uninstall", name, *how], timeout_s=max(wait + 60, cluster.timeout_s))
            except CommandFailed as error:
                print(f"trainstack cancel: {name}: {error}", file=sys.stderr)
                failed.append(name)
                continue
            print(f"cancelled {name}; its checkpoints stay in {submission.run_prefix(outputs, name)}/"
                  + ("" if args.all else f" (its pods stop within {grace}s; submit {name} again after that)"))
    if failed:
        print(f"trainstack cancel: not cancelled, or not confirmed gone: {', '.join(failed)}; run "
              f"trainstack cancel --all again, and see kubectl get pods", file=sys.stderr)
        return 1
    if not names:
        print("no jobs to cancel")
    return 0

