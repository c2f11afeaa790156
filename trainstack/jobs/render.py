"""Render the chart locally before any cluster call, so what the chart refuses is bad input (exit 2).

The chart's values schema and its `fail` checks (templates/_validate.tpl) are the last word on the
values; `helm install` would apply them only on the way to the cluster and exit 1. Helm's own engine
renders here: helm-python-sdk when it is installed (the tests' tests/workloads/chart.py), else
`helm template` (offline: no kubeconfig, no API server).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR
from trainstack.jobs.errors import UsageError

_FIX = "fix the flag it names (trainstack submit --help), or the stack's job values and pulumi up"


def _one_line(message: str) -> str:
    """Helm's message in one line: the first schema violation, or the text of the chart's `fail`."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    violations = [line.removeprefix("- ") for line in lines if line.startswith("- at ")]
    if violations:
        return violations[0]
    text = " ".join(lines).removeprefix("Error: ")
    # "execution error at (training-job/templates/_validate.tpl:11:4): release name ..." -> the chart's words
    return re.sub(r"^.*?execution error at \([^)]*\):\s*", "", text)


def _with_sdk(values: Mapping[str, Any], release: str, namespace: str) -> None:
    import helm_python  # optional: the dev extra installs it
    from helm_python.errors import HelmError

    try:
        helm_python.Chart.load(TRAINING_JOB_CHART_DIR).render(dict(values), name=release, namespace=namespace)
    except HelmError as error:
        raise UsageError(f"the chart refuses job {release}: {_one_line(str(error))}", _FIX) from None


def _with_helm(helm: str, values: Mapping[str, Any], release: str, namespace: str) -> None:
    done = subprocess.run([helm, "template", release, str(TRAINING_JOB_CHART_DIR), "--namespace", namespace,
                           "--values", "-"], input=json.dumps(values), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UsageError(f"the chart refuses job {release}: {_one_line(done.stderr)}", _FIX)


def check_renders(values: Mapping[str, Any], *, release: str, namespace: str) -> None:
    """UsageError (one line) when Helm's engine refuses these values; nothing when it renders them."""
    try:
        _with_sdk(values, release, namespace)
        return
    except ImportError:
        pass
    helm = shutil.which("helm")
    if helm is not None:  # without it, `submit` stops at `helm install` anyway
        _with_helm(helm, values, release, namespace)
