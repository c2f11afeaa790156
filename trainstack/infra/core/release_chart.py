"""The training-job chart as a Helm release records it: one path, the same on every machine, and a digest
that changes exactly when what the chart renders changes.

pulumi-kubernetes' helm.v3.Release keeps its `chart` input in the state as given and diffs inputs only
(provider/pkg/provider/helm_release.go: Diff compares old and new inputs; the `checksum` of the rendered
manifest that older versions added in Check is gone since v4.6.0). So a chart whose templates change
under the same path and the same Chart.yaml version shows no diff, and the cluster keeps the old chart.
`chart_digest` is therefore recorded in the release (training_job.py puts it in the description, which
replaces the release when it changes: the Job's pod template is immutable).

Its provider plugin runs in the program's working directory, the Pulumi project, as the program does, so a
relative path resolves the same for both.

- A project inside this checkout (the repository's own program, its examples): the chart's path relative to
  the project, `workloads/charts/training-job` at the root. It only changes if the repository does.
- Any other project (trainstack installed from a wheel into some virtualenv, or the `pulumi package add`
  plugin folder): the chart's path there holds the virtualenv's location, the Python version and the
  plugin's version, so each machine and each upgrade would show a diff. The chart is copied into the
  project, `.trainstack/charts/training-job-<digest>`, and that path is recorded instead. Named by its
  content, a copy is written once and never changed, so runs in parallel (a CI previewing several stacks
  from one checkout) never see half a chart; `.trainstack/.gitignore` keeps the copies out of git.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pulumi

from trainstack.infra.core import paths

COPIES = Path(".trainstack") / "charts"
DIGEST_LENGTH = 12
# Files of the chart folder that Helm does not render (docs): a change there rolls no job.
NOT_RENDERED = frozenset({"README.md"})


def release_chart_path(project: Path | None = None, chart: Path | None = None) -> str:
    """The `chart` for the training-job Release, relative to `project` (default: the working directory)."""
    project = (project or Path.cwd()).resolve()
    chart = (chart or paths.TRAINING_JOB_CHART_DIR).resolve()
    if chart.is_relative_to(paths.REPO_ROOT) and project.is_relative_to(paths.REPO_ROOT) \
            and not _under_site_packages(chart):
        return Path(os.path.relpath(chart, project)).as_posix()
    return copy_into_project(chart, project).relative_to(project).as_posix()


def chart_digest(chart: Path | None = None) -> str:
    """sha256 (first DIGEST_LENGTH hex digits) of the files Helm renders from the chart, names included."""
    root = (chart or paths.TRAINING_JOB_CHART_DIR).resolve()
    digest = hashlib.sha256()
    for name, content in sorted(_files(root).items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:DIGEST_LENGTH]


def copy_into_project(chart: Path, project: Path) -> Path:
    """`project/.trainstack/charts/training-job-<digest>` holding exactly `chart`'s files."""
    target = project / COPIES / f"{chart.name}-{chart_digest(chart)}"
    if target.is_dir():
        return target  # named by its content: an existing copy is this chart
    root = project / COPIES.parts[0]
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        (root / ".gitignore").write_text("# trainstack's copies of its chart (trainstack/infra/core/release_chart.py)\n*\n")
        # Built beside the target and renamed into place: a run stopped midway never leaves half a chart.
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as error:
        raise pulumi.RunError(
            f"trainstack keeps a copy of its training-job chart in {root} so that every machine records the same "
            f"path, and cannot write there ({error.strerror or error}). Fix: run the program from a project "
            "folder you can write to") from None
    try:
        shutil.copytree(chart, staging / "chart", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        try:
            (staging / "chart").rename(target)
        except OSError:
            if not target.is_dir():  # another run put the same content in place first: use that
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in NOT_RENDERED and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def _under_site_packages(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)
