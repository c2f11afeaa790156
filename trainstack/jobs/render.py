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
from trainstack.jobs.cluster import cannot_run
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


def _with_sdk(values: Mapping[str, Any], release: str, namespace: str) -> str:
    import helm_python  # optional: the dev extra installs it
    from helm_python.errors import HelmError

    try:
        rendered = helm_python.Chart.load(TRAINING_JOB_CHART_DIR).render(dict(values), name=release,
                                                                         namespace=namespace)
    except HelmError as error:
        raise UsageError(f"the chart refuses job {release}: {_one_line(str(error))}", _FIX) from None
    return "\n---\n".join(text for path, text in sorted(rendered.items()) if not path.endswith("NOTES.txt"))


TEMPLATE_TIMEOUT_S = 60  # helm template is offline: it reads the chart and renders, no cluster


def _with_helm(helm: str, values: Mapping[str, Any], release: str, namespace: str) -> str:
    try:
        done = subprocess.run([helm, "template", release, str(TRAINING_JOB_CHART_DIR), "--namespace", namespace,
                               "--values", "-"], input=json.dumps(values), capture_output=True, text=True,
                              check=False, timeout=TEMPLATE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"helm template did not answer within {TEMPLATE_TIMEOUT_S}s (it needs no cluster)",
                         "check that helm runs (helm version)") from None
    except OSError as error:  # on PATH, but the system cannot start it
        raise cannot_run("helm", error) from None
    if done.returncode != 0:
        raise UsageError(f"the chart refuses job {release}: {_one_line(done.stderr)}", _FIX)
    return done.stdout


def _job(manifest: str) -> dict[str, Any] | None:
    """The Job among the rendered objects (None when the text holds none, e.g. a fake helm's)."""
    import yaml  # pulumi's dependency, so there with the infra extra

    try:
        objects = [doc for doc in yaml.safe_load_all(manifest) if isinstance(doc, dict)]
    except yaml.YAMLError:
        return None
    return next((obj for obj in objects if obj.get("kind") == "Job"), None)


def check_renders(values: Mapping[str, Any], *, release: str, namespace: str) -> dict[str, Any] | None:
    """UsageError (one line) when Helm's engine refuses these values; else the Job it renders (None when
    neither the SDK nor helm can render here)."""
    try:
        return _job(_with_sdk(values, release, namespace))
    except ImportError:
        pass
    helm = shutil.which("helm")
    if helm is not None:  # without it, `submit` stops at `helm install` anyway
        return _job(_with_helm(helm, values, release, namespace))
    return None
