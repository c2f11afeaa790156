"""The chart path a Helm release records (trainstack/infra/core/release_chart.py): the same on every machine.

pulumi-kubernetes keeps helm.v3.Release's `chart` input in the state and diffs it like any input; a path that
holds a virtualenv's location or a Python version made every other machine, and every upgrade, show a diff.
"""

from pathlib import Path

import pytest

from trainstack.infra.core import paths, release_chart
from trainstack.infra.core.release_chart import PROJECT_COPY, release_chart_path

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.source_tree
def test_this_repositorys_program_records_the_checkouts_chart_as_before():
    assert release_chart_path(project=REPO) == "workloads/charts/training-job"
    assert not (REPO / PROJECT_COPY).exists()


@pytest.mark.source_tree
def test_a_project_inside_the_checkout_records_the_path_from_there():
    # examples/python-existing-vpc installs the checkout with -e ../..: the path is part of the repository.
    assert release_chart_path(project=REPO / "examples" / "python-existing-vpc") == "../../workloads/charts/training-job"


@pytest.fixture
def installed_chart(tmp_path) -> Path:
    """A chart as a wheel installs it: files under some virtualenv's site-packages."""
    chart = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "trainstack" / "charts" / "training-job"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: training-job\nversion: 0.1.0\n")
    (chart / "templates" / "job.yaml").write_text("kind: Job\n")
    (chart / ".helmignore").write_text("*.tmp\n")
    return chart


def test_an_installed_chart_is_copied_into_the_project_and_recorded_there(tmp_path, installed_chart):
    project = tmp_path / "project"
    project.mkdir()
    assert release_chart_path(project=project, chart=installed_chart) == ".trainstack/charts/training-job"
    copy = project / PROJECT_COPY
    assert (copy / "templates" / "job.yaml").read_text() == "kind: Job\n" and (copy / ".helmignore").is_file()
    assert (project / ".trainstack" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_two_installs_record_the_same_path(tmp_path, installed_chart):
    other = tmp_path / "elsewhere" / "lib" / "python3.12" / "site-packages" / "trainstack" / "charts" / "training-job"
    other.parent.mkdir(parents=True)
    other.symlink_to(installed_chart, target_is_directory=True)
    project = tmp_path / "project"
    project.mkdir()
    assert release_chart_path(project=project, chart=installed_chart) == \
        release_chart_path(project=project, chart=other)


def test_the_copy_follows_the_chart_and_is_left_alone_when_equal(tmp_path, installed_chart):
    project = tmp_path / "project"
    project.mkdir()
    release_chart_path(project=project, chart=installed_chart)
    copied = project / PROJECT_COPY / "Chart.yaml"
    before = copied.stat().st_mtime_ns
    release_chart_path(project=project, chart=installed_chart)
    assert copied.stat().st_mtime_ns == before  # unchanged chart: nothing rewritten

    (installed_chart / "templates" / "job.yaml").write_text("kind: Job\nspec: {}\n")
    (installed_chart / ".helmignore").unlink()
    release_chart_path(project=project, chart=installed_chart)
    copy = project / PROJECT_COPY
    assert (copy / "templates" / "job.yaml").read_text() == "kind: Job\nspec: {}\n"
    assert not (copy / ".helmignore").exists()  # a removed file is gone from the copy too
    assert [p.name for p in copy.parent.iterdir()] == ["training-job"]  # no staging folders left behind


def test_the_plugin_folder_is_a_checkout_outside_the_project(tmp_path, monkeypatch):
    # `pulumi package add …/provider@v0.1.0` runs the repository from ~/.pulumi/plugins/<…>-v0.1.0 with the
    # program's folder as working directory: the version in that folder's name must not reach the state.
    plugin = tmp_path / "plugins" / "resource-github.com_o_trainstack.git_provider-v0.1.0"
    chart = plugin / "workloads" / "charts" / "training-job"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: training-job\n")
    monkeypatch.setattr(paths, "REPO_ROOT", plugin)
    project = tmp_path / "program"
    project.mkdir()
    assert release_chart.release_chart_path(project=project, chart=chart) == ".trainstack/charts/training-job"
