"""The training-job chart as a Helm release records it: one path, the same on every machine.

pulumi-kubernetes' helm.v3.Release keeps its `chart` input in the state as given and diffs it like any input
(provider/pkg/provider/helm_release.go, Diff: `oldInputs.Diff(news)`); the chart's content is covered apart
from the path, by the `checksum` of the rendered manifest that Check adds to the inputs (setComputedInputs).
Its provider plugin runs in the program's working directory, the Pulumi project, as the program does, so a
relative path resolves the same for both.

- A project inside this checkout (the repository's own program, its examples): the chart's path relative to
  the project, `workloads/charts/training-job` at the root. It only changes if the repository does.
- Any other project (trainstack installed from a wheel into some virtualenv, or the `pulumi package add`
  plugin folder): the chart's path there holds the virtualenv's location, the Python version and the
  plugin's version, so each machine and each upgrade would show a diff and a Helm upgrade. The chart is
  copied into the project, `.trainstack/charts/training-job`, and that path is recorded instead. The copy is
  rewritten only when its files differ; `.trainstack/.gitignore` keeps it out of the project's git.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from trainstack.infra.core import paths

PROJECT_COPY = Path(".trainstack") / "charts" / "training-job"


def release_chart_path(project: Path | None = None, chart: Path | None = None) -> str:
    """The `chart` for the training-job Release, relative to `project` (default: the working directory)."""
    project = (project or Path.cwd()).resolve()
    chart = (chart or paths.TRAINING_JOB_CHART_DIR).resolve()
    if chart.is_relative_to(paths.REPO_ROOT) and project.is_relative_to(paths.REPO_ROOT) \
            and not _under_site_packages(chart):
        return Path(os.path.relpath(chart, project)).as_posix()
    copy_into_project(chart, project)
    return PROJECT_COPY.as_posix()


def copy_into_project(chart: Path, project: Path) -> Path:
    """`project/.trainstack/charts/training-job` holding exactly `chart`'s files."""
    target = project / PROJECT_COPY
    if _files(target) == _files(chart):
        return target
    root = project / PROJECT_COPY.parts[0]
    root.mkdir(exist_ok=True)
    (root / ".gitignore").write_text("# trainstack's copy of its chart (trainstack/infra/core/release_chart.py)\n*\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and moved into place, so a run stopped midway never leaves half a chart.
    staging = Path(tempfile.mkdtemp(prefix=".training-job-", dir=target.parent))
    shutil.copytree(chart, staging / "chart")
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=".training-job-old-", dir=target.parent))
        target.rename(old / "chart")
        shutil.rmtree(old)
    (staging / "chart").rename(target)
    staging.rmdir()
    return target


def _files(root: Path) -> dict[str, bytes] | None:
    if not root.is_dir():
        return None
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _under_site_packages(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)
