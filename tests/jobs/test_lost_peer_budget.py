"""Exit 75 ("a peer was lost, restart me") is ignored by the Job's failure policy, so the launcher bounds it
(issue 29 item 12): the chart gives it a ledger on the shared volume and a budget, and past the budget the
launcher exits 1, which the Job counts toward backoffLimit."""

from __future__ import annotations

import pytest

from tests.workloads.chart import deep_merge, load_values, one, render, trainer
from training.elastic import restart_budget

HOST_LOST = 75


def test_the_chart_gives_the_launcher_a_shared_ledger_and_a_budget_per_pod():
    values = deep_merge(load_values("gpu-4x8-queue-pvc"), {"job": {"pods": {"min": 2, "max": 4}}})
    objects = render(values)
    env = {e["name"]: e.get("value") for e in trainer(objects)["env"]}
    mount = values["storage"]["mountPath"] if "mountPath" in values.get("storage", {}) else "/mnt/shared"
    assert env[restart_budget.LEDGER_ENV] == f"{mount.rstrip('/')}/.trainstack/lost-peer"
    assert env[restart_budget.BUDGET_ENV] == str(20 * 4)
    volume = next(m for m in trainer(objects)["volumeMounts"] if m["name"] == "shared")
    assert env[restart_budget.LEDGER_ENV].startswith(volume["mountPath"])
    claim = next(v for v in one(objects, "Job")["spec"]["template"]["spec"]["volumes"] if v["name"] == "shared")
    assert "persistentVolumeClaim" in claim  # every pod of the Job sees the same ledger


def test_exits_within_the_budget_stay_restarts_and_past_it_count(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "3")
    codes = [restart_budget.spend(HOST_LOST, "exp-7c1e") for _ in range(5)]
    assert codes == [HOST_LOST] * 3 + [restart_budget.COUNTED_EXIT] * 2
    assert "over its budget of 3" in capsys.readouterr().err
    # Another Job (another rendezvous id: a new Job UID) starts with its own budget.
    assert restart_budget.spend(HOST_LOST, "exp-9f00") == HOST_LOST


@pytest.mark.parametrize("env", [{}, {restart_budget.BUDGET_ENV: "3"}, {restart_budget.LEDGER_ENV: "/x"}])
def test_without_the_charts_variables_nothing_is_counted(env, monkeypatch):
    for name in (restart_budget.LEDGER_ENV, restart_budget.BUDGET_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert all(restart_budget.spend(HOST_LOST, "exp") == HOST_LOST for _ in range(10))


def test_a_ledger_that_cannot_be_written_keeps_the_restart(tmp_path, monkeypatch, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(blocked / "sub"))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "0")
    assert restart_budget.spend(HOST_LOST, "exp") == HOST_LOST
    assert "could not count this restart" in capsys.readouterr().err


def test_the_launcher_spends_the_budget_for_a_workers_exit_75(tmp_path, monkeypatch):
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from training import launch

    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "1")
    monkeypatch.setattr(launch, "wait_for_store_host", lambda: None)
    monkeypatch.setattr(launch, "watch_store_calls", lambda: None)

    def lost_peer(args):
        failure = ProcessFailure(local_rank=0, pid=1, exitcode=HOST_LOST, error_file=str(tmp_path / "none.json"))
        raise ChildFailedError("train", {0: failure})

    monkeypatch.setattr(torchrun, "run", lost_peer)
    argv = ["--nnodes", "2", "--rdzv-backend", "static", "--rdzv-id", "exp-uid", "-m", "training"]
    assert [launch.main(argv) for _ in range(3)] == [HOST_LOST, 1, 1]
    assert len((tmp_path / "exp-uid").read_text().splitlines()) == 3
