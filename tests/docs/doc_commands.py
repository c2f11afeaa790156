"""Each command the documentation shows, checked against the code that would run it.

- `python -m training COMMAND --flags` and `trainstack COMMAND --flags` (with the trainer's flags after
  `--`): the subcommand and every flag against the real argparse parsers (trainstack/contract/cli.py,
  trainstack/jobs/cli.py). Other `python -m MODULE` commands (bench.*, the audit, tests.golden_graphs): the
  module exists and each flag is one its `add_argument` calls declare.
- `make TARGET`: a target of the Makefile.
- `pip install 'trainstack[...]'` without a URL or a path: there is no such package on an index.
- In README.md, a bare `trainstack` command: the page every newcomer follows says where the command is.

Each check returns problems as "page:line: what is wrong" and never stops at the first.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
from pathlib import Path

from tests.docs.doc_text import REPO, Snippet, commands

SUBCOMMAND = re.compile(r"^[a-z][a-z-]*$")
FLAG = re.compile(r"^(--[A-Za-z][\w-]*|-[A-Za-z])(=.*)?$")
ALWAYS = {"--help", "-h"}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@functools.cache
def training_parser() -> argparse.ArgumentParser:
    from trainstack.contract.cli import build_parser

    return build_parser()


@functools.cache
def trainstack_parser() -> argparse.ArgumentParser:
    from trainstack.jobs.cli import _parser

    return _parser()


@functools.cache
def declared_flags(module: str) -> frozenset[str] | None:
    """Option strings of every `add_argument` call in MODULE's file; None where no such module is here."""
    base = REPO / Path(*module.split("."))
    source = next((p for p in (base.with_suffix(".py"), base / "__main__.py") if p.is_file()), None)
    if source is None:
        return None
    flags = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")}
    return frozenset(flags)


def _unknown_flags(words: list[str], options: set[str]) -> list[str]:
    return [w.split("=")[0] for w in words if FLAG.match(w) and w.split("=")[0] not in options | ALWAYS]


def _subcommand_problems(words: list[str], parser: argparse.ArgumentParser, prog: str) -> list[str]:
    """`prog SUB --flags`: SUB is a subcommand and each flag one of SUB's (or of prog itself)."""
    if not words or words[0].startswith("-"):
        bad = _unknown_flags(words, _options(parser))
        return [f"`{prog} {' '.join(words)}`: {prog} has no flag {', '.join(bad)}"] if bad else []
    sub = words[0]
    if not SUBCOMMAND.match(sub):
        return []  # a placeholder (COMMAND, <cmd>, ...): nothing to check
    choices = _subparsers(parser)
    if sub not in choices:
        return [f"`{prog} {sub}`: no such command (there are: {', '.join(sorted(choices))})"]
    rest = words[1:]
    after = rest[rest.index("--") + 1:] if "--" in rest else []
    rest = rest[:rest.index("--")] if "--" in rest else rest
    problems = [f"`{prog} {sub}` has no flag {flag}" for flag in _unknown_flags(rest, _options(choices[sub]))]
    if prog == "trainstack" and sub == "submit" and after and not {"--module", "--script"} & set(rest):
        train = _subparsers(training_parser())["train"]
        problems += [f"`trainstack submit ... -- {flag}`: the trainer has no flag {flag}"
                     for flag in _unknown_flags(after, _options(train))]
    return problems


def _module_problems(module: str, words: list[str]) -> list[str]:
    if module == "training":
        return _subcommand_problems(words, training_parser(), "python -m training")
    if module == "training.launch" or module == "torch.distributed.run":
        if "-m" in words and words[words.index("-m") + 1:words.index("-m") + 2] == ["training"]:
            return _subcommand_problems(words[words.index("-m") + 2:], training_parser(), "python -m training")
        return []  # torchrun's own flags
    if not module.startswith(("bench", "trainstack", "tests", "training", "policy")) or "<" in module:
        return []  # another project's module (pip, pytest, venv, ...), or a placeholder (bench.<name>)
    flags = declared_flags(module)
    if flags is None:
        return [f"`python -m {module}`: no module {module} in the repository"]
    return [f"`python -m {module}` has no flag {flag}" for flag in _unknown_flags(words, set(flags))]


@functools.cache
def make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w.-]+)\s*:(?!=)", text, flags=re.M))


def _pip_problems(words: list[str]) -> list[str]:
    if "install" not in words:
        return []
    problems = []
    for word in words[words.index("install") + 1:]:
        if re.match(r"^trainstack(\[[\w,]+\])?$", word):
            problems.append(f"`pip install '{word}'`: trainstack is on no package index; install from a checkout "
                            "(.venv/bin/pip install -e '.[infra]') or a git URL (docs/library.md)")
    return problems


def command_problems(snippet: Snippet, page_is_readme: bool = False) -> list[str]:
    """Every problem of the commands in one snippet."""
    problems = []
    for words in commands(snippet.text):
        program = words[0].rsplit("/", 1)[-1]
        if program in ("python", "python3") and len(words) > 2 and words[1] == "-m":
            problems += _module_problems(words[2], words[3:])
        elif program == "torchrun":
            problems += _module_problems("torch.distributed.run", words[1:])
        elif program == "trainstack" and len(words) > 1 and SUBCOMMAND.match(words[1]):
            problems += _subcommand_problems(words[1:], trainstack_parser(), "trainstack")
            if page_is_readme and snippet.fenced and words[0] == "trainstack":
                problems.append("a bare `trainstack` command: spell where it is, .venv/bin/trainstack")
        elif program == "make" and len(words) > 1 and SUBCOMMAND.match(words[1]) and snippet.fenced:
            if words[1] not in make_targets():
                problems.append(f"`make {words[1]}`: the Makefile has no target {words[1]}")
        elif program in ("pip", "pip3") or words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
            problems += _pip_problems(words)
    return [f"{snippet.where()}: {p}" for p in problems]


def all_command_problems(snippets: list[Snippet]) -> list[str]:
    return [p for s in snippets if s.language not in ("yaml", "yml", "json", "python", "py")
            for p in command_problems(s, page_is_readme=s.page == REPO / "README.md")]
