"""Every stack's golden resource graph, from the command line, with nothing but the Pulumi program's
own dependencies (requirements.txt): no pytest, no torch.

    python -m tests.golden_graphs check aws gcp         # exit 1 and print the diff if a graph changed
    python -m tests.golden_graphs comment aws --base origin/main > comment.md

`check` is how tests/infra/test_pulumi_requirements.py runs the real __main__.py in a fresh virtualenv
built from requirements.txt alone. `comment` is the pull-request preview for forks, which get no
cloud credentials (.github/workflows/pulumi-preview.yml): the graph this branch's program registers
under mocks, diffed against the golden file of the base branch.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.golden import render
from tests.stack_runs import REPO


def _aws() -> tuple[Path, str]:
    from tests.aws.stack_runs import JOB_ENABLED, config_with, run_main
    from tests.aws.test_golden import GOLDEN

    return GOLDEN, render(run_main(config_with(JOB_ENABLED)))


def _aws_p5() -> tuple[Path, str]:
    from tests.aws.p5_runs import GOLDEN, JOB_ENABLED, p5_config, run_p5

    return GOLDEN, render(run_p5(p5_config(JOB_ENABLED)))


def _gcp() -> tuple[Path, str]:
    from tests.gcp.stack_runs import JOB_ENABLED, config_with, run_main
    from tests.gcp.test_golden import GOLDEN

    return GOLDEN, render(run_main(config_with(JOB_ENABLED)))


def _gcp_a3() -> tuple[Path, str]:
    from tests.gcp.test_a3 import GOLDEN, a3_config, run

    return GOLDEN, render(run(a3_config()))


def _gcp_a4() -> tuple[Path, str]:
    from tests.gcp.test_a4 import GOLDEN, a4_config, run

    return GOLDEN, render(run(a4_config()))


# stack -> (its golden file, the graph this checkout's program registers), each as the stack's
# test_golden.py builds it.
STACKS: dict[str, Callable[[], tuple[Path, str]]] = {"aws": _aws, "aws-p5": _aws_p5, "gcp": _gcp, "gcp-a3": _gcp_a3,
                                                     "gcp-a4": _gcp_a4}
# A PR comment holds at most 65536 characters; leave room for the text around the diff.
COMMENT_DIFF_LIMIT = 60000


def unified(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), before_name, after_name,
                                        n=2))


def base_version(golden: Path, base: str) -> str:
    """The golden file as it is on `base` (a git ref); empty when the base branch has none yet."""
    relative = golden.relative_to(REPO).as_posix()
    shown = subprocess.run(["git", "show", f"{base}:{relative}"], cwd=REPO, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else ""


def comment(stack: str, base: str) -> str:
    golden, graph = STACKS[stack]()
    relative = golden.relative_to(REPO).as_posix()
    diff = unified(base_version(golden, base), graph, f"{base}:{relative}", "this pull request")
    lines = [f"### `{stack}`: resource graph under mocks (no cloud credentials: a fork's pull request)", ""]
    if golden.read_text() != graph:
        lines += [f"**`{relative}` is out of date**: regenerate it with "
                  f"`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/{stack}/test_golden.py` and commit it.", ""]
    if not diff:
        lines.append("No change to the resource graph.")
    else:
        shown = diff if len(diff) <= COMMENT_DIFF_LIMIT else diff[:COMMENT_DIFF_LIMIT] + "\n... (cut; see the job log)\n"
        lines += ["```diff", shown.rstrip("\n"), "```"]
    lines += ["", "A maintainer's branch gets the real `pulumi preview` instead."]
    return "\n".join(lines) + "\n"


def check(stacks: list[str]) -> int:
    failed = 0
    for stack in stacks:
        golden, graph = STACKS[stack]()
        diff = unified(golden.read_text(), graph, str(golden.relative_to(REPO)), "this run")
        print(f"{stack}: {'matches' if not diff else 'DIFFERS from'} {golden.relative_to(REPO)}")
        if diff:
            print(diff[:20000])
            failed += 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden_graphs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check", help="compare each stack's graph with its golden file")
    check_parser.add_argument("stacks", nargs="+", choices=sorted(STACKS))
    comment_parser = commands.add_parser("comment", help="a PR comment: the graph's diff against a base ref")
    comment_parser.add_argument("stack", choices=sorted(STACKS))
    comment_parser.add_argument("--base", required=True, help="git ref of the base branch, e.g. origin/main")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check(args.stacks)
    sys.stdout.write(comment(args.stack, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
