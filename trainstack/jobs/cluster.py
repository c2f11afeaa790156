"""The cluster through the tools a Kubernetes user has: `helm` and `kubectl`, with the stack's kubeconfig.

The kubeconfig is written to a private temporary file only when the first command runs (after every
check has passed) and removed when the command ends.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from trainstack.jobs.errors import UsageError
from trainstack.jobs.stack_outputs import StackOutputs

# Where each tool comes from, for the one line that says it is missing.
INSTALL = {"helm": "https://helm.sh/docs/intro/install/", "kubectl": "https://kubernetes.io/docs/tasks/tools/"}


class CommandFailed(Exception):
    """A helm or kubectl call the cluster refused (not bad input: exit 1 with the tool's message)."""


class Cluster:
    def __init__(self, outputs: StackOutputs) -> None:
        self.outputs = outputs
        self.namespace = outputs.namespace
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            self._dir.cleanup()

    def _kubeconfig(self) -> str:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="trainstack-")
            path = Path(self._dir.name) / "kubeconfig"
            path.touch(mode=0o600)  # it holds the cluster's credentials
            path.write_text(self.outputs.kubeconfig)
        return str(Path(self._dir.name) / "kubeconfig")

    def _argv(self, tool: str, args: list[str]) -> list[str]:
        binary = shutil.which(tool)
        if binary is None:
            raise UsageError(f"{tool} is not on PATH", f"install it ({INSTALL[tool]})")
        return [binary, *args, "--kubeconfig", self._kubeconfig(), "--namespace", self.namespace]

    def run(self, tool: str, args: list[str], stdin: str | None = None) -> str:
        done = subprocess.run(self._argv(tool, args), input=stdin, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            detail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise CommandFailed(f"{tool} {args[0]} failed: {detail}")
        return done.stdout

    def stream(self, tool: str, args: list[str]) -> int:
        """Run with the terminal's output (logs -f): returns the tool's exit code."""
        return subprocess.run(self._argv(tool, args), check=False).returncode

    def json(self, tool: str, args: list[str]) -> Any:
        return json.loads(self.run(tool, args) or "null")

