"""The kubectl commands that follow a training job, exported as stack outputs on every cloud.

`pulumi stack output logsCommand` prints the command with the names filled in; each cloud adds how to
get credentials and how to upload the data set.
"""

from __future__ import annotations

import json
import shlex

import pulumi

from trainstack.infra.config import JobConfig
from trainstack.infra.kubernetes.platform import shared_claim_name
from trainstack.infra.kubernetes.training_job import chart_default_values

TRAINER_SELECTOR = "app.kubernetes.io/instance={job},app.kubernetes.io/component=trainer"
TENSORBOARD_PORT = 6006  # the chart's tensorboard.port
# Where docs/training.md has `python -m training prepare --out` write the data set before uploading it.
LOCAL_DATA_DIR = "data/prepared"
# Not uploaded: prepare's datasets cache (several times the shards' size) and an unfinished meta.json.
UPLOAD_EXCLUDES = (".cache/*", ".meta.json.tmp")


def kubectl_commands(*, namespace: str, job_name: str, pods_max: int, tensorboard: bool
                     ) -> dict[str, pulumi.Input[str]]:
    selector = TRAINER_SELECTOR.format(job=job_name)
    commands: dict[str, pulumi.Input[str]] = {
        "statusCommand": f"kubectl get job/{job_name} -n {namespace} -o wide && "
                         f"kubectl get pods -n {namespace} -l {selector} -o wide",
        "eventsCommand": f"kubectl describe job/{job_name} -n {namespace} && "
                         f"kubectl get events -n {namespace} --sort-by=.lastTimestamp",
        # One stream per pod, each line prefixed with its pod: more pods than kubectl's default 5.
        "logsCommand": f"kubectl logs -f -n {namespace} -l {selector} -c trainer --prefix "
                       f"--max-log-requests={max(pods_max, 5)}",
        # Removes the release (Job, pods, TensorBoard) through Pulumi, so its state stays true; the
        # shared volume with the run directory stays, and the GPU nodes scale back to zero.
        "cancelCommand": "pulumi config set --path trainstack:job.enabled false && pulumi up",
    }
    if tensorboard:
        # No LoadBalancer: nothing outside Pulumi's knowledge may block `pulumi destroy`.
        commands["tensorboardCommand"] = (f"kubectl port-forward -n {namespace} svc/{job_name}-tensorboard "
                                          f"{TENSORBOARD_PORT}:{TENSORBOARD_PORT}  # then open "
                                          f"http://localhost:{TENSORBOARD_PORT}")
    return commands


# A throwaway pod that mounts the shared volume as the trainer's user: the run's files can be copied
# out with the job gone (job.enabled false) and TensorBoard off.
RESULTS_POD = "trainstack-results"
RESULTS_IMAGE = "busybox:1.37.0"  # kubectl cp needs tar in the pod; busybox has it
LOCAL_RESULTS_DIR = "results"


def copy_results_command(job: JobConfig) -> str:
    """Copies RUN_DIR (checkpoints, TensorBoard events, export) from the shared volume to ./results/<job>."""
    chart = chart_default_values()
    namespace, job_name, mount_path = job.namespace, job.name, chart["storage"]["mountPath"].rstrip("/")
    claim_name, run_as = shared_claim_name(job), chart["securityContext"]["runAsUser"]
    overrides = json.dumps({"spec": {
        "securityContext": {"runAsUser": run_as, "runAsGroup": run_as, "runAsNonRoot": True},
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}}],
        "containers": [{"name": RESULTS_POD, "image": RESULTS_IMAGE, "command": ["sleep", "3600"],
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "shared", "mountPath": mount_path, "readOnly": True}]}]}},
        separators=(",", ":"))
    run_dir = f"{mount_path}/runs/{job_name}"
    return " && ".join([
        f"kubectl run {RESULTS_POD} -n {namespace} --image={RESULTS_IMAGE} --restart=Never "
        f"--overrides={shlex.quote(overrides)}",
        f"kubectl wait -n {namespace} --for=condition=Ready pod/{RESULTS_POD} --timeout=300s",
        f"kubectl cp -n {namespace} {RESULTS_POD}:{run_dir} {LOCAL_RESULTS_DIR}/{job_name}",
        f"kubectl delete pod -n {namespace} {RESULTS_POD}",
    ])
