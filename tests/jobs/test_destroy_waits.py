"""`pulumi destroy` with CLI jobs running (issue 29 item 16): the job owner is deleted before everything the
jobs use on every stack, the aws-p5 EFA stack included, its delete waits past every job's grace period,
and docs/jobs.md says what an unready Kueue does to that wait, naming the objects the vendored Kueue chart
really renders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.aws.p5_runs import p5_config, run_p5
from tests.infra.test_kueue_webhooks import _webhooks
from tests.jobs.test_destroy import GPU_POOLS, RUNS, USED_BY_JOBS, _depends_on, _owner, _type
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.kubernetes.job_owner import DELETE_TIMEOUT
from trainstack.infra.kubernetes.kueue import manager_config_yaml
from trainstack.infra.kubernetes.training_job import chart_default_values
from trainstack.jobs.releases import UNINSTALL_MARGIN_S

DOC = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"
STACKS = {**RUNS, "aws-p5": lambda: run_p5(p5_config({"trainstack:job": {"enabled": True, "queue": True}}))}


@pytest.fixture(scope="module", params=list(STACKS))
def stack(request):
    return request.param, STACKS[request.param]()


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, duration
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def test_destroy_waits_for_every_job_before_what_they_use(stack):
    name, result = stack
    after_owner = _depends_on(result, _owner(result).urn)
    kueue = [r for r in result.by_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart") == KUEUE_CHART.chart]
    pools = [r for r in result.registrations if _type(r) in GPU_POOLS and "gpu" in r.name]
    used = [r for r in result.registrations if _type(r) in USED_BY_JOBS]
    assert kueue and pools and used, name
    for registration in [*kueue, *pools, *used]:
        assert registration.urn in after_owner, f"{name}: {registration.urn} may go before the jobs"


def test_the_owners_delete_outlasts_every_jobs_checkpoint(stack):
    """The owner's delete ends only when the garbage collector has deleted every job and its pods: Pulumi
    must wait longer than any pool's pods take to write their SIGTERM checkpoint."""
    name, result = stack
    submission = result.exports["jobSubmission"]
    default = chart_default_values()["job"]["terminationGracePeriodSeconds"]
    for values in [submission["values"], *(pool["values"] for pool in submission["pools"].values())]:
        grace = (values.get("job") or {}).get("terminationGracePeriodSeconds", default)
        assert _seconds(DELETE_TIMEOUT) > grace + UNINSTALL_MARGIN_S, name


def test_the_docs_name_what_blocks_destroy_while_kueue_is_down():
    text = " ".join(DOC.read_text().split())
    hooks = {h["name"]: h for h in _webhooks({"managerConfig": {"controllerManagerConfigYaml":
                                                                manager_config_yaml("training")}})}
    job_hook = hooks["vjob.kb.io"]
    assert job_hook["failurePolicy"] == "Fail" and "UPDATE" in job_hook["rules"][0]["operations"]
    # The objects the fix names exist in the pinned chart under those names (release "kueue").
    chart = Path(__file__).resolve().parents[1] / "infra" / "kueue_chart_v0.19.2" / "templates" / "webhook"
    manifests = (chart / "manifests.yaml").read_text()
    assert "-validating-webhook-configuration" in manifests and "-mutating-webhook-configuration" in manifests
    section = text[text.index("**Kueue down during destroy.**"):]
    for needle in ("vjob.kb.io", "failurePolicy: Fail", "kubectl -n kueue-system rollout status "
                   "deployment/kueue-controller-manager", "kueue-validating-webhook-configuration",
                   "kueue-mutating-webhook-configuration", f"{_seconds(DELETE_TIMEOUT) // 60} minutes"):
        assert needle in section, needle
