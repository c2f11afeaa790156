"""UsageError: bad input to a job command; the CLI prints its one line and exits 2."""

from __future__ import annotations

import re

USAGE_EXIT_CODE = 2


def one_line(text: str) -> str:
    """`text` on one line: a newline typed into a name or a flag value shows as \\n, not as a second line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class UsageError(Exception):
    """One line naming the problem and the fix; raised before any call to the cluster."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(one_line(f"{problem}. Fix: {fix}"))


# What the exec credential plugin prints when a login has run out (aws sso, gcloud, gke-gcloud-auth-plugin);
# client-go puts the plugin's stderr before the tool's own line (k8s.io/client-go plugin/pkg/client/auth/exec).
_REASON = re.compile(r"expired|refresh failed|log ?in|credential|unauthori[sz]ed|forbidden|denied|token", re.I)
LOGIN_FIX = "log in again (aws sso login, or gcloud auth login), then retry"


def failure_detail(stderr: str, returncode: int) -> str:
    """The tool's last line and, when an earlier line says why (an expired login), that one too."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return f"exit code {returncode}"
    last = lines[-1]
    why = next((line for line in lines[:-1] if _REASON.search(line)), None)
    detail = f"{last} ({why})" if why else last
    if "getting credentials" in detail or (why and re.search(r"expired|refresh failed", why, re.I)):
        detail += f"; {LOGIN_FIX}"
    return one_line(detail)
