"""Lines of configuration handling, before and after issue 27's one typed model, by file group.

    python tools/config_lines.py [BEFORE [AFTER]]

BEFORE defaults to d7c6ba9 (the last commit before the typed model), AFTER to the working tree; either may be any
git revision. Groups: the parsers and typed settings; the modules that carry values across the component boundary
(round trips, spelling, error rewriting); the components. tokens.py (module tokens, not configuration) is left out.
"""

import argparse
import fnmatch
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {
    "parsers + settings": ("trainstack/infra/aws/config.py", "trainstack/infra/gcp/config.py",
                           "trainstack/infra/config/*.py", "trainstack/infra/aws/settings.py",
                           "trainstack/infra/gcp/settings.py", "trainstack/infra/gcp/gpu_pool_config.py",
                           "trainstack/infra/aws/gpu_node_config.py"),
    "round-trip / boundary": ("trainstack/components/args_from_inputs.py", "trainstack/components/job_args.py",
                              "trainstack/components/known_outputs.py", "trainstack/components/spelling.py",
                              "trainstack/components/part_config.py", "trainstack/components/gcp_part_config.py",
                              "trainstack/components/stack_config.py", "trainstack/components/renamed_inputs.py",
                              "trainstack/components/kubernetes_args.py", "trainstack/infra/config/known_outputs.py"),
    "components": ("trainstack/components/*.py",),
}
NOT_CONFIG = ("trainstack/components/tokens.py",)


def _files(revision: str | None) -> dict[str, int]:
    """Every .py file under trainstack/ at `revision` (None: the working tree) -> its line count."""
    if revision is None:
        return {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in ROOT.glob("trainstack/**/*.py")}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", revision, "trainstack/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {name: len(subprocess.run(["git", "show", f"{revision}:{name}"], cwd=ROOT, check=True,
                                     capture_output=True, text=True).stdout.splitlines())
            for name in names if name.endswith(".py")}


def grouped(files: dict[str, int]) -> dict[str, int]:
    """Lines per group; a file counts in the first group whose patterns match it."""
    totals = dict.fromkeys(GROUPS, 0)
    for name, lines in files.items():
        if name in NOT_CONFIG:
            continue
        group = next((g for g, patterns in GROUPS.items() if any(fnmatch.fnmatch(name, p) for p in patterns)), None)
        if group is not None:
            totals[group] += lines
    return totals


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Lines of configuration handling, by file group, at two revisions.")
    parser.add_argument("before", nargs="?", default="d7c6ba9", help="a git revision (default d7c6ba9)")
    parser.add_argument("after", nargs="?", default=None, help="a git revision (default: the working tree)")
    args = parser.parse_args(argv)
    try:
        before, after = grouped(_files(args.before)), grouped(_files(args.after))
    except subprocess.CalledProcessError as error:
        print(f"config_lines: {error.stderr.strip() or error}. Fix: name a revision of this repository "
              "(git log --oneline)", file=sys.stderr)
        return 2
    print(f"{'group':<24}{args.before:>12}{args.after or 'now':>12}{'change':>10}")
    for group in GROUPS:
        print(f"{group:<24}{before[group]:>12}{after[group]:>12}{after[group] - before[group]:>+10}")
    total_before, total_after = sum(before.values()), sum(after.values())
    print(f"{'total':<24}{total_before:>12}{total_after:>12}{total_after - total_before:>+10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
