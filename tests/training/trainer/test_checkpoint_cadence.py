"""--checkpoint-every-minutes: the timed save every rank agrees on without a per-step collective."""

from __future__ import annotations

import threading
from itertools import pairwise
from pathlib import Path

import pytest

from testbed.processes import free_port
from tests.support.training_runs import checkpoint_steps, cli, spawn, torchrun, train_args
from training.trainer.checkpointing import TimedSaves
from trainstack.contract.cli import build_parser
from trainstack.contract.config import TrainConfig


class Ranks:
    """Several ranks in lockstep, each with its own fake clock; `agree` is the collective (max of each figure)."""

    def __init__(self, step_seconds: list[float], minutes: float, start_step: int = 0):
        self.n = len(step_seconds)
        self.step_seconds = step_seconds
        self.now = [0.0] * self.n
        self.posted: list[list[float] | None] = [None] * self.n
        self.exchanges = 0
        self.barrier = threading.Barrier(self.n, timeout=10)  # ranks that disagree fail, not hang
        self.timers = [TimedSaves(minutes, start_step, agree=self._agree_for(r), clock=self._clock_for(r))
                       for r in range(self.n)]

    def _clock_for(self, rank):
        return lambda: self.now[rank]

    def _agree_for(self, rank):
        def agree(values):
            self.posted[rank] = values
            if self.barrier.wait() == 0:
                self.exchanges += 1
            agreed = [max(column) for column in zip(*self.posted, strict=True)]
            self.barrier.wait()
            return agreed
        return agree

    def run(self, steps: int, start_step: int = 0, slow_from: int | None = None) -> list[list[tuple[int, float]]]:
        """Each rank's (step, its clock) at every save; a rank is 3x slower from `slow_from` on."""
        saves: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]

        def rank_loop(r):
            for step in range(start_step + 1, start_step + steps + 1):
                factor = 3.0 if slow_from is not None and step > slow_from and r == 0 else 1.0
                self.now[r] += self.step_seconds[r] * factor
                if self.timers[r].due(step):
                    saves[r].append((step, self.now[r]))
                    self.now[r] += 5.0  # the save itself
                    self.timers[r].saved(step)

        threads = [threading.Thread(target=rank_loop, args=(r,)) for r in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return saves


def work_between_saves(times: list[float]) -> list[float]:
    """Seconds of training from the start (or the end of a 5 s save) to each save."""
    return [b - a - 5.0 for a, b in pairwise([-5.0, *times])]


def test_ranks_with_different_step_times_save_at_the_same_steps_within_the_budget():
    ranks = Ranks([0.5, 0.7, 0.6], minutes=10)  # the slowest rank sets the pace
    saves = ranks.run(5000)
    steps = [[s for s, _ in rank] for rank in saves]
    assert steps[0] and steps[0] == steps[1] == steps[2]
    slowest = [t for _, t in saves[1]]
    gaps = work_between_saves(slowest)
    assert all(600 - 0.7 <= gap <= 600 for gap in gaps), gaps  # within M minutes, to one step
    assert ranks.exchanges < 40 * len(steps[0])  # a few dozen checks per save, not one per step


def test_a_step_time_that_grows_is_measured_again_before_the_deadline():
    ranks = Ranks([1.0, 1.0], minutes=10)
    saves = ranks.run(3000, slow_from=100)  # rank 0 becomes 3x slower after step 100
    assert [s for s, _ in saves[0]] == [s for s, _ in saves[1]]
    times = [t for _, t in saves[0]]
    gaps = work_between_saves(times)
    assert all(gap <= 600 for gap in gaps), gaps
    assert max(gaps) >= 600 - 3.0  # and not much earlier than needed


def test_a_resume_starts_the_timer_at_the_resume():
    ranks = Ranks([1.0, 1.0], minutes=1, start_step=4000)
    saves = ranks.run(130, start_step=4000)
    assert [s for s, _ in saves[0]][:2] == [4060, 4120]  # 60 s from the resume, then 60 s after the 5 s save


def test_zero_minutes_never_checks_nor_saves():
    ranks = Ranks([1.0, 1.0], minutes=0)
    assert ranks.run(2000) == [[], []]
    assert ranks.exchanges == 0


def test_the_default_is_off_and_the_demo_does_not_set_it():
    import training.commands.demo as demo
    args = build_parser().parse_args(["train", "--data", "d", "--out", "o"])
    assert TrainConfig.from_args(args).cadence.checkpoint_every_minutes == 0
    assert "--checkpoint-every-minutes" not in Path(demo.__file__).read_text()


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "ten"])
def test_bad_minutes_are_one_line_and_exit_2(tmp_path, value):
    code, _, err = cli(["train", "--data", str(tmp_path), "--out", str(tmp_path / "run"),
                        "--checkpoint-every-minutes", value])
    assert code == 2
    assert "--checkpoint-every-minutes" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.timeout(300)
def test_two_workers_save_on_time_where_the_step_cadence_would_not(data_dir, tmp_path):
    run = tmp_path / "run"
    launcher = torchrun("--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d",
                        f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--max-restarts=0")
    # 0.0001 minutes (6 ms) is less than a step: every check finds the budget spent
    proc = spawn(launcher + train_args(data_dir, run, "--max-steps", "12", "--checkpoint-every", "1000",
                                       "--keep-checkpoints", "100", "--checkpoint-every-minutes", "0.0001",
                                       "--no-export"), tmp_path / "log")
    assert proc.wait(timeout=240) == 0, (tmp_path / "log").read_text()[-3000:]
    timed = [step for step in checkpoint_steps(run) if step != 12]
    assert timed, checkpoint_steps(run)  # the step cadence alone saves only the last step
