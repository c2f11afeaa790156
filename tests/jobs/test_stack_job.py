"""The stack's own job (trainstack:job) and CLI jobs share one rendering of the cluster-side values."""

from __future__ import annotations

import json
import re

import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3
from tests.workloads.chart import one, render, trainer
from trainstack.infra.config.train_args import train_keys
from trainstack.infra.kubernetes.job_submission import PER_JOB_KEYS, PER_JOB_RESOURCE_KEYS

RELEASE = "kubernetes:helm.sh/v3:Release"
RUNS = {
    "aws": lambda: aws_runs.run_main(aws_runs.config_with({"trainstack:job": {"enabled": True, "queue": True}})),
    "gcp": lambda: gcp_runs.run_main(gcp_runs.config_with(gcp_runs.JOB_ENABLED)),
    "gcp-a3": lambda: test_a3.run(),
}


@pytest.mark.parametrize("stack", RUNS)
def test_the_stacks_job_has_the_values_a_cli_job_gets(stack):
    result = RUNS[stack]()
    submission = result.exports["jobSubmission"]
    job_name = result.exports["jobName"]
    assert submission["stackJob"] == job_name
    [release] = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == job_name]
    values = json.loads(json.dumps(release.inputs["values"]))
    shared = {key: value for key, value in values.items() if key not in PER_JOB_KEYS}
    shared["resources"] = {key: value for key, value in shared["resources"].items() if key not in PER_JOB_RESOURCE_KEYS}
    assert shared == submission["values"]
    # What the CLI sets for each job instead: one process per GPU of the pool's node.
    assert values["resources"]["gpusPerPod"] == submission["gpusPerNode"]
    assert values["serviceAccount"] == {"create": False, "name": submission["serviceAccount"], "annotations": {}}


def _fetch_data_destination(objects) -> str | None:
    job = one(objects, "Job")
    for container in job["spec"]["template"]["spec"].get("initContainers", []):
        if container["name"] == "fetch-data":
            return container["command"][-1]  # `aws s3 sync SRC DST` / `gcloud storage rsync --recursive SRC DST`
    return None


def _as_flags(train: dict) -> list[str]:
    """The stack job's train values as the flags a user would type after --."""
    keys = train_keys()
    flags = [word for key, value in train.items() if key not in ("data", "out", "extraArgs") and value not in (None, "")
             for word in (keys[key].flag, str(value))]
    extra = list(train.get("extraArgs", []))
    if "--snapshot-uri" in extra:
        at = extra.index("--snapshot-uri")
        del extra[at:at + 2]
    return [*flags, *extra]


@pytest.mark.parametrize("stack", RUNS)
def test_a_cli_job_trains_like_the_stacks_job(stack, cluster, cli, tmp_path):
    result = RUNS[stack]()
    exports = json.loads(json.dumps(result.exports))
    job_name = exports["jobName"]
    [release] = [r for r in result.by_type(RELEASE) if r.inputs.get("name") == job_name]
    stack_values = json.loads(json.dumps(release.inputs["values"]))
    stack_objects = render(stack_values, release=job_name, namespace=exports["jobSubmission"]["namespace"])

    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(exports))
    pods = stack_values["job"]["pods"]
    code, _, err = cli("submit", "exp", "--outputs", str(path), "--pods", f"{pods['min']}:{pods['max']}",
                       "--", *_as_flags(stack_values["train"]))
    assert code == 0, err
    [install] = [c for c in cluster.calls if c["argv"][0] == "install"]
    cli_objects = render(json.loads(install["stdin"]), release="exp", namespace=exports["jobSubmission"]["namespace"])

    # The data set is read where the job's own init container copied it.
    destination = _fetch_data_destination(cli_objects)
    args = trainer(cli_objects)["args"]
    assert destination is not None and args[args.index("--data") + 1] == destination
    # Every trainer flag equals the stack job's, apart from the ones derived from the job's name.
    named = trainer(stack_objects)["args"]
    own_name = re.compile(rf"(?<![a-z0-9]){re.escape(job_name)}(?![a-z0-9])")
    renamed = [own_name.sub("exp", word) if "/runs/" in word or word.startswith("--rdzv") else word for word in named]
    assert args == renamed
