"""python -m trainstack.infra.audit --stack aws|gcp [--state export.json]: list what the stack's state lost.

Exit codes: 0 nothing found, 1 orphans listed, 2 bad input (one line naming the problem and the fix).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from trainstack.infra.audit import report, state

REPO_ROOT = Path(__file__).resolve().parents[3]  # trainstack/infra/audit/__main__.py
CLOUDS = ("aws", "gcp")


class UsageError(Exception):
    pass


def stack_config(stack: str) -> dict:
    path = REPO_ROOT / f"Pulumi.{stack}.yaml"
    return (yaml.safe_load(path.read_text()) or {}).get("config", {}) if path.exists() else {}


def cloud_of(stack: str, config: dict) -> str:
    """trainstack:cloud, else the stack's name when it names a cloud (aws, gcp-a3), as __main__.py decides."""
    cloud = config.get("trainstack:cloud") or stack.split("-", 1)[0]
    if cloud not in CLOUDS:
        raise UsageError(f"--stack {stack}: no trainstack:cloud in Pulumi.{stack}.yaml and the name names no cloud "
                         f"({', '.join(CLOUDS)}); pass a stack of this project")
    return cloud


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainstack.infra.audit", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="the Pulumi stack, e.g. aws or gcp")
    parser.add_argument("--state", type=Path, help="output of `pulumi stack export` (default: run it)")
    parser.add_argument("--region", help="AWS region (default: aws:region of Pulumi.<stack>.yaml)")
    parser.add_argument("--profile", help="AWS profile (default: aws:profile of Pulumi.<stack>.yaml)")
    parser.add_argument("--project", help="GCP project (default: gcp:project of Pulumi.<stack>.yaml)")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> tuple[list[report.Orphan], list[str]]:
    config = stack_config(args.stack)
    cloud = cloud_of(args.stack, config)
    held = frozenset(state.identifiers(state.load(args.stack, args.state)))
    if cloud == "aws":
        from trainstack.infra.audit import aws  # boto3 only when auditing AWS

        region = args.region or config.get("aws:region")
        if not region:
            raise UsageError(f"no AWS region: pass --region or set aws:region in Pulumi.{args.stack}.yaml")
        # The cluster's name as trainstack/infra/aws/config.py chooses it: its control-plane log group outlives it.
        cluster_name = config.get("trainstack:clusterName") or f"trainstack-{args.stack}"
        return aws.audit(aws.Scope(args.stack, region, held, args.profile or config.get("aws:profile"),
                                   cluster_name=cluster_name)), []
    from trainstack.infra.audit import gcp

    project = args.project or config.get("gcp:project")
    if not project:
        raise UsageError(f"no GCP project: pass --project or set gcp:project in Pulumi.{args.stack}.yaml")
    scope = gcp.Scope(args.stack, project, held)
    return gcp.audit(scope), gcp.not_checked(scope)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        orphans, not_checked = run(args)
    except (UsageError, state.StateError, report.CloudError) as error:
        print(f"trainstack.infra.audit: {error}", file=sys.stderr)
        return 2
    print(report.render(args.stack, orphans, not_checked))
    return 1 if orphans else 0


if __name__ == "__main__":
    sys.exit(main())
