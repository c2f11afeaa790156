"""Files, sections and anchors the documentation points at, and what it says the image runs.

- A repository path in code (`trainstack/infra/core/versions.py`, `docs/aws.md#configuration-pulumiawsyaml`)
  exists, from the repository root or from the page's folder, and its `#anchor` is one of its headings.
- A Markdown link's `#anchor` (`[x](aws.md#p5--p6-with-efa-pulumiaws-p5yaml)`, `[x](#local-disk)`) is a
  heading of its target (tests/docs/test_links.py checks that the file exists).
- `page.md, "Heading"` or `"Heading" in page.md`: the page has a heading that contains those words.
- "entrypoint `X`": X is the ENTRYPOINT of images/Dockerfile.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from tests.docs.doc_text import REPO, Snippet, anchors, headings, shell_words

TOP = ("training", "trainstack", "docs", "tests", "bench", "images", "workloads", "policy", "examples",
       "provider", "testbed")
# A file of ours by its suffix (a bare folder or name could be a label, trainstack/provisioning-request-api).
REPO_PATH = re.compile(rf"^(?:\./)?((?:{'|'.join(TOP)})/[\w./-]*\.(?:py|md|yaml|yml|json|txt|toml|tpl|lock|sh|j2)|"
                       r"[\w./-]*Dockerfile|Pulumi\.[\w-]+\.yaml|pyproject\.toml|requirements\.txt|Makefile|"
                       r"schema\.json)(?::\d+(?:-\d+)?)?(?:#([\w-]+))?$")
WRITTEN = ("bench/results/",)  # where commands are told to write: need not exist
# A line that cites another project's files (cluster-toolkit's examples/..., pulumi-kubernetes' provider/...).
UPSTREAM = re.compile(r"cluster-toolkit|pulumi-kubernetes|pulumi-eks|container-engine-accelerators|kueue['’]s|"
                      r"torchtitan|pytorch/|huggingface/|karpathy/|nanoGPT|github\.com/|upstream", re.I)
LINK = re.compile(r"\]\(([^)\s]+\.md)?#([^)\s]+)\)")
QUOTED_SECTION = re.compile(r"([\w./-]+\.md),? (?:section |sections? )?\"([^\"]+)\"|\"([^\"]+)\" (?:in|of) ([\w./-]+\.md)")


def _resolve(name: str, page: Path) -> Path | None:
    for base in (page.parent, REPO, REPO / "docs"):
        if (base / name).exists():
            return base / name
    return None


def _anchor_problem(target: Path, anchor: str) -> str | None:
    if target.suffix != ".md" or anchor in anchors(target):
        return None
    shown = target.relative_to(REPO) if target.is_relative_to(REPO) else target
    return f"{shown} has no section #{anchor} (its anchors: {', '.join(sorted(anchors(target))[:12])}, ...)"


def path_problems(snippets: list[Snippet]) -> list[str]:
    problems = []
    for snippet in snippets:
        if UPSTREAM.search(_line_of(snippet)):
            continue
        for word in shell_words(snippet.text) or snippet.text.split():
            word = word.strip(".,;:()'\"")
            match = REPO_PATH.match(word)
            if not match or any(c in word for c in "*<>{}$") or match.group(1).startswith(WRITTEN):
                continue
            target = _resolve(match.group(1), snippet.page)
            if target is None:
                problems.append(f"{snippet.where()}: {match.group(1)}: no such file in the repository")
            elif match.group(2) and (problem := _anchor_problem(target, match.group(2))):
                problems.append(f"{snippet.where()}: {problem}")
    return list(dict.fromkeys(problems))  # a stack file's comment is read whole and by its code spans


def _line_of(snippet: Snippet) -> str:
    """The page's line a snippet is on, and the one before it (a citation may start there)."""
    lines = _lines(snippet.page)
    return " ".join(lines[max(snippet.line - 2, 0):snippet.line])


@functools.cache
def _lines(page: Path) -> list[str]:
    return page.read_text().splitlines()


def _prose(page: Path) -> list[tuple[int, str]]:
    """A page's lines outside fenced blocks (a stack file: its comments)."""
    result, in_fence = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if page.suffix == ".yaml":
            if "#" in line:
                result.append((number, line.split("#", 1)[1]))
            continue
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence:
            result.append((number, line))
    return result


# A paragraph that starts with its title in bold (**What it costs.**) is a section too, as readers see it.
BOLD_LEAD = re.compile(r"^\s*(?:[-*]\s+)?\*\*([^*]+)\*\*", re.M)


def _has_heading(target: Path, words: str) -> bool:
    wanted = words.lower().replace("`", "").rstrip(".")
    titles = headings(target) + BOLD_LEAD.findall(target.read_text())
    return any(wanted in title.lower().replace("`", "") for title in titles)


def section_problems(page_list: list[Path]) -> list[str]:
    """Markdown `#anchor` links and quoted section names resolve to a heading of their page."""
    problems = []
    for page in page_list:
        shown = page.relative_to(REPO) if page.is_relative_to(REPO) else page
        for number, line in _prose(page):
            for target_name, anchor in LINK.findall(line):
                target = _resolve(target_name, page) if target_name else page
                if target is not None and (problem := _anchor_problem(target, anchor)):
                    problems.append(f"{shown}:{number}: {problem}")
            for name, section, section2, name2 in QUOTED_SECTION.findall(line):
                target = _resolve(name or name2, page)
                if target is not None and not _has_heading(target, section or section2):
                    problems.append(f"{shown}:{number}: {name or name2} has no section \"{section or section2}\"")
    return problems


def dockerfile_entrypoint(root: Path = REPO) -> str:
    line = next(ln for ln in (root / "images" / "Dockerfile").read_text().splitlines() if ln.startswith("ENTRYPOINT"))
    return " ".join(json.loads(line.split(None, 1)[1]))


def entrypoint_problems(page_list: list[Path]) -> list[str]:
    actual = dockerfile_entrypoint()
    problems = []
    for page in page_list:
        text = re.sub(r"\s+", " ", page.read_text())
        for said in re.findall(r"entrypoint:? `([^`]+)`", text, flags=re.I):
            if said != actual:
                shown = page.relative_to(REPO) if page.is_relative_to(REPO) else page
                problems.append(f"{shown}: says the image's entrypoint is `{said}`; images/Dockerfile: `{actual}`")
    return problems
