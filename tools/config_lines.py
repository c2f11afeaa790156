"""Lines of configuration handling, before and after issue 27's one typed model, by file group.

    python tools/config_lines.py [BEFORE [AFTER]]

BEFORE defaults to d7c6ba9 (the last commit before the typed model), AFTER to the working tree; either may be any
git revision. Groups: the parsers and typed settings; the modules that carry values across the component boundary
(round trips, spelling, error rewriting); the components. tokens.py (module tokens, not configuration) is left out.
"""

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


def main(argv: list[str]) -> None:
    before_rev = argv[0] if argv else "d7c6ba9"
    after_rev = argv[1] if len(argv) > 1 else None
    before, after = grouped(_files(before_rev)), grouped(_files(after_rev))
    print(f"{'group':<24}{before_rev:>12}{after_rev or 'now':>12}{'change':>10}")
    for group in GROUPS:
        print(f"{group:<24}{before[group]:>12}{after[group]:>12}{after[group] - before[group]:>+10}")
    total_before, total_after = sum(before.values()), sum(after.values())
    print(f"{'total':<24}{total_before:>12}{total_after:>12}{total_after - total_before:>+10}")


if __name__ == "__main__":
    main(sys.argv[1:])
