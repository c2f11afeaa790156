"""Read a Dockerfile and a .dockerignore the way Docker does, for static tests (no engine here)."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1] if " " in text else "") for text in logical]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's pattern syntax: `*` and `?` stay within one path segment, `**` crosses them."""
    regex, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] == "*":
            regex, i = regex + "[^/]*", i + 1
        elif pattern[i] == "?":
            regex, i = regex + "[^/]", i + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    return re.compile(regex)


def is_ignored(path: str, dockerignore: Path) -> bool:
    """Whether the build context leaves out `path` (relative to the context root).

    As in Docker: a pattern matches the path or any of its parent folders, `!` re-includes, and
    the last matching line wins.
    """
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for line in dockerignore.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = _pattern_regex(posixpath.normpath(line.lstrip("!")).lstrip("/"))
        if any(pattern.fullmatch(candidate) for candidate in candidates):
            ignored = not negated
    return ignored
