"""The chart path a Helm release records (trainstack/infra/core/release_chart.py): the same on every machine.

pulumi-kubernetes keeps helm.v3.Release's `chart` input in the state and diffs it like any input; a path that
holds a virtualenv's location or a Python version made every other machine, and every upgrade, show a diff.
"""

from pathlib import Path

import pytest

from trainstack.infra.core import paths, release_chart
from trainstack.infra.core.release_chart import COPIES, chart_digest, release_chart_path

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.source_tree
def test_this_repositorys_program_records_the_checkouts_chart_as_before():
    assert release_chart_path(project=REPO) == "workloads/charts/training-job"
    assert not (REPO / COPIES).exists()


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


def copy_path(chart: Path) -> str:
    return f".trainstack/charts/training-job-{chart_digest(chart)}"


def test_an_installed_chart_is_copied_into_the_project_and_recorded_there(tmp_path, installed_chart):
    project = tmp_path / "project"
    project.mkdir()
    recorded = release_chart_path(project=project, chart=installed_chart)
    assert recorded == copy_path(installed_chart)
    copy = project / recorded
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


def test_a_changed_chart_gets_a_new_copy_and_digest_and_an_existing_copy_is_never_rewritten(tmp_path, installed_chart):
    project = tmp_path / "project"
    project.mkdir()
    first = release_chart_path(project=project, chart=installed_chart)
    copied = project / first / "Chart.yaml"
    before = copied.stat().st_mtime_ns
    assert release_chart_path(project=project, chart=installed_chart) == first
    assert copied.stat().st_mtime_ns == before  # unchanged chart: nothing rewritten

    digest = chart_digest(installed_chart)
    (installed_chart / "templates" / "job.yaml").write_text("kind: Job\nspec: {}\n")
    (installed_chart / ".helmignore").unlink()
    second = release_chart_path(project=project, chart=installed_chart)
    assert second != first and chart_digest(installed_chart) != digest  # the release sees the change
    assert (project / second / "templates" / "job.yaml").read_text() == "kind: Job\nspec: {}\n"
    assert not (project / second / ".helmignore").exists()  # a removed file is gone from the new copy
    assert (project / first / "templates" / "job.yaml").read_text() == "kind: Job\n"  # a running preview's copy stays
    assert sorted(p.name for p in (project / COPIES).iterdir()) == sorted(
        [Path(first).name, Path(second).name])  # no staging folders left behind


def test_the_digest_ignores_the_charts_readme_only(installed_chart):
    digest = chart_digest(installed_chart)
    (installed_chart / "README.md").write_text("docs\n")
    assert chart_digest(installed_chart) == digest
    (installed_chart / "templates" / "job.yaml").rename(installed_chart / "templates" / "job2.yaml")
    assert chart_digest(installed_chart) != digest  # a renamed file renders differently


def test_runs_in_parallel_all_get_the_whole_chart(tmp_path, installed_chart):
    # Several previews from one fresh checkout (CI) copy at once: each must end with the complete chart.
    import concurrent.futures

    project = tmp_path / "project"
    project.mkdir()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        recorded = set(pool.map(lambda _: release_chart_path(project=project, chart=installed_chart), range(16)))
    assert recorded == {copy_path(installed_chart)}
    copy = project / copy_path(installed_chart)
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == \
        [".helmignore", "Chart.yaml", "templates/job.yaml"]
    assert [p.name for p in (project / COPIES).iterdir()] == [copy.name]


def test_a_project_folder_that_cannot_be_written_is_one_line(tmp_path, installed_chart, monkeypatch):
    import pulumi

    project = tmp_path / "project"
    project.mkdir()
    (project / ".trainstack").write_text("not a folder")  # any OSError while preparing the copy
    with pytest.raises(pulumi.RunError) as raised:
        release_chart_path(project=project, chart=installed_chart)
    assert "cannot write there" in str(raised.value) and "Fix: " in str(raised.value)
    assert "\n" not in str(raised.value)


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
    assert release_chart.release_chart_path(project=project, chart=chart) == \
        f".trainstack/charts/training-job-{chart_digest(chart)}"
