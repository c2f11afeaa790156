"""Every file a source comment or docstring names is in the repository (a moved module leaves no stale path)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("training", "bench", "tests", "testbed", "images", "workloads", "policy", "trainstack", "docs")
SKIP_PARTS = {"venv", ".venv", "__pycache__", "golden", "results", "nccl_samples", "fixtures"}
SUFFIXES = {".py", ".yaml", ".yml", ".tpl", ".toml", ".txt", ".md"}
# A path into one of our folders, e.g. training/trainer/train.py or docs/BENCHMARKS.md.
CITED_PATH = re.compile(r"(?<![\w./-])((?:training|bench|tests|testbed|images|workloads|docs|policy|trainstack)/[\w./-]*\w"
                        r"\.(?:py|md|yaml|yml|json|tpl|txt|lock|toml))(?![\w/])")
CITED_DOC = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")  # a bare document name, e.g. contracts.md
OUTPUTS = ("bench/results/",)
UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+#\d+|github\.com/|\bv\d+\.\d+")  # a line citing another project  # where a command is told to write: need not exist yet


def source_files() -> list[Path]:
    files = [REPO / "__main__.py", REPO / "Makefile", REPO / "images" / "Dockerfile"]
    for folder in SOURCES:
        files += [p for p in (REPO / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES
                  and not SKIP_PARTS & set(p.relative_to(REPO).parts)]
    return [p for p in files if p != Path(__file__).resolve()]


def missing_references(files, root: Path) -> list[str]:
    documents = {p.name for p in root.rglob("*.md") if not SKIP_PARTS & set(p.relative_to(root).parts)}
    missing = []
    for path in files:
        text = path.read_text(errors="replace")
        for cited in set(CITED_PATH.findall(text)):
            if not (root / cited).exists() and not cited.startswith(OUTPUTS):
                missing.append(f"{path.relative_to(root)}: {cited}")
        # Tests name made-up documents as their data (a.md, b.md); the check of bare names skips them.
        for line in text.splitlines() if path.relative_to(root).parts[0] != "tests" else ():
            if UPSTREAM.search(line):
                continue  # an upstream project's document (pytorch/pytorch#123 ... RELEASE.md; kueue's X.md at v0.19.2)
            for cited in CITED_DOC.findall(line):
                if cited not in documents and not any(cited in p for p in CITED_PATH.findall(line)):
                    missing.append(f"{path.relative_to(root)}: {cited}")
    return sorted(missing)


def test_every_cited_file_exists():
    files = source_files()
    assert len(files) > 100
    assert missing_references(files, REPO) == []


def test_a_stale_path_and_a_missing_document_are_found(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "README.md").write_text("")
    source = tmp_path / "training" / "a.py"
    source.write_text("# see training/cli.py, training/a.py, contracts.md and README.md\n"
                      "# pytorch/pytorch#1 (RELEASE.md) is upstream's\n")
    assert missing_references([source], tmp_path) == ["training/a.py: contracts.md", "training/a.py: training/cli.py"]
