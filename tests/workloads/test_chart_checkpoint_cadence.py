"""train.checkpointEveryMinutes: on clusters (spot) a save at least every 10 minutes by default, so a
preemption loses about that much training whatever the step time (docs/kubernetes.md, preemption)."""

from __future__ import annotations

import helm_python as helm
import pytest

from trainstack.contract.cli import build_parser
from trainstack.infra.config.errors import ConfigError
from trainstack.infra.config.train_args import parse_train, trainer_args

from .chart import REPO_ROOT, chart_values, deep_merge, load_values, render, trainer
from .test_chart_command import module_args

GOOD = load_values("gpu-4x8-queue-pvc")
KEY = "trainstack:job.train"


def rendered_args(override: dict):
    return build_parser().parse_args(module_args(trainer(render(deep_merge(GOOD, override)))))


def test_the_chart_default_is_ten_minutes():
    assert chart_values()["train"]["checkpointEveryMinutes"] == 10
    assert rendered_args({}).checkpoint_every_minutes == 10.0


@pytest.mark.parametrize("minutes", [0.05, 2.5, 30, 1_000_000])
def test_minutes_render_as_the_flag_the_trainer_parses(minutes):
    args = rendered_args({"train": {"checkpointEveryMinutes": minutes}})
    assert args.checkpoint_every_minutes == pytest.approx(minutes)
    assert args.checkpoint_every == GOOD["train"]["checkpointEvery"]  # the step cadence stays the floor


def test_zero_leaves_the_step_cadence_alone():
    words = module_args(trainer(render(deep_merge(GOOD, {"train": {"checkpointEveryMinutes": 0}}))))
    assert "--checkpoint-every-minutes" not in words
    assert build_parser().parse_args(words).checkpoint_every_minutes == 0


@pytest.mark.parametrize("bad", [-1, -0.5, "10", "ten", True])  # null is Helm's "drop the default": off
def test_the_schema_refuses_what_is_not_a_non_negative_number(bad):
    with pytest.raises(helm.HelmError) as caught:
        render(deep_merge(GOOD, {"train": {"checkpointEveryMinutes": bad}}))
    assert "/train/checkpointEveryMinutes" in str(caught.value)


def test_the_stacks_job_train_key_is_the_charts_first_class_value():
    # trainstack:job.train follows the trainer's flag table (trainstack/infra/config/train_args.py): no extraArgs
    assert parse_train({"checkpointEveryMinutes": 5}, KEY) == {"checkpointEveryMinutes": 5.0}
    assert trainer_args({}).checkpoint_every_minutes == 10.0  # a stack that sets nothing gets the chart's 10
    assert trainer_args({"checkpointEveryMinutes": 0}).checkpoint_every_minutes == 0


@pytest.mark.parametrize(("bad", "named"), [(-1, "--checkpoint-every-minutes"), ("nan", f"{KEY}.checkpointEveryMinutes")])
def test_the_stack_refuses_bad_minutes_before_any_resource(bad, named):
    with pytest.raises(ConfigError, match=named):
        parse_train({"checkpointEveryMinutes": bad}, KEY)


def test_the_preemption_docs_state_the_charts_default():
    text = (REPO_ROOT / "docs" / "kubernetes.md").read_text()
    section = text[text.index("## Preemption"):text.index("## Values the chart refuses")]
    minutes = chart_values()["train"]["checkpointEveryMinutes"]
    assert f"`train.checkpointEveryMinutes`\n({minutes})" in section or \
        f"`train.checkpointEveryMinutes` ({minutes})" in section
    assert f"at most about {minutes} minutes" in section
