"""What the job commands read from the stack: `pulumi stack output --json --show-secrets`, or a file.

Outputs used (every stack exports them: trainstack/infra/aws/stack.py, trainstack/infra/gcp/stack.py via TrainingPlatform):
- `kubeconfig`: how helm and kubectl reach the cluster.
- `jobSubmission` (trainstack/infra/kubernetes/job_submission.py): namespace, bucket, GPUs per node, node type, queue,
  the stack's own job, the job identity's ServiceAccount annotations and the shared chart values;
  and every GPU pool with its own node type, size, queue and chart values (`submit --pool`).
- `estimatedHourlyUsd` (trainstack/infra/cost): the GPU pool's size at its maximum (`atMax.nodes`) and the
  price of one GPU node (`gpuNode.usdPerNode`, from trainstack/infra/cost/prices.yaml) for `list`'s cost column.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainstack.contract.deadline import NoAnswer, call_within
from trainstack.contract.paths import kind_of
from trainstack.infra.kubernetes.pod_requests import parse_quantity
from trainstack.jobs.bucket_names import check_bucket_uri
from trainstack.jobs.errors import UsageError, failure_detail

REQUIRED = ("kubeconfig", "jobSubmission", "estimatedHourlyUsd")
_SUBMISSION_KEYS = ("namespace", "bucketUri", "gpusPerNode", "nodeType", "values")
# The job's GPUs per pod, under its chart name and the name before the pod/node rename: `submit` sets it for
# each job, so a stack's copy is dropped. A stack deployed before the rename exports resources.gpusPerNode,
# which the chart would refuse beside the CLI's resources.gpusPerPod; newer stacks export neither
# (trainstack/infra/kubernetes/job_submission.py PER_JOB_RESOURCE_KEYS).
_PER_JOB_RESOURCE_KEYS = ("gpusPerPod", "gpusPerNode")


@dataclass(frozen=True)
class StackOutputs:
    kubeconfig: str
    namespace: str
    bucket_uri: str  # s3://<bucket> or gs://<bucket>
    gpus_per_node: int  # per GPU node of the job's pool
    node_type: str
    pool_max_nodes: int | None  # None: unknown (a pool chosen with --pool whose maximum is not exported)
    queue_name: str | None
    stack_job: str | None  # the release `pulumi up` owns (trainstack:job), when enabled
    service_account_annotations: Mapping[str, str]
    identity_service_account: str | None  # the ServiceAccount the cloud identity trusts
    service_account: str | None  # the stack's own ServiceAccount every job runs as (None: an older stack)
    queues: Mapping[str, Any]  # queue name -> {nodeType, gpusPerNode, maxNodes, quota}; {} from an older stack
    values: Mapping[str, Any]  # chart values every job on this stack shares
    usd_per_node: float | None  # per GPU node-hour; None where prices.yaml has no figure
    train_data: str | None = None  # the trainer's --data on this stack (None: a stack from before it was exported)
    # GPU pool name -> {nodeType, gpusPerNode, maxNodes, queueName, values}; {} from an older stack.
    pools: Mapping[str, Any] = field(default_factory=dict)


# A stack's outputs are a few KiB; the cap keeps a wrong --outputs (a data set, a device) from using up memory.
MAX_OUTPUTS_BYTES = 16 * 2**20


PULUMI_TIMEOUT_S = 120.0  # pulumi stack output reads the backend's checkpoint: seconds, unless it hangs
PIPE_WAIT_S = 30.0  # opening a pipe waits for its writer; <(pulumi stack output ...) has one within seconds


def _read_bounded(path: Path) -> bytes:
    """At most MAX_OUTPUTS_BYTES + 1 bytes of `path`; NoAnswer when a pipe's writer never comes."""

    def read() -> bytes:
        with path.open("rb") as f:
            return f.read(MAX_OUTPUTS_BYTES + 1)

    return call_within(PIPE_WAIT_S, read, "outputs-read")


