"""ConfigError: the one kind of error a bad stack config raises, in every cloud."""

from __future__ import annotations

import pulumi

NAMESPACE = "trainstack"  # the Pulumi config namespace of every key this program reads


class ConfigError(pulumi.RunError):
    """A config value that cannot work; the message is one line: `<key>: <problem>. Fix: <how>`."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}. Fix: {fix}")
        self.key = key


def set_hint(key: str, example: str) -> str:
    """The command that sets `key` (a full `namespace:path` key) to `example`."""
    return f"pulumi config set --path '{key}' {example}"


class InputError(pulumi.RunError):
    """A component input that cannot work: one line, `<property path>: <problem>. Fix: <how>`."""
