"""What the documentation shows a reader: the pages, their code, the commands in it, their headings.

The pages are README.md, docs/*.md, examples/*/README.md, the chart's README and the comments of the
shipped stack files (Pulumi.*.yaml). Code is every fenced block and every inline `code span`; a command
is one logical line of it (continuations joined, comments and prompts dropped). Plain functions over
text, so tests/docs/test_commands.py can also feed them planted mistakes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Snippet:
    """One piece of code a page shows: a fenced block's logical line, or an inline span."""

    page: Path
    line: int  # 1-based, in the page
    text: str
    fenced: bool  # in a ``` block (a command to type), else an inline span in prose
    language: str = ""  # the fence's info string: bash, yaml, python, ...

    def where(self) -> str:
        return f"{self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page}:{self.line}"


def pages(root: Path = REPO) -> list[Path]:
    found = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "examples").glob("*/README.md")),
             *sorted((root / "workloads" / "charts").glob("*/README.md"))]
    return [p for p in found if p.is_file()]


def stack_files(root: Path = REPO) -> list[Path]:
    return sorted(root.glob("Pulumi.*.yaml"))


FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def markdown_snippets(page: Path, text: str | None = None) -> list[Snippet]:
    """Every fenced line (continuations joined) and inline code span of a Markdown page."""
    text = page.read_text() if text is None else text
    snippets: list[Snippet] = []
    fence: str | None = None
    language = ""
    pending, pending_line = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, language = opened.group(1), opened.group(2).lower()
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
                continue
            if language in ("yaml", "yml", "json", "python", "py", "text", "console", "diff"):
                snippets.append(Snippet(page, number, line, True, language))
                continue
            if not pending:
                pending_line = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            snippets.append(Snippet(page, pending_line, pending + line, True, language))
            pending = ""
            continue
        if line.startswith("    ") and line.strip().startswith(("python", ".venv", "pulumi", "make", "trainstack")):
            snippets.append(Snippet(page, number, line.strip(), True, "bash"))  # an indented code block
            continue
        for span in INLINE.findall(line):
            snippets.append(Snippet(page, number, span, False))
    return snippets


def stack_file_snippets(path: Path, text: str | None = None) -> list[Snippet]:
    """The comments of a Pulumi.<stack>.yaml, each line as prose (with its own inline spans) and as a command."""
    text = path.read_text() if text is None else text
    snippets = []
    for number, line in enumerate(text.splitlines(), 1):
        comment = line.split("#", 1)[1].strip() if "#" in line else ""
        if not comment:
            continue
        snippets.append(Snippet(path, number, comment, False))
        snippets += [Snippet(path, number, span, False) for span in INLINE.findall(comment)]
    return snippets


def all_snippets(root: Path = REPO) -> list[Snippet]:
    return ([s for page in pages(root) for s in markdown_snippets(page)]
            + [s for path in stack_files(root) for s in stack_file_snippets(path)])


# ------------------------------------------------------------------ commands within a snippet
# Where a shell command ends and another begins; what follows is checked as a command of its own.
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = re.compile(r"^\d*[<>]")


def shell_words(text: str) -> list[str]:
    """The words of a shell line without its comment; [] where it is not shell (unbalanced quotes)."""
    text = re.sub(r"(^|\s)#.*$", "", text)  # a trailing comment
    text = re.sub(r"^\s*\$\s+", "", text)  # a prompt
    text = text.replace("`", " ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = ""  # comments went above; a # inside a word (docs/aws.md#deploy) stays
        return list(lexer)
    except ValueError:
        return []


SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell line (split at &&, ||, ;, |, and each $(...) a command of its own,
    quoted or not), environment assignments dropped."""
    inner = SUBSTITUTION.findall(text)
    found = _simple_commands(SUBSTITUTION.sub("SUBSTITUTED", text))
    return found + [c for piece in inner for c in _simple_commands(piece)]


def _simple_commands(text: str) -> list[list[str]]:
    result, current = [], []
    for word in shell_words(text):
        if word in SEPARATORS or word in ("(", ")") or set(word) <= set(";&|()"):
            result.append(current)
            current = []
        else:
            current.append(word)
    result.append(current)
    cleaned = []
    for words in result:
        while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("eval", "nice", "time", "sudo", "exec")
                         or re.match(r"^-n$|^\d+$", words[0])):
            words = words[1:]
        if words:
            cleaned.append(words)
    return cleaned


# ------------------------------------------------------------------ headings and their anchors
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens (github/cmark-gfm)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(page: Path) -> list[str]:
    result, in_fence = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (match := HEADING.match(line)):
            result.append(match.group(2))
    return result


def anchors(page: Path) -> set[str]:
    """A page's anchors; repeated headings get -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for heading in headings(page):
        anchor = github_anchor(heading)
        if anchor in seen:
            seen[anchor] += 1
            anchor = f"{anchor}-{seen[anchor]}"
        else:
            seen[anchor] = 0
        result.add(anchor)
    return result