def read_outputs(stack: str | None, outputs_file: str | None) -> dict[str, Any]:
    """The raw outputs, from a file (`pulumi stack output --json --show-secrets > FILE`) or from Pulumi."""
    if outputs_file is not None:
        path = Path(outputs_file)
        fix = "pulumi stack output --json --show-secrets --stack <stack> > outputs.json"
        # /dev/zero would be read until memory runs out; a pipe is fine (--outputs <(pulumi stack output ...)
        # keeps the secrets off disk), and the read below is bounded.
        kind = kind_of(path)
        if kind and not kind.startswith("a FIFO"):
            raise UsageError(f"--outputs {outputs_file} is {kind}, not a file", fix)
        try:
            data = _read_bounded(path)
        except NoAnswer:
            raise UsageError(f"--outputs {outputs_file} is a pipe nothing writes to (waited {PIPE_WAIT_S:.0f}s)",
                             "pass the file, or --outputs <(pulumi stack output --json --show-secrets)") from None
        except OSError as error:
            raise UsageError(f"--outputs {outputs_file}: cannot read it ({error.strerror})", fix) from None
        if len(data) > MAX_OUTPUTS_BYTES:
            raise UsageError(f"--outputs {outputs_file} is over {MAX_OUTPUTS_BYTES // 2**20} MiB, far more than a "
                             "stack's outputs; is it the right file?", fix)
        try:
            # JSON is UTF-8 (RFC 8259 section 8.1); PowerShell's `>` writes UTF-16 with a byte-order mark.
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UsageError(f"--outputs {outputs_file}: not UTF-8 text (PowerShell's > writes UTF-16)",
                             "save it with pulumi stack output --json --show-secrets | Out-File -Encoding utf8 "
                             "outputs.json (or from a POSIX shell)") from None
        where = f"--outputs {outputs_file}"
    else:
        if stack is None:
            raise UsageError("no stack given", "add --stack <stack> (aws, aws-p5, gcp, gcp-a3, gcp-a4) or --outputs FILE")
        command = ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack]
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                                  timeout=PULUMI_TIMEOUT_S)
        except FileNotFoundError:
            raise UsageError("the pulumi CLI is not on PATH",
                             "install it (https://www.pulumi.com/docs/install/) or pass --outputs FILE") from None
        except OSError as error:  # on PATH, but the system cannot start it
            raise UsageError(f"the pulumi CLI cannot run ({error.strerror or error})",
                             "install it again (https://www.pulumi.com/docs/install/) or pass --outputs FILE") from None
        except subprocess.TimeoutExpired:
            raise UsageError(f"pulumi stack output --stack {stack} did not answer within {PULUMI_TIMEOUT_S:.0f}s "
                             "(its backend unreachable, or a login prompt waiting)",
                             "check pulumi whoami and the network, or pass --outputs FILE") from None
        if done.returncode != 0:
            detail = failure_detail(done.stderr, done.returncode)
            raise UsageError(f"pulumi stack output --stack {stack} failed: {detail}",
                             "run it from the project directory, logged in to the stack's backend")
        text = done.stdout
        where = f"stack {stack}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not JSON ({error.msg} at line {error.lineno})",
                         "write it with pulumi stack output --json --show-secrets") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested deeper than any stack's outputs",
                         "write it with pulumi stack output --json --show-secrets") from None
    except ValueError:  # a number past Python's 4300-digit limit: no stack has one
        raise UsageError(f"{where}: JSON with a number no stack output holds",
                         "write it with pulumi stack output --json --show-secrets") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: expected an object of outputs, got {type(raw).__name__}",
                         "write it with pulumi stack output --json --show-secrets")
    return raw


# A namespace's name: an RFC 1123 label (k8s.io/apimachinery pkg/util/validation IsDNS1123Label).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _bad(field: str, expected: str, got: Any) -> UsageError:
    return UsageError(f"the stack output {field} is {got!r}, expected {expected}",
                      "save the outputs again with pulumi stack output --json --show-secrets (or pulumi up the "
                      "stack with this version of trainstack)")


def _shared_values(values: dict[str, Any]) -> dict[str, Any]:
    """A stack's exported chart values without the per-job GPU count an older stack still exports."""
    resources = values.get("resources")
    if not isinstance(resources, dict):
        return values
    return {**values, "resources": {key: value for key, value in resources.items()
                                    if key not in _PER_JOB_RESOURCE_KEYS}}


def _text(value: Any, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise _bad(field, "a non-empty string", value)
    return value


def _positive_int(value: Any, field: str) -> int:
    # An int, or an int written as a string; never a bool, a fraction or 0.
    number = value if isinstance(value, int) and not isinstance(value, bool) else (
        int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()) else None)
    if number is None or number < 1:
        raise _bad(field, "a whole number of at least 1", value)
    return number


