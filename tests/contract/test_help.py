"""`python -m training COMMAND --help` tells the truth and shows each default (issue 30)."""

from __future__ import annotations

import contextlib
import io

import pytest

from trainstack.contract.cli import build_parser


def help_text(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    # the flags' part (not the usage line), with argparse's wrapping at the terminal's width undone
    return " ".join(out.getvalue().split("options:", 1)[1].split())


def test_train_help_shows_the_defaults_a_newcomer_needs():
    text = help_text("train")
    for flag, default in (("--preset", "gpt2"), ("--max-steps", "1000"), ("--lr", "0.0006"),
                          ("--checkpoint-every", "200"), ("--eval-every", "200"), ("--log-every", "10"),
                          ("--batch-size", "8"), ("--keep-checkpoints", "3")):
        after = text.split(f"{flag} ", 1)[1]
        assert after.split("(default: ", 1)[1].split(")", 1)[0] == default, (flag, after[:200])


def test_a_default_is_said_once():
    text = help_text("train")
    assert "(default: 0.0)" not in text.split("--checkpoint-every-minutes", 1)[1].split(" --", 1)[0]
    assert "default lr/10" in text and "(default: None)" not in text


@pytest.mark.parametrize("command", ["prepare", "sample", "bench", "demo", "report", "evaluate", "distill"])
def test_every_command_shows_its_defaults(command):
    assert "(default: None)" not in help_text(command)
    if command not in ("report",):
        assert "(default: " in help_text(command)


def test_precision_auto_says_fp16_below_sm80():
    text = help_text("train")
    precision = text.split("--precision ", 1)[1].split(" --compile", 1)[0]
    assert "SM 8.0" in precision and "fp16 with loss scaling on older GPUs (T4, V100)" in precision


def test_the_wandb_group_gives_an_install_command_that_works():
    text = help_text("train")
    assert "Weights & Biases (in a checkout: .venv/bin/pip install -e '.[wandb]')" in text
    assert "pip install 'trainstack[" not in text
