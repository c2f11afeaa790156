"""Stack output names and `trainstack:` config keys the documentation shows, checked against the program.

- `pulumi stack output NAME`: NAME is an output a stack exports. The names are read from the source
  (trainstack/**): the string keys of the dicts the stacks build as `outputs` (and the `*commands` /
  `outputs()` helpers they spread into them), so the check needs no mocked `pulumi up` and stays fast.
- `pulumi config set [--path] trainstack:KEY VALUE`, a `trainstack:KEY` in prose, and YAML blocks of
  `trainstack:` keys: fed to the real config parsers (AWS and GCP, over the shipped stack files);
  a key is wrong where every cloud's parser says "unknown key". A dotted key without `--path` is also
  wrong: Pulumi would store the dots in the key's name.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import re
from pathlib import Path
from unittest import mock

import yaml

from tests.docs.doc_text import FENCE, REPO, Snippet, commands, pages

NAMESPACE = "trainstack"
OUTPUT_HOLDERS = re.compile(r"(outputs|commands)$", re.I)


def _holder(node: ast.AST) -> str:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""


@functools.cache
def stack_outputs(root: Path = REPO) -> frozenset[str]:
    """String keys of dicts assigned to / returned as `...outputs` or `...commands` in trainstack/**."""
    names = set()
    for path in (root / "trainstack").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            dicts = []
            if isinstance(node, ast.Assign) and any(OUTPUT_HOLDERS.search(_holder(t)) for t in node.targets) or isinstance(node, ast.AnnAssign) and OUTPUT_HOLDERS.search(_holder(node.target)):
                dicts.append(node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and OUTPUT_HOLDERS.search(node.name):
                dicts += [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and OUTPUT_HOLDERS.search(_holder(target.value)) \
                            and isinstance(target.slice, ast.Constant):
                        names.add(target.slice.value)
            names |= {k.value for d in dicts if isinstance(d, ast.Dict)
                      for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return frozenset(names)


def output_problems(snippets: list[Snippet], known: frozenset[str] | None = None) -> list[str]:
    known = stack_outputs() if known is None else known
    problems = []
    for snippet in snippets:
        for words in commands(snippet.text):
            if words[:3] != ["pulumi", "stack", "output"]:
                continue
            names = [w for w in words[3:] if not w.startswith("-") and re.match(r"^[A-Za-z]\w*$", w)]
            values_of = {"--stack", "-s"}  # flags that take a value: that value is not an output name
            names = [w for i, w in enumerate(words[3:]) if w in names and words[3:][i - 1] not in values_of]
            problems += [f"{snippet.where()}: `pulumi stack output {name}`: no stack exports {name}"
                         for name in names if name not in known]
    return problems


# ------------------------------------------------------------------ config keys
KEY = re.compile(rf"(?<![\w-]){NAMESPACE}:([A-Za-z]\w*(?:\.[A-Za-z]\w*|\[\d+\])*)(?=$|[\s'\"`,;)]|:\s|:$)")
PATH_PART = re.compile(r"([A-Za-z]\w*)|\[(\d+)\]")


@functools.cache
def _clouds() -> list[tuple[str, Path, dict, object]]:
    from trainstack.infra.aws.config import parse_aws_config
    from trainstack.infra.gcp.config import parse_gcp_config

    return [("aws", REPO / "Pulumi.aws.yaml", {f"{NAMESPACE}:apiPublicAccessCidrs": ["203.0.113.7/32"]}, parse_aws_config),
            ("gcp", REPO / "Pulumi.gcp.yaml", {"gcp:project": "my-project"}, parse_gcp_config)]


def _set_path(config: dict, key: str, value: object) -> None:
    """`pulumi config set --path trainstack:a.b[0] value` on a config dict (YAML-typed values)."""
    top, _, rest = key.partition(".")
    if "[" in top:
        top, rest = top[:top.index("[")], top[top.index("["):] + ("." + rest if rest else "")
    parts = [(m.group(1), m.group(2)) for m in PATH_PART.finditer(rest)]
    full = f"{NAMESPACE}:{top}"
    if not parts:
        config[full] = value
        return
    node = config.setdefault(full, [] if parts[0][1] is not None else {})
    for i, (name, index) in enumerate(parts):
        last = i == len(parts) - 1
        following = None if last else ([] if parts[i + 1][1] is not None else {})
        if index is not None:
            position = int(index)
            while len(node) <= position:
                node.append(None)
            node[position] = value if last else (node[position] if node[position] is not None else following)
            node = node[position]
        else:
            node[name] = value if last else (node.get(name) if isinstance(node.get(name), (dict, list)) else following)
            node = node[name]


@functools.cache
def _stack_file(path: Path) -> dict:
    from tests.stack_runs import stack_file_config

    return stack_file_config(path)


def _parse(cloud: tuple, entries: dict[str, object]) -> str | None:
    """The parser's error for the stack file plus ENTRIES ({key: value}); None where it accepts them."""
    from tests.stack_runs import as_cli_config
    from trainstack.infra.config.errors import ConfigError

    name, stack_file, base, parse = cloud
    config = copy.deepcopy(_stack_file(stack_file)) | copy.deepcopy(base)
    for key, value in entries.items():
        _set_path(config, key, value)
    try:
        parse(as_cli_config(config), stack=name)
    except ConfigError as error:
        return str(error)
    except Exception:  # noqa: BLE001 - another failure (a value the doc leaves as a placeholder) is not ours
        return None
    return None


@contextlib.contextmanager
def _one_trainer_parser():
    """The config readers check `job.train` with the trainer's parser, built anew on every call (20 ms):
    one per parser class while the docs are checked (parsing does not change a parser)."""
    from trainstack.contract import cli

    with mock.patch.object(cli, "build_parser", functools.cache(cli.build_parser)):
        yield


def unknown_key(entries: dict[str, object]) -> str | None:
    """The "unknown key" error every cloud gives for ENTRIES, or None where one cloud knows them."""
    with _one_trainer_parser():
        errors = [_parse(cloud, entries) for cloud in _clouds()]
    unknown = [e for e in errors if e and "unknown" in e]
    return unknown[0] if len(unknown) == len(errors) else None


def _typed(text: str) -> object:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def config_problems(snippets: list[Snippet]) -> list[str]:
    problems = []
    checked: dict[str, str | None] = {}

    def check(snippet: Snippet, key: str, value: object) -> None:
        memo = f"{key}={value!r}"
        if memo not in checked:
            checked[memo] = unknown_key({key: value})
        if checked[memo]:
            problems.append(f"{snippet.where()}: trainstack:{key}: {checked[memo]}")

    for snippet in snippets:
        if snippet.language in ("yaml", "yml"):
            continue  # whole blocks: yaml_block_problems
        seen = set()
        for words in commands(snippet.text):
            if words[:3] == ["pulumi", "config", "set"]:
                args = [w for w in words[3:] if w not in ("--path", "--secret", "--plaintext")]
                if args and args[0].startswith(f"{NAMESPACE}:"):
                    key = args[0].split(":", 1)[1]
                    seen.add(key)
                    if re.search(r"[.\[]", key) and "--path" not in words:
                        problems.append(f"{snippet.where()}: `pulumi config set {args[0]}` without --path sets "
                                        "a key with dots in its name; add --path")
                    check(snippet, key, _typed(args[1]) if len(args) > 1 else "value")
        for key in KEY.findall(snippet.text):
            if key not in seen:
                value = snippet.text.split(f"{NAMESPACE}:{key}:", 1)[1].strip() if f"{NAMESPACE}:{key}: " in snippet.text else ""
                check(snippet, key, _typed(value) if value else "value")
    return problems


def yaml_blocks(page: Path) -> list[tuple[int, str]]:
    """(first line, text) of every ```yaml block of a page."""
    blocks, current, start, fence = [], [], 0, None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, start, current = (opened.group(1), number + 1, []) if opened.group(2) in ("yaml", "yml") else (opened.group(1), 0, None)
        elif fence is not None and line.strip().startswith(fence):
            if current is not None:
                blocks.append((start, "\n".join(current)))
            fence = None
        elif fence is not None and current is not None:
            current.append(line)
    return blocks


def yaml_block_problems(page_list: list[Path] | None = None) -> list[str]:
    """Each YAML block of `trainstack:` keys (top level or under `config:`), parsed whole."""
    problems = []
    for page in pages() if page_list is None else page_list:
        for line, text in yaml_blocks(page):
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if isinstance(data, dict) and isinstance(data.get("config"), dict):
                data = data["config"]
            if not isinstance(data, dict):
                continue
            entries = {k.split(":", 1)[1]: v for k, v in data.items()
                       if isinstance(k, str) and k.startswith(f"{NAMESPACE}:")}
            for key, value in entries.items():
                error = unknown_key({key: value})
                if error:
                    where = page.relative_to(REPO) if page.is_relative_to(REPO) else page
                    problems.append(f"{where}:{line}: trainstack:{key}: {error}")
    return problems
