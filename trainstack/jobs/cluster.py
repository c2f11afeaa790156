"""The cluster through the tools a Kubernetes user has: `helm` and `kubectl`, with the stack's kubeconfig.

The kubeconfig is written to a private temporary file only when the first command runs (after every
check has passed) and removed when the command ends. Every call is bounded: kubectl's own
`--request-timeout` for each request it makes, and a deadline on the process for both tools (helm
has no per-request flag), so a cluster that never answers is one line naming the tool, not a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainstack.jobs.errors import UsageError, failure_detail, one_line
from trainstack.jobs.stack_outputs import StackOutputs

# Where each tool comes from, for the one line that says it is missing.
INSTALL = {"helm": "https://helm.sh/docs/intro/install/", "kubectl": "https://kubernetes.io/docs/tasks/tools/"}

# kubectl's client timeout for each request (kubectl --request-timeout, pkg/cmd/util/kubectl_match_version.go:
# a duration; 0 means none, its default). The process deadline is longer: a kubectl get makes a few requests
# (discovery, then the list) and the exec credential plugin may take a few seconds for a token.
KUBECTL_REQUEST_TIMEOUT_S = 60
CALL_TIMEOUT_S = 180


class CommandFailed(Exception):
    """A helm or kubectl call the cluster refused (not bad input: exit 1 with the tool's message)."""


# helm reads these from the environment over --kubeconfig (helm pkg/cli/environment.go EnvSettings):
# HELM_KUBEAPISERVER and HELM_KUBETOKEN would point `cancel` at another cluster's jobs. The stack's
# releases are kept as Secrets (helm's default driver, as Pulumi's Release keeps them).
HELM_OVERRIDES = ("HELM_KUBE", "HELM_DRIVER", "HELM_NAMESPACE")


def tool_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment helm runs with: the caller's, less what would aim it at another cluster or store."""
    env = {k: v for k, v in environ.items() if not k.startswith(HELM_OVERRIDES)}
    env["HELM_DRIVER"] = "secret"
    return env


def cannot_run(tool: str, error: OSError) -> UsageError:
    """A tool on PATH that the system cannot start (a bad interpreter line, another CPU's binary, no
    permission)."""
    return UsageError(f"{tool} at {shutil.which(tool) or tool} cannot run ({error.strerror or error})",
                      f"install it again ({INSTALL.get(tool, tool)})")


class Cluster:
    def __init__(self, outputs: StackOutputs, *, timeout_s: float | None = None) -> None:
        self.outputs = outputs
        self.namespace = outputs.namespace
        self.timeout_s = timeout_s or CALL_TIMEOUT_S
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            self._dir.cleanup()

    def _kubeconfig(self) -> str:
        if self._dir is None:
            try:
                self._dir = tempfile.TemporaryDirectory(prefix="trainstack-")
                path = Path(self._dir.name) / "kubeconfig"
                path.touch(mode=0o600)  # it holds the cluster's credentials
                path.write_text(self.outputs.kubeconfig)
            except OSError as error:
                raise UsageError(f"cannot write the stack's kubeconfig under {tempfile.gettempdir()} "
                                 f"({error.strerror or error})", "set TMPDIR to a writable directory") from None
        return str(Path(self._dir.name) / "kubeconfig")

    def _env(self, tool: str) -> dict[str, str]:
        return tool_environment(os.environ) if tool == "helm" else dict(os.environ)

    def _argv(self, tool: str, args: list[str], *, bounded: bool = True) -> list[str]:
        binary = shutil.which(tool)
        if binary is None:
            raise UsageError(f"{tool} is not on PATH", f"install it ({INSTALL[tool]})")
        limit = [f"--request-timeout={KUBECTL_REQUEST_TIMEOUT_S}s"] if tool == "kubectl" and bounded else []
        return [binary, *args, *limit, "--kubeconfig", self._kubeconfig(), "--namespace", self.namespace]

    def run(self, tool: str, args: list[str], stdin: str | None = None, *, timeout_s: float | None = None) -> str:
        limit = timeout_s or self.timeout_s
        try:
            # No terminal input: a credential plugin that wants to prompt fails instead of waiting.
            given = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
            done = subprocess.run(self._argv(tool, args), **given, capture_output=True, text=True, check=False,
                                  timeout=limit, env=self._env(tool))
        except subprocess.TimeoutExpired:
            raise CommandFailed(f"{tool} {args[0]} did not answer within {limit:.0f}s (is the cluster reachable? "
                                "retry, or check with kubectl get nodes)") from None
        except OSError as error:
            raise cannot_run(tool, error) from None
        if done.returncode != 0:
            raise CommandFailed(f"{tool} {args[0]} failed: {failure_detail(done.stderr, done.returncode)}")
        return done.stdout

    def stream(self, tool: str, args: list[str], *, follow: bool) -> int:
        """Run with the terminal's output (logs): returns the tool's exit code. Bounded like every other call,
        except a follow, which lasts as long as the user wants (kubectl's --request-timeout would cut it)."""
        try:
            return subprocess.run(self._argv(tool, args, bounded=not follow), stdin=subprocess.DEVNULL, check=False,
                                  timeout=None if follow else self.timeout_s, env=self._env(tool)).returncode
        except subprocess.TimeoutExpired:
            raise CommandFailed(f"{tool} {args[0]} did not finish within {self.timeout_s:.0f}s (is the cluster "
                                "reachable? retry, or follow the logs with -f)") from None
        except OSError as error:
            raise cannot_run(tool, error) from None

    def json(self, tool: str, args: list[str], *, expect: type = dict) -> Any:
        """The tool's JSON answer, checked to be `expect` (a list or an object); anything else is one line."""
        text = self.run(tool, args)
        what = f"{tool} {args[0]}"
        try:
            answer = json.loads(text) if text.strip() else expect()
        except json.JSONDecodeError as error:
            raise CommandFailed(f"{what} answered with something that is not JSON ({error.msg} at line "
                                f"{error.lineno}): is {tool} the real {tool}, and the whole answer there?") from None
        except ValueError as error:  # a number past Python's 4300-digit limit, say
            raise CommandFailed(f"{what} answered with JSON no {tool} sends ({one_line(str(error))[:120]})") from None
        except RecursionError:
            raise CommandFailed(f"{what} answered with JSON nested too deep to read") from None
        if answer is None:
            return expect()
        if not isinstance(answer, expect):
            raise CommandFailed(f"{what} answered with a JSON {type(answer).__name__}, expected "
                                f"{'a list' if expect is list else 'an object'}")
        return answer

    def items(self, args: list[str]) -> list[dict[str, Any]]:
        """`kubectl get ... --output json`'s items, each an object with metadata (or one line)."""
        answer = self.json("kubectl", args)
        items = answer.get("items", [])
        if not isinstance(items, list) or not all(
                isinstance(i, dict) and isinstance(i.get("metadata"), dict) for i in items):
            raise CommandFailed(f"kubectl get {args[1]} answered with items that are not Kubernetes objects")
        return items
