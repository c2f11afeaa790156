"""`trainstack submit|list|logs|cancel|results`: many training jobs on one stack's cluster.

Every command reads the stack's outputs first and checks its input; bad input prints one line and
exits 2 before helm or kubectl is called. A cluster that refuses a call exits 1 with the tool's line.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Sequence

from trainstack.infra.config import JobConfig
from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR
from trainstack.infra.kubernetes.job_owner import JOB_OWNER
from trainstack.infra.kubernetes.job_submission import SUBMITTED_BY_CLI
from trainstack.infra.kubernetes.training_job import deep_merge
from trainstack.jobs import preflight, render, status, submission, sweep
from trainstack.jobs.cluster import Cluster, CommandFailed
from trainstack.jobs.errors import USAGE_EXIT_CODE, UsageError, one_line
from trainstack.jobs.helm_version import check_helm
from trainstack.jobs.registry import check_image_exists
from trainstack.jobs.releases import cancel, grace_seconds, job_releases, known
from trainstack.jobs.stack_outputs import StackOutputs, load, on_pool


def _pods(text: str, flag: str = "--pods") -> tuple[int, int]:
    low, sep, high = text.partition(":")
    try:
        return (int(low), int(high)) if sep else (int(low), int(low))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected N or MIN:MAX", "give --pods 2 or --pods 1:4") from None


def _pods_flag(args: argparse.Namespace) -> tuple[tuple[int, int] | None, str]:
    """--pods, or the older --nodes (the same pods of the job; it meant torchrun's nodes) with one warning;
    and the flag the user typed, for the errors about it."""
    if args.nodes is None:
        return (_pods(args.pods) if args.pods is not None else None), "--pods"
    if args.pods is not None:
        raise UsageError("both --pods and --nodes given (--pods replaces --nodes)", "drop --nodes")
    print("trainstack submit: warning: --nodes is deprecated: use --pods (the same pods of the job)", file=sys.stderr)
    return _pods(args.nodes, "--nodes"), "--nodes"


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """A bad or missing argument is one line in the CLI's words, not argparse's usage block (subcommands
    inherit the class)."""

    def error(self, message: str):
        raise _ArgumentError(f"{self.prog}: {message}. Fix: see `{self.prog} --help`")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="trainstack", description="Training jobs on a trainstack cluster.")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        where = sub.add_mutually_exclusive_group()
        where.add_argument("--stack", help="the Pulumi stack (reads pulumi stack output --json --show-secrets)")
        where.add_argument("--outputs", metavar="FILE", help="the stack's outputs, saved by that command")
        return sub

    sub = command("submit", "submit a job (or a sweep) to the stack's queue; trainer flags after --")
    sub.add_argument("name", metavar="NAME")
    # torchrun calls each pod a node (--nnodes); a node here is a Kubernetes node, one machine.
    sub.add_argument("--pods", metavar="MIN:MAX", help="pods of the job (torchrun's --nnodes), e.g. 2 or 1:4")
    sub.add_argument("--nodes", metavar="MIN:MAX", help="deprecated: the old name of --pods")
    sub.add_argument("--sweep", action="append", default=[], metavar="FLAG=V1,V2",
                     help="one job per value (repeat for a grid)")
    sub.add_argument("--pool", metavar="NAME", help="the GPU pool to run on (default: the stack job's; "
                     "jobSubmission.pools lists them)")
    sub.add_argument("--image", help="another image (<repository>@sha256:... or :tag) than the stack's")
    sub.add_argument("--tensorboard", action="store_true",
                     help="also run TensorBoard for this job (a Deployment that stays until cancel)")
    target = sub.add_mutually_exclusive_group()
    target.add_argument("--module", help="run this module with torchrun instead of the trainer")
    target.add_argument("--script", help="run this script with torchrun instead of the trainer")
    sub.epilog = "After --: the trainer's flags (or the module's or script's arguments)."
    command("list", "the stack's jobs: state, GPUs, age, cost so far")
    sub = command("logs", "the trainer logs of the job's current pods, each line prefixed with its pod")
    sub.add_argument("name", metavar="NAME")
    sub.add_argument("-f", "--follow", action="store_true")
    sub = command("cancel", "stop a job and remove it from the cluster (its bucket prefix stays)")
    sub.add_argument("name", metavar="NAME", nargs="?")
    sub.add_argument("--all", action="store_true",
                     help="every job the CLI submitted (pulumi destroy removes them itself: see docs/jobs.md)")
    sub = command("results", "where the job's checkpoints and export are, and how to fetch them")
    sub.add_argument("name", metavar="NAME")
    return parser




# The trainer itself, run as a --module: it would skip the flag checks and the per-job snapshot prefix.
TRAINER_MODULES = ("training", "training.__main__", "trainstack.contract.cli")
# The launchers: a second torchrun inside the chart's, with rendezvous flags of the user's.
LAUNCHER_MODULES = ("training.launch", "torch.distributed.run", "torch.distributed.launch")


def _check_custom_target(module: str | None, script: str | None) -> None:
    if module is not None and not module.strip() or script is not None and not script.strip():
        option = "--module" if module is not None else "--script"
        raise UsageError(f"{option} is empty (the chart would run its default trainer, unchecked)",
                         f"give {option} a name, or drop it to submit the trainer")
    if script is not None and script.lstrip().startswith("-"):
        # torchrun reads it as one of its own options (--rdzv-endpoint, --nnodes, ...), not a script.
        raise UsageError(f"--script {script.strip()[:60]!r} starts with '-', which torchrun would read as its own "
                         "option", "give the script's path (./name.py for one starting with '-')")
    if module in TRAINER_MODULES or module in LAUNCHER_MODULES:
        what = "the trainer" if module in TRAINER_MODULES else "a launcher (torchrun inside the chart's torchrun)"
        raise UsageError(f"--module {module} is {what}: run that way its flags go unchecked and it gets "
                         "no --snapshot-uri", "drop --module and pass the trainer's flags after --")


def _without_gang(outputs: StackOutputs, job: JobConfig) -> bool:
    """Without Kueue, pods of several multi-pod jobs start wherever a node frees up: each job may get
    part of its pods and hold their nodes for job.joinTimeoutSeconds waiting for the rest."""
    return outputs.queue_name is None and job.pods_min > 1


def _check_gang(outputs: StackOutputs, job: JobConfig, jobs: int) -> None:
    if _without_gang(outputs, job) and jobs > 1:
        raise UsageError(f"a sweep of {jobs} jobs of at least {job.pods_min} pods each on a stack without a "
                         "queue: they would split the GPU nodes between them and wait", "give --pods 1 (or 1:N), "
                         "or turn the queue on (pulumi config set --path trainstack:job.queue true && pulumi up)")


# The OwnerReferencesPermissionEnforcement admission plugin's refusal of a blocking ownerReference whose
# owner's finalizers the caller cannot update (kubernetes/kubernetes plugin/pkg/admission/gc/gc_admission.go).
# Whether a cluster runs that plugin is not visible to a client, so submit cannot ask before installing.
OWNER_FORBIDDEN = "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"


def _check_owner(cluster: Cluster, outputs: StackOutputs) -> None:
    """The job owner the outputs name must be the cluster's: the garbage collector deletes at once a Job
    whose owners are all gone (kubernetes.io/docs/concepts/architecture/garbage-collection/), so a job
    sent with outputs from before the stack was destroyed and brought up again would vanish. The
    cluster is always asked (one read): outputs saved before the owner existed would send a job with no
    owner to a stack that has one, and pulumi destroy would stall on it (docs/jobs.md, pulumi destroy)."""
    owner = outputs.values.get("owner")
    name = owner["name"] if owner else JOB_OWNER
    found = cluster.json("kubectl", ["get", "configmap", name, "--ignore-not-found", "--output", "json"])
    uid = ((found or {}).get("metadata") or {}).get("uid")
    if not owner:
        if uid:
            raise UsageError(f"the outputs are from before the job owner existed, and the cluster has it ({name}, "
                             f"uid {uid}): the job would have no owner and pulumi destroy would stall on it",
                             "save the outputs again with pulumi stack output --json --show-secrets")
        return  # neither has it: a stack from before the owner, whose jobs have none
    if uid != owner["uid"]:
        where = f"uid {uid}" if uid else "none"
        raise UsageError(f"the outputs name the job owner {owner['name']} with uid {owner['uid']}, the cluster has "
                         f"{where}: they are from an earlier pulumi up, and Kubernetes would delete the job at once",
                         "save the outputs again with pulumi stack output --json --show-secrets")


def submit(args: argparse.Namespace, outputs: StackOutputs) -> int:
    if args.pool is not None:
        # That pool's placement, pod resources, queue and size, for every check below and the values sent.
        outputs = on_pool(outputs, args.pool)
    rest = list(args.rest)
    custom = args.module is not None or args.script is not None
    if custom and args.sweep:
        raise UsageError("--sweep varies trainer flags, and --module/--script runs something else",
                         "drop --sweep, or submit the trainer")
    if custom:
        _check_custom_target(args.module, args.script)
    pods, pods_flag = _pods_flag(args)
    image = submission.check_image(args.image)
    points = sweep.expand(args.name, args.sweep, [] if custom else rest)
    planned = []
    for point in points:
        target = (submission.Target(module=args.module, script=args.script, args=tuple(rest)) if custom
                  else submission.Target(trainer_flags=(*rest, *point.flags)))
        job = submission.check(outputs, point.name, pods, target, pods_flag=pods_flag)
        values = submission.chart_values(outputs, job, target, image=image,
                                         sweep=args.name if args.sweep else None, tensorboard=args.tensorboard)
        # The chart's own schema and checks, offline: what it refuses is bad input, not a cluster error.
        rendered = render.check_renders(values, release=point.name, namespace=outputs.namespace)
        partial = submission.check_queue(outputs, job, values, pods_flag=pods_flag)
        if partial:
            print(f"trainstack submit: warning: {point.name}: {partial}", file=sys.stderr)
        planned.append((point.name, values, rendered))
    _check_gang(outputs, job, len(points))
    check_image_exists(image, outputs.values.get("image"))
    with Cluster(outputs) as cluster:
        check_helm(cluster, "submit")
        existing = {r["name"] for r in job_releases(cluster)}
        taken = [name for name, _, _ in planned if name in existing or name == outputs.stack_job]
        if taken:
            raise UsageError(f"a job named {taken[0]} already exists (install never replaces a job)",
                             f"pick another NAME (e.g. {args.name}-2), or trainstack cancel {taken[0]} first")
        preflight.check_no_earlier_pods(cluster, [name for name, _, _ in planned], grace_seconds(outputs.values))
        preflight.check_limit_ranges(cluster, planned[0][2], planned[0][0], queued=outputs.queue_name is not None)
        _check_owner(cluster, outputs)
        if _without_gang(outputs, job):
            print(f"trainstack submit: warning: no queue on this stack, so the {job.pods_min} pods are not reserved "
                  "together: another multi-pod job may take their nodes (trainstack:job.queue true admits all or "
                  "nothing)", file=sys.stderr)
        for done, (name, values, _) in enumerate(planned):
            try:
                # install, never upgrade: a name in use fails here too, whatever raced us. The submission id
                # labels this job's pods and selects them in its Service: an earlier job's pods never match.
                values = deep_merge(values, {"job": {"submissionId": uuid.uuid4().hex}})
                cluster.run("helm", ["install", name, str(TRAINING_JOB_CHART_DIR), "--values", "-",
                                     "--labels", "=".join(SUBMITTED_BY_CLI)], stdin=json.dumps(values))
            except CommandFailed as error:
                submitted = ", ".join(n for n, _, _ in planned[:done]) or "none"
                print(f"trainstack submit: {error} (submitted before it: {submitted})", file=sys.stderr)
                if OWNER_FORBIDDEN in str(error):
                    print(f"trainstack submit: fix: your identity needs update on configmaps/finalizers "
                          f"({JOB_OWNER}) in namespace {outputs.namespace} to name the job owner; see "
                          "docs/jobs.md, pulumi destroy", file=sys.stderr)
                return 1
            where = f"queue {outputs.queue_name}" if outputs.queue_name else f"namespace {outputs.namespace}"
            if custom:
                # --snapshot-uri is the trainer's flag: a module or script writes where its own arguments say.
                print(f"submitted {name} to {where}; it writes where its arguments say (no --snapshot-uri: "
                      "trainstack places only the trainer's results)")
            else:
                print(f"submitted {name} to {where}; results in {submission.run_prefix(outputs, name)}/")
    return 0


def _pricing(outputs: StackOutputs) -> list[status.PoolPricing]:
    """Each GPU pool's nodes for `list`'s cost: the stack prices only the job's pool (estimatedHourlyUsd), so a
    job on another pool shows its cost as unknown rather than at the wrong machine's price."""
    return [status.PoolPricing(node_selector=pool["values"].get("nodeSelector") or {},
                               gpus_per_node=pool["gpusPerNode"],
                               usd_per_node=outputs.usd_per_node if pool["values"] == outputs.values else None)
            for pool in outputs.pools.values()]


def list_jobs(args: argparse.Namespace, outputs: StackOutputs) -> int:
    with Cluster(outputs) as cluster:
        releases = job_releases(cluster)
        jobs = {"items": cluster.items(["get", "jobs", "--output", "json"])}
        workloads = ({"items": cluster.items(["get", "workloads.kueue.x-k8s.io", "--output", "json"])}
                     if outputs.queue_name else {})
        # The jobs' pods: which ones are on a node (priced), ready, or stuck (an image that cannot be pulled).
        pods = preflight.job_pods(cluster)
    try:
        rows = status.rows(releases, jobs, workloads, queued_by_kueue=outputs.queue_name is not None, pods=pods,
                           gpus_per_node=outputs.gpus_per_node, usd_per_node=outputs.usd_per_node,
                           ttl=status.ttl_seconds(outputs.values), pools=_pricing(outputs))
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as error:
        # The API server never sends a Job without spec.template (or an infinite count); a proxy or a wrong
        # kubectl might.
        raise CommandFailed(f"kubectl get answered with objects that are not what a Kubernetes API server sends "
                            f"({type(error).__name__}: {error})") from None
    print(status.table(rows))
    return 0


def logs(args: argparse.Namespace, outputs: StackOutputs) -> int:
    with Cluster(outputs) as cluster:
        known(cluster, args.name)
        # The Job's pods that exist now (the label the Job controller sets), each line prefixed with its pod.
        # --tail=-1: with a selector kubectl prints only the last 10 lines of each pod unless --tail is given
        # (kubernetes/kubectl v0.34.0 pkg/cmd/logs/logs.go:112,240-241).
        command = ["logs", "--selector", f"batch.kubernetes.io/job-name={args.name}", "--container", "trainer",
                   "--prefix", "--max-log-requests", "64", "--tail=-1"]
        # -f: one pod's stream failing (a pod deleted, a node gone) would end every stream unless
        # --ignore-errors (logs.go:396-404, parallelConsumeRequest).
        follow = ["--follow", "--ignore-errors"] if args.follow else []
        return cluster.stream("kubectl", [*command, *follow], follow=args.follow)


def results(args: argparse.Namespace, outputs: StackOutputs) -> int:
    # No cluster call: the bucket outlives the job (and the cluster).
    submission.check_name(outputs, args.name)
    prefix = submission.run_prefix(outputs, args.name)
    # Quoted: it is a command to paste into a shell.
    source, target = shlex.quote(f"{prefix}/"), shlex.quote(f"./{args.name}/")
    fetch = (f"aws s3 sync {source} {target}" if prefix.startswith("s3://")
             else f"gcloud storage rsync --recursive {source} {target}")
    print(f"checkpoints: {prefix}/checkpoints/step_XXXXXXXX/ (complete when manifest.json is there)")
    print(f"export:      {prefix}/export/")
    print(f"run record:  {prefix}/ (run_config.json, metrics.jsonl, loss.png)")
    print(f"fetch:       {fetch}")
    return 0


INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C

COMMANDS = {"submit": submit, "list": list_jobs, "logs": logs, "cancel": cancel, "results": results}


# What writing the output can fail with: a full disk, an I/O error, a file too large, a stdout that is no
# writable file (`1</etc/hostname`).
OUTPUT_ERRORS = (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EBADF)


def _stdout_to_devnull() -> None:
    """Nothing more goes to stdout (and Python's flush at exit finds nothing to complain about)."""
    if sys.stdout is not None:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            sys.stdout = None


def _exit_cleanly_on(*signals: signal.Signals) -> None:
    """SIGTERM/SIGHUP exit through the `with Cluster(...)` blocks, so the stack's kubeconfig (cluster
    credentials) written for the tools is removed, as it is on Ctrl-C."""
    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for number in signals:
        if signal.getsignal(number) is not signal.SIG_IGN:  # `nohup trainstack ...` keeps ignoring SIGHUP
            signal.signal(number, leave)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first -- is the job's (argparse would read a trainer's --lr as ours).
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    try:
        args = _parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    except _ArgumentError as error:
        print(error, file=sys.stderr)
        return USAGE_EXIT_CODE
    args.rest = rest
    _exit_cleanly_on(signal.SIGTERM, signal.SIGHUP)
    try:
        outputs = load(args.stack, args.outputs)
        code = COMMANDS[args.command](args, outputs)
        if sys.stdout is not None:  # None: started with stdout closed (`>&-`); print wrote nowhere
            sys.stdout.flush()  # a full disk or a closed reader shows here, not in a traceback at exit
        return code
    except BrokenPipeError:
        # `trainstack list | head`: the reader left. Nothing more to say, and nowhere to say it.
        _stdout_to_devnull()
        return 1
    except (OSError, UnicodeEncodeError) as error:
        if isinstance(error, OSError) and error.errno not in OUTPUT_ERRORS:
            raise
        _stdout_to_devnull()
        reason = error.strerror if isinstance(error, OSError) else f"it holds text {error.encoding} cannot encode"
        print(f"trainstack {args.command}: cannot write the output ({reason})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C (logs -f, mostly): the shell's code for an interrupt, not a traceback.
        print(file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except UsageError as error:
        print(f"trainstack {args.command}: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except CommandFailed as error:
        print(f"trainstack {args.command}: {one_line(str(error))}", file=sys.stderr)
        return 1
