"""The GCP half of the job's commands: credentials for kubectl, the data upload (`gcloud`), the NCCL check."""

from __future__ import annotations

import re

import pulumi

from trainstack.infra.config import JobConfig
from trainstack.infra.core.commands import (
    LOCAL_DATA_DIR,
    LOCAL_RESULTS_DIR,
    UPLOAD_EXCLUDES,
    copy_results_command,
    kubectl_commands,
)
from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR, project_relative
from trainstack.infra.gcp.machine_types import GpuDirectProfile
from trainstack.infra.kubernetes.job_submission import SUBMITTED_BY_CLI
from trainstack.infra.kubernetes.training_job import image_values

PROJECT_CHART = project_relative(TRAINING_JOB_CHART_DIR)


def _as_regex(glob: str) -> str:
    return re.escape(glob).replace(r"\*", ".*")


def job_commands(*, project: str, location: str, cluster_name: str, job: JobConfig,
                 bucket_name: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    # gcloud storage rsync excludes by regular expression, matched against the relative path.
    excludes = "|".join(_as_regex(pattern) for pattern in UPLOAD_EXCLUDES)
    return {
        "kubeconfigCommand": f"gcloud container clusters get-credentials {cluster_name} --location {location} "
                             f"--project {project}",
        # --delete-unmatched-destination-objects drops superseded generations so pods never download them.
        "uploadDataCommand": pulumi.Output.concat(
            f"gcloud storage rsync --recursive --delete-unmatched-destination-objects --exclude '{excludes}' "
            f"{LOCAL_DATA_DIR} gs://", bucket_name, f"/{job.data_prefix}"),
        # The run directory off the shared volume and into the kept bucket: before `pulumi destroy`.
        "saveResultsCommand": pulumi.Output.concat(
            copy_results_command(job), f" && gcloud storage rsync --recursive {LOCAL_RESULTS_DIR}/{job.name} gs://",
            bucket_name, f"/results/{job.name}"),
        **kubectl_commands(namespace=job.namespace, job_name=job.name, pods_max=job.pods_max,
                           tensorboard=job.tensorboard),
    }


# The chart's machine profile per GPUDirect mode (workloads/charts/training-job/profiles/).
MACHINE_PROFILES = {"tcpx": "a3-highgpu.yaml", "tcpxo": "a3-megagpu.yaml"}
# ncclCheck.runner -> the chart's check profile: `trainer` is an all-reduce in the training image with the
# job's own launcher and NCCL settings (it also proves the image's NCCL is the plugin's); `nccl-tests` is
# the plugin image's all_gather_perf over mpirun (the network alone).
CHECK_PROFILES = {"trainer": "nccl-allreduce.yaml", "nccl-tests": "nccl-check.yaml"}
NCCL_CHECK_RELEASE = "nccl-check"


def nccl_check_command(*, profile: GpuDirectProfile, namespace: str, min_bus_bandwidth_gbps: int, job: JobConfig,
                       image_ref: pulumi.Input[str], claim_name: pulumi.Input[str] | None,
                       service_account: pulumi.Input[str], runner: str = "trainer") -> pulumi.Output[str]:
    """Runs the NCCL check on two A3 nodes over the job's GPUDirect wiring; exits non-zero below the bar.

    `eval "$(pulumi stack output ncclCheckCommand)"` prints pod 0's verdict line (bus bandwidth
    against the threshold) and removes the check's release whatever the outcome. The trainer runner
    runs in the stack's training image (by digest), on the stack's volume, as the jobs' ServiceAccount.
    """
    profiles = f"{PROJECT_CHART}/profiles"
    job_name = f"job/{NCCL_CHECK_RELEASE}"
    condition = "jsonpath='{.status.conditions[?(@.status==\"True\")].type}'"
    queue = job.queue_name if job.queue else ""

    def command(resolved: list) -> str:
        image, claim, account = resolved
        sets = [f"--set ncclCheck.minBusBandwidthGBps={min_bus_bandwidth_gbps}",
                f"--set-string kueue.queueName={queue}",
                f"--set serviceAccount.create=false --set-string serviceAccount.name={account}"]
        if runner == "trainer":
            values = image_values(image)
            sets.append(" ".join(f"--set-string image.{key}={values[key]}" for key in ("repository", "digest", "tag")
                                 if values[key]))
            if claim:
                sets.append(f"--set-string storage.pvc={claim}")
        return " ".join([
            f"helm install {NCCL_CHECK_RELEASE} {PROJECT_CHART} -n {namespace}",
            f"-f {profiles}/{MACHINE_PROFILES[profile.mode]} -f {profiles}/{CHECK_PROFILES[runner]}",
            # Labelled as the CLI's jobs are: `trainstack cancel --all` (before pulumi destroy) removes it.
            f"--labels {'='.join(SUBMITTED_BY_CLI)}",
            *sets,
            f"&& until kubectl -n {namespace} get {job_name} -o {condition} | grep -qwE 'Complete|Failed';",
            "do sleep 20; done;",
            f"kubectl -n {namespace} logs -l batch.kubernetes.io/job-name={NCCL_CHECK_RELEASE},"
            "batch.kubernetes.io/job-completion-index=0 -c nccl-check --tail=1;",
            f"kubectl -n {namespace} get {job_name} -o {condition} | grep -qw Complete; passed=$?;",
            f"helm uninstall {NCCL_CHECK_RELEASE} -n {namespace}; test $passed -eq 0",
        ])

    return pulumi.Output.all(image_ref, claim_name, service_account).apply(command)
