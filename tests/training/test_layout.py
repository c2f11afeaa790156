"""The shape of training/: no import cycle, no module too long to read without a reason at its top."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "training"
LONG = 400  # lines; a longer module says why in its docstring, with this phrase
LONG_REASON = "Long on purpose:"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The training modules `path` imports, at its top or inside a function (both can close a cycle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(path): path for path in root.rglob("*.py")}
    known = set(files)
    # `from training.x import y` names package training.x too: a package's __init__ is no edge of its own
    return {name: imports_of(path, known) - {name} for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_training_has_no_import_cycle():
    graph = import_graph(TRAINING)
    assert len(graph) > 30
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = tmp_path / "training"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from training.b import thing\n")
    (package / "b.py").write_text("def f():\n    from training import a\n")
    files = {f"training.{p.stem}": p for p in package.glob("[ab].py")}
    graph = {name: imports_of(path, set(files)) for name, path in files.items()}
    assert cycles(graph) == [["training.a", "training.b"]]


def test_long_modules_say_why_at_their_top():
    unexplained = []
    for path in sorted(TRAINING.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LONG and LONG_REASON not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines")
    assert unexplained == []


def test_every_folder_is_a_package_the_wheel_ships():
    """setuptools' find_packages (pyproject.toml) leaves out a folder without __init__.py: no namespace packages."""
    folders = {path.parent for path in TRAINING.rglob("*.py") if "__pycache__" not in path.parts}
    assert sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").is_file()) == []
