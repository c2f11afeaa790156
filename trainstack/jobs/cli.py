"""`trainstack submit|list|logs|cancel|results`: many training jobs on one stack's cluster.

Every command reads the stack's outputs first and checks its input; bad input prints one line and
exits 2 before helm or kubectl is called. A cluster that refuses a call exits 1 with the tool's line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from infra.paths import TRAINING_JOB_CHART_DIR
from trainstack.jobs import status, submission, sweep
from trainstack.jobs.cluster import Cluster, CommandFailed
from trainstack.jobs.errors import USAGE_EXIT_CODE, UsageError
from trainstack.jobs.stack_outputs import StackOutputs, load


def _nodes(text: str) -> tuple[int, int]:
    low, sep, high = text.partition(":")
    try:
        return (int(low), int(high)) if sep else (int(low), int(low))
    except ValueError:
        raise UsageError(f"--nodes {text!r}: expected N or MIN:MAX", "give --nodes 2 or --nodes 1:4") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainstack", description="Training jobs on a trainstack cluster.")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        where = sub.add_mutually_exclusive_group()
        where.add_argument("--stack", help="the Pulumi stack (reads pulumi stack output --json --show-secrets)")
        where.add_argument("--outputs", metavar="FILE", help="the stack's outputs, saved by that command")
        return sub

    sub = command("submit", "submit a job (or a sweep) to the stack's queue; trainer flags after --")
    sub.add_argument("name", metavar="NAME")
    sub.add_argument("--nodes", metavar="MIN:MAX", help="pods (one per GPU node), e.g. 2 or 1:4")
    sub.add_argument("--sweep", action="append", default=[], metavar="FLAG=V1,V2",
                     help="one job per value (repeat for a grid)")
    sub.add_argument("--image", help="another image (<repository>@sha256:... or :tag) than the stack's")
    target = sub.add_mutually_exclusive_group()
    target.add_argument("--module", help="run this module with torchrun instead of the trainer")
    target.add_argument("--script", help="run this script with torchrun instead of the trainer")
    sub.epilog = "After --: the trainer's flags (or the module's or script's arguments)."
    command("list", "the stack's jobs: state, GPUs, age, cost so far")
    sub = command("logs", "the job's trainer logs (every pod, prefixed)")
    sub.add_argument("name", metavar="NAME")
    sub.add_argument("-f", "--follow", action="store_true")
    sub = command("cancel", "stop a job and remove it from the cluster (its bucket prefix stays)")
    sub.add_argument("name", metavar="NAME", nargs="?")
    sub.add_argument("--all", action="store_true",
                     help="every job the CLI submitted (before pulumi destroy: see docs/jobs.md)")
    sub = command("results", "where the job's checkpoints and export are, and how to fetch them")
    sub.add_argument("name", metavar="NAME")
    return parser


def _releases(cluster: Cluster) -> list[dict]:
    # --all: a failed or pending release still holds its name (helm list's default shows deployed and failed).
    return [r for r in cluster.json("helm", ["list", "--all", "--output", "json"]) or []
            if str(r.get("chart", "")).startswith(f"{status.CHART_NAME}-")]


def _known(cluster: Cluster, name: str) -> None:
    names = sorted(r["name"] for r in _releases(cluster))
    if name not in names:
        listed = ", ".join(names) if names else "none"
        raise UsageError(f"no job {name!r} on this stack (jobs: {listed})", "trainstack list shows them")


def submit(args: argparse.Namespace, outputs: StackOutputs) -> int:
    rest = list(args.rest)
    custom = args.module is not None or args.script is not None
    if custom and args.sweep:
        raise UsageError("--sweep varies trainer flags, and --module/--script runs something else",
                         "drop --sweep, or submit the trainer")
    nodes = _nodes(args.nodes) if args.nodes else None
    image = submission.check_image(args.image)
    points = sweep.expand(args.name, args.sweep, [] if custom else rest)
    planned = []
    for point in points:
        target = (submission.Target(module=args.module, script=args.script, args=tuple(rest)) if custom
                  else submission.Target(trainer_flags=(*rest, *point.flags)))
        job = submission.check(outputs, point.name, nodes, target)
        values = submission.chart_values(outputs, job, target, image=image,
                                         sweep=args.name if args.sweep else None)
        planned.append((point.name, values))
    with Cluster(outputs) as cluster:
        existing = {r["name"] for r in _releases(cluster)}
        taken = [name for name, _ in planned if name in existing or name == outputs.stack_job]
        if taken:
            raise UsageError(f"a job named {taken[0]} already exists (install never replaces a job)",
                             f"pick another NAME (e.g. {args.name}-2), or trainstack cancel {taken[0]} first")
        for done, (name, values) in enumerate(planned):
            try:
                # install, never upgrade: a name in use fails here too, whatever raced us.
                cluster.run("helm", ["install", name, str(TRAINING_JOB_CHART_DIR), "--values", "-"],
                            stdin=json.dumps(values))
            except CommandFailed as error:
                submitted = ", ".join(n for n, _ in planned[:done]) or "none"
                print(f"trainstack submit: {error} (submitted before it: {submitted})", file=sys.stderr)
                return 1
            where = f"queue {outputs.queue_name}" if outputs.queue_name else f"namespace {outputs.namespace}"
            print(f"submitted {name} to {where}; results in {submission.run_prefix(outputs, name)}/")
    return 0


def list_jobs(args: argparse.Namespace, outputs: StackOutputs) -> int:
    with Cluster(outputs) as cluster:
        releases = _releases(cluster)
        jobs = cluster.json("kubectl", ["get", "jobs", "--output", "json"])
        workloads = (cluster.json("kubectl", ["get", "workloads.kueue.x-k8s.io", "--output", "json"])
                     if outputs.queue_name else {})
    print(status.table(status.rows(releases, jobs, workloads, queued_by_kueue=outputs.queue_name is not None,
                                   gpus_per_node=outputs.gpus_per_node, usd_per_node=outputs.usd_per_node)))
    return 0


def logs(args: argparse.Namespace, outputs: StackOutputs) -> int:
    with Cluster(outputs) as cluster:
        _known(cluster, args.name)
        # Every pod of the Job (the label the Job controller sets), each line prefixed with its pod.
        command = ["logs", "--selector", f"batch.kubernetes.io/job-name={args.name}", "--container", "trainer",
                   "--prefix", "--max-log-requests", "64"]
        return cluster.stream("kubectl", [*command, *(["--follow"] if args.follow else [])])


def cancel(args: argparse.Namespace, outputs: StackOutputs) -> int:
    if (args.name is None) == (not args.all):
        raise UsageError("cancel takes a NAME or --all", "trainstack cancel NAME, or trainstack cancel --all")
    if args.name is not None and args.name == outputs.stack_job:
        raise UsageError(f"{args.name} is the stack's own job (trainstack:job): pulumi up would bring it back",
                         "pulumi config set --path trainstack:job.enabled false && pulumi up")
    with Cluster(outputs) as cluster:
        if args.all:
            # The stack's own job is Pulumi's: pulumi destroy (or job.enabled=false) removes it.
            names = [r["name"] for r in _releases(cluster) if r["name"] != outputs.stack_job]
        else:
            _known(cluster, args.name)
            names = [args.name]
        for name in names:
            # Uninstall deletes the Job, its pods and Service; the bucket prefix is never touched.
            cluster.run("helm", ["uninstall", name])
            print(f"cancelled {name}; its checkpoints stay in {submission.run_prefix(outputs, name)}/")
    if not names:
        print("no jobs to cancel")
    return 0


def results(args: argparse.Namespace, outputs: StackOutputs) -> int:
    # No cluster call: the bucket outlives the job (and the cluster).
    submission.check_name(outputs, args.name)
    prefix = submission.run_prefix(outputs, args.name)
    fetch = (f"aws s3 sync {prefix}/ ./{args.name}/" if prefix.startswith("s3://")
             else f"gcloud storage rsync --recursive {prefix}/ ./{args.name}/")
    print(f"checkpoints: {prefix}/checkpoints/step_XXXXXXXX/ (complete when manifest.json is there)")
    print(f"export:      {prefix}/export/")
    print(f"run record:  {prefix}/ (run_config.json, metrics.jsonl, loss.png)")
    print(f"fetch:       {fetch}")
    return 0


COMMANDS = {"submit": submit, "list": list_jobs, "logs": logs, "cancel": cancel, "results": results}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first -- is the job's (argparse would read a trainer's --lr as ours).
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = _parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.rest = rest
    try:
        outputs = load(args.stack, args.outputs)
        return COMMANDS[args.command](args, outputs)
    except UsageError as error:
        print(f"trainstack {args.command}: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except CommandFailed as error:
        print(f"trainstack {args.command}: {error}", file=sys.stderr)
        return 1
