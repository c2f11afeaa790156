"""What the job commands read from the stack: `pulumi stack output --json --show-secrets`, or a file.

Outputs used (every stack exports them: infra/aws/stack.py, infra/gcp/stack.py via TrainingPlatform):
- `kubeconfig`: how helm and kubectl reach the cluster.
- `jobSubmission` (infra/job_submission.py): namespace, bucket, GPUs per node, node type, queue,
  the stack's own job, the job identity's ServiceAccount annotations and the shared chart values.
- `estimatedHourlyUsd` (infra/cost): the GPU pool's size at its maximum (`atMax.nodes`) and the
  price of one GPU node (`gpuNode.usdPerNode`, from infra/cost/prices.yaml) for `list`'s cost column.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainstack.jobs.errors import UsageError

REQUIRED = ("kubeconfig", "jobSubmission", "estimatedHourlyUsd")
_SUBMISSION_KEYS = ("namespace", "bucketUri", "gpusPerNode", "nodeType", "values")


@dataclass(frozen=True)
class StackOutputs:
    kubeconfig: str
    namespace: str
    bucket_uri: str  # s3://<bucket> or gs://<bucket>
    gpus_per_node: int  # per GPU node of the job's pool
    node_type: str
    pool_max_nodes: int
    queue_name: str | None
    stack_job: str | None  # the release `pulumi up` owns (trainstack:job), when enabled
    service_account_annotations: Mapping[str, str]
    identity_service_account: str | None  # the ServiceAccount the cloud identity trusts
    values: Mapping[str, Any]  # chart values every job on this stack shares
    usd_per_node: float | None  # per GPU node-hour; None where prices.yaml has no figure


def read_outputs(stack: str | None, outputs_file: str | None) -> dict[str, Any]:
    """The raw outputs, from a file (`pulumi stack output --json --show-secrets > FILE`) or from Pulumi."""
    if outputs_file is not None:
        path = Path(outputs_file)
        try:
            text = path.read_text()
        except OSError as error:
            raise UsageError(f"--outputs {outputs_file}: cannot read it ({error.strerror})",
                             "pulumi stack output --json --show-secrets --stack <stack> > outputs.json") from None
        where = f"--outputs {outputs_file}"
    else:
        if stack is None:
            raise UsageError("no stack given", "add --stack <aws|gcp|gcp-a3> (or --outputs FILE)")
        command = ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise UsageError("the pulumi CLI is not on PATH",
                             "install it (https://www.pulumi.com/docs/install/) or pass --outputs FILE") from None
        if done.returncode != 0:
            detail = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise UsageError(f"pulumi stack output --stack {stack} failed: {detail}",
                             "run it from the project directory, logged in to the stack's backend")
        text = done.stdout
        where = f"stack {stack}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not JSON ({error.msg} at line {error.lineno})",
                         "write it with pulumi stack output --json --show-secrets") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: expected an object of outputs, got {type(raw).__name__}",
                         "write it with pulumi stack output --json --show-secrets")
    return raw


def parse_outputs(raw: Mapping[str, Any]) -> StackOutputs:
    missing = [name for name in REQUIRED if name not in raw]
    if missing:
        raise UsageError(f"the stack's outputs lack {', '.join(missing)}",
                         "pulumi up the stack with this version of trainstack (it exports them), then retry")
    submission = raw["jobSubmission"]
    if not isinstance(submission, dict) or any(k not in submission for k in _SUBMISSION_KEYS):
        lacking = [k for k in _SUBMISSION_KEYS if not isinstance(submission, dict) or k not in submission]
        raise UsageError(f"the stack output jobSubmission lacks {', '.join(lacking)}",
                         "pulumi up the stack with this version of trainstack, then retry")
    kubeconfig = raw["kubeconfig"]
    if kubeconfig == "[secret]" or not kubeconfig:
        raise UsageError("the stack output kubeconfig is hidden or empty",
                         "read the outputs with --show-secrets")
    hourly = raw["estimatedHourlyUsd"]
    try:
        pool_max = int(hourly["atMax"]["nodes"])
    except (KeyError, TypeError, ValueError):
        raise UsageError("the stack output estimatedHourlyUsd has no atMax.nodes (the GPU pool's maximum)",
                         "pulumi up the stack with this version of trainstack, then retry") from None
    usd = (hourly.get("gpuNode") or {}).get("usdPerNode")
    return StackOutputs(
        kubeconfig=kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig),
        namespace=submission["namespace"],
        bucket_uri=str(submission["bucketUri"]).rstrip("/"),
        gpus_per_node=int(submission["gpusPerNode"]),
        node_type=str(submission["nodeType"]),
        pool_max_nodes=pool_max,
        queue_name=submission.get("queueName"),
        stack_job=submission.get("stackJob"),
        service_account_annotations=dict(submission.get("serviceAccountAnnotations") or {}),
        identity_service_account=submission.get("identityServiceAccount"),
        values=submission["values"],
        usd_per_node=float(usd) if usd is not None else None,
    )


def load(stack: str | None, outputs_file: str | None) -> StackOutputs:
    return parse_outputs(read_outputs(stack, outputs_file))
