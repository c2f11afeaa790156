"""Exit 75 ("a peer was lost, restart me") is ignored by the Job's failure policy, so the launcher bounds it
(issue 29 item 12): the chart gives it a ledger on the shared volume and a budget, and past the budget of
exits with no new checkpoint between them the launcher exits 1, which the Job counts toward backoffLimit."""

from __future__ import annotations

import pathlib
import threading
import time

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
    # Progress is read where the built-in trainer writes its checkpoints (--out, then checkpoints/step_<N>).
    args = trainer(objects)["args"]
    out = args[args.index("--out") + 1]
    assert env[restart_budget.PROGRESS_ENV] == f"{out}/checkpoints"
    volume = next(m for m in trainer(objects)["volumeMounts"] if m["name"] == "shared")
    assert env[restart_budget.LEDGER_ENV].startswith(volume["mountPath"])
    claim = next(v for v in one(objects, "Job")["spec"]["template"]["spec"]["volumes"] if v["name"] == "shared")
    assert "persistentVolumeClaim" in claim  # every pod of the Job sees the same ledger


@pytest.fixture(autouse=True)
def _no_job_uid(monkeypatch):
    monkeypatch.delenv(restart_budget.JOB_UID_ENV, raising=False)
    monkeypatch.delenv(restart_budget.PROGRESS_ENV, raising=False)


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
    assert len(list((tmp_path / "exp-uid").iterdir())) == 3  # one file per exit


def _checkpoint(checkpoints: pathlib.Path, step: int) -> None:
    (checkpoints / f"step_{step:08d}").mkdir(parents=True)  # as training/checkpoints/checkpoint.py names them


def test_a_long_spot_run_that_keeps_saving_never_uses_the_budget_up(tmp_path, monkeypatch):
    """M1: pod 0 lost 40 times over weeks, 3 peers exiting 75 each time, a newer checkpoint before each loss
    (the SIGTERM or the periodic one): restarts all, though 120 exits are past 20 x 4."""
    checkpoints = tmp_path / "run" / "checkpoints"
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, str(20 * 4))
    monkeypatch.setenv(restart_budget.PROGRESS_ENV, str(checkpoints))
    codes = []
    for loss in range(40):
        _checkpoint(checkpoints, 200 * (loss + 1))
        codes += [restart_budget.spend(HOST_LOST, "exp-7c1e") for _ in range(3)]
    assert codes == [HOST_LOST] * 120


def test_a_fault_that_saves_nothing_new_is_counted_and_a_new_checkpoint_starts_afresh(tmp_path, monkeypatch, capsys):
    checkpoints = tmp_path / "checkpoints"
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "3")
    monkeypatch.setenv(restart_budget.PROGRESS_ENV, str(checkpoints))
    # Before any checkpoint: counted together.
    assert [restart_budget.spend(HOST_LOST, "exp") for _ in range(4)] == [HOST_LOST] * 3 + [1]
    assert "before any checkpoint" in capsys.readouterr().err
    _checkpoint(checkpoints, 200)
    (checkpoints / ".tmp-abcd").mkdir()  # a save in flight is no progress
    assert [restart_budget.spend(HOST_LOST, "exp") for _ in range(5)] == [HOST_LOST] * 3 + [1, 1]
    assert "since checkpoint step200" in capsys.readouterr().err
    _checkpoint(checkpoints, 400)
    assert restart_budget.spend(HOST_LOST, "exp") == HOST_LOST


def test_the_ledger_is_kept_per_job_uid_even_with_a_fixed_run_id(tmp_path, monkeypatch):
    """Minor 1: job.runId set makes every Job's rendezvous id the same; the Job UID still tells them apart."""
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "1")
    monkeypatch.setenv(restart_budget.JOB_UID_ENV, "7f1c2d3e-0000-4000-8000-000000000001")
    assert [restart_budget.spend(HOST_LOST, "fixed") for _ in range(2)] == [HOST_LOST, 1]
    monkeypatch.setenv(restart_budget.JOB_UID_ENV, "7f1c2d3e-0000-4000-8000-000000000002")  # the next Job
    assert restart_budget.spend(HOST_LOST, "fixed") == HOST_LOST
    assert sorted(p.name for p in tmp_path.iterdir()) == ["7f1c2d3e-0000-4000-8000-000000000001",
                                                          "7f1c2d3e-0000-4000-8000-000000000002"]


def test_one_file_per_exit_from_pods_at_once(tmp_path, monkeypatch):
    """Minor 3: every exit is its own file created with O_EXCL (appends from several NFS clients to one file
    can interleave or lose records); the count is a listing."""
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "1000")
    threads = [threading.Thread(target=restart_budget.spend, args=(HOST_LOST, "exp")) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = list((tmp_path / "exp").iterdir())
    assert len(entries) == 32 and all(e.is_file() and e.stat().st_size == 0 for e in entries)


def test_a_volume_that_never_answers_does_not_hold_the_exit(tmp_path, monkeypatch, capsys):
    """Minor 3: a hard-mounted NFS volume on a node whose network is gone blocks for good; the exit goes on."""
    monkeypatch.setenv(restart_budget.LEDGER_ENV, str(tmp_path / "ledger"))
    monkeypatch.setenv(restart_budget.BUDGET_ENV, "0")
    monkeypatch.setattr(restart_budget, "RECORD_TIMEOUT_S", 0.5)
    never = threading.Event()
    monkeypatch.setattr(pathlib.Path, "mkdir", lambda *a, **k: never.wait(10))
    started = time.monotonic()
    assert restart_budget.spend(HOST_LOST, "exp") == HOST_LOST  # unrecorded: a restart, not a failure
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert "did not answer within" in err and "this restart is not counted" in err
    never.set()


@pytest.mark.parametrize("run_id", ["", "exp-fixed"])
def test_every_pod_knows_its_job_uid_and_the_grace_period_whatever_the_run_id(run_id):
    """Minor 1: a fixed job.runId used to drop TRAINSTACK_JOB_UID, and with it the lock's and the ledger's
    per-Job identity."""
    values = deep_merge(load_values("gpu-4x8-queue-pvc"), {"job": {"runId": run_id,
                                                                  "terminationGracePeriodSeconds": 600}})
    env = {e["name"]: e for e in trainer(render(values))["env"]}
    assert env[restart_budget.JOB_UID_ENV]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}
    assert env["TRAINSTACK_GRACE_PERIOD_SECONDS"]["value"] == "600"