def _string_map(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(field, "an object of strings", value)
    return dict(value)


def _queues(value: Any) -> dict[str, Any]:
    """jobSubmission.queues: {queue name: {..., quota: {resource: quantity}}}; absent from an older stack."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(q, dict) and isinstance(q.get("quota"), dict)
            and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in q["quota"].values())
            for q in value.values()):
        raise _bad("jobSubmission.queues", "an object of queues, each with a quota of quantities", value)
    for name, queue in value.items():
        for resource, quantity in queue["quota"].items():
            try:
                parse_quantity(quantity)
            except ValueError:
                raise _bad(f"jobSubmission.queues.{name}.quota.{resource}", "a Kubernetes quantity (e.g. 64, 256Gi)",
                           quantity) from None
    return dict(value)


def _pools(value: Any) -> dict[str, Any]:
    """jobSubmission.pools: {pool name: {nodeType, gpusPerNode, maxNodes, queueName, values}}; absent from an
    older stack."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad("jobSubmission.pools", "an object of GPU pools", value)
    pools = {}
    for name, pool in value.items():
        field_name = f"jobSubmission.pools.{name}"
        if not isinstance(pool, dict) or not isinstance(pool.get("values"), dict):
            raise _bad(field_name, "a GPU pool with its chart values", pool)
        max_nodes = pool.get("maxNodes")
        pools[name] = {
            "nodeType": _text(pool.get("nodeType"), f"{field_name}.nodeType"),
            "gpusPerNode": _positive_int(pool.get("gpusPerNode"), f"{field_name}.gpusPerNode"),
            "maxNodes": None if max_nodes is None else _positive_int(max_nodes, f"{field_name}.maxNodes"),
            "queueName": _text(pool.get("queueName"), f"{field_name}.queueName", optional=True),
            "values": _shared_values(pool["values"]),
            "unavailable": _text(pool.get("unavailable"), f"{field_name}.unavailable", optional=True),
        }
    return pools


def on_pool(outputs: StackOutputs, pool: str) -> StackOutputs:
    """`outputs` as a job on GPU pool `pool` sees them: that pool's node type, size, queue and chart values."""
    if not outputs.pools:
        raise UsageError(f"--pool {pool}: this stack's outputs list no GPU pools (saved before --pool existed)",
                         "pulumi up the stack with this version of trainstack and save its outputs again, or drop "
                         "--pool to use the job's pool")
    if pool not in outputs.pools:
        raise UsageError(f"--pool {pool}: no such GPU pool on this stack (pools: {', '.join(sorted(outputs.pools))})",
                         "give one of those, or add the pool to trainstack:gpuPools and pulumi up")
    chosen = outputs.pools[pool]
    if chosen["unavailable"]:
        raise UsageError(f"--pool {pool}: {chosen['unavailable']}",
                         f"pick another pool, or make it the job's pool (GKE: pulumi config set trainstack:jobPool "
                         f"{pool} && pulumi up)")
    # An unknown maximum: the job's own pool's is the stack's estimate (atMax.nodes); another's is not checked.
    max_nodes = chosen["maxNodes"] if chosen["maxNodes"] is not None else (
        outputs.pool_max_nodes if chosen["values"] == outputs.values else None)
    return replace(outputs, gpus_per_node=chosen["gpusPerNode"], node_type=chosen["nodeType"],
                   pool_max_nodes=max_nodes, queue_name=chosen["queueName"], values=chosen["values"])


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
    if not isinstance(kubeconfig, (str, dict)):
        raise _bad("kubeconfig", "a kubeconfig (text or object)", kubeconfig)
    hourly = raw["estimatedHourlyUsd"]
    try:
        pool_max = _positive_int(hourly["atMax"]["nodes"], "estimatedHourlyUsd.atMax.nodes")
    except (KeyError, TypeError):
        raise UsageError("the stack output estimatedHourlyUsd has no atMax.nodes (the GPU pool's maximum)",
                         "pulumi up the stack with this version of trainstack, then retry") from None
    gpu_node = hourly.get("gpuNode") if isinstance(hourly, dict) else None
    usd = gpu_node.get("usdPerNode") if isinstance(gpu_node, dict) else None
    if usd is not None and (isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd)
                            or usd < 0):
        raise _bad("estimatedHourlyUsd.gpuNode.usdPerNode", "a price in USD (a number) or null", usd)
    bucket = _text(submission["bucketUri"], "jobSubmission.bucketUri")
    problem = check_bucket_uri(bucket)
    if problem:
        raise _bad("jobSubmission.bucketUri", problem, bucket)
    namespace = _text(submission["namespace"], "jobSubmission.namespace")
    if not _DNS_LABEL.fullmatch(namespace):
        raise _bad("jobSubmission.namespace", "a namespace name (lowercase letters, digits and -, at most 63)",
                   namespace)
    values = submission["values"]
    if not isinstance(values, dict):
        raise _bad("jobSubmission.values", "an object of chart values", values)
    return StackOutputs(
        kubeconfig=kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig),
        namespace=namespace,
        bucket_uri=bucket.rstrip("/"),
        gpus_per_node=_positive_int(submission["gpusPerNode"], "jobSubmission.gpusPerNode"),
        node_type=_text(submission["nodeType"], "jobSubmission.nodeType"),
        pool_max_nodes=pool_max,
        queue_name=_text(submission.get("queueName"), "jobSubmission.queueName", optional=True),
        stack_job=_text(submission.get("stackJob"), "jobSubmission.stackJob", optional=True),
        service_account_annotations=_string_map(submission.get("serviceAccountAnnotations"),
                                                "jobSubmission.serviceAccountAnnotations"),
        identity_service_account=_text(submission.get("identityServiceAccount"),
                                       "jobSubmission.identityServiceAccount", optional=True),
        service_account=_text(submission.get("serviceAccount"), "jobSubmission.serviceAccount", optional=True),
        queues=_queues(submission.get("queues")),
        values=_shared_values(values),
        usd_per_node=float(usd) if usd is not None else None,
        train_data=_text(submission.get("trainData"), "jobSubmission.trainData", optional=True),
        pools=_pools(submission.get("pools")),
    )


def load(stack: str | None, outputs_file: str | None) -> StackOutputs:
    return parse_outputs(read_outputs(stack, outputs_file))
