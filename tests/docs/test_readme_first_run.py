"""README's "Train on your own text" is a laptop path first (issue 30): a CPU command with its measured
time and loss, and the GPU command beside it, labelled, in a run directory of its own."""

from __future__ import annotations

import re

from tests.docs.doc_text import REPO, markdown_snippets


def _section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("## Train on your own text", 1)[1].split("\n## ", 1)[0]


def _train_commands() -> list[str]:
    snippets = markdown_snippets(REPO / "README.md", "## x\n" + _section())
    return [s.text for s in snippets if s.fenced and " -m training train " in s.text]


def test_the_laptop_command_comes_first_and_is_small():
    laptop, gpu = _train_commands()
    assert "--preset tiny" in laptop and "--preset gpt2" in gpu
    section = _section()
    assert section.index("On a laptop (CPU)") < section.index(laptop) < section.index("On a GPU") < section.index(gpu)
    assert re.search(r"--out (\S+)", laptop).group(1) != re.search(r"--out (\S+)", gpu).group(1)


def test_the_laptop_command_says_its_measured_time_and_loss():
    measured = _section().split("Measured on", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"train (\d+ min )?[\d.]+ s", measured) and "load average" in measured
    assert re.search(r"training loss falls from [\d.]+ to [\d.]+ nats per token", measured.replace("\n", " "))
