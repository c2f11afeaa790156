"""The NCCL check as a stack output, on every cloud: `eval "$(pulumi stack output ncclCheckCommand)"`.

Installs the training chart once more as release `nccl-check` with a machine profile (the node type's
placement and GPU networking, workloads/charts/training-job/profiles/) and a check profile, waits for
the Job, prints pod 0's verdict line (bus bandwidth against the threshold) and removes the release
whatever the outcome; the command's exit status is the verdict. The trainer runner runs in the stack's
training image (by digest), on the stack's volume, as the jobs' ServiceAccount. Its Job names the job
owner, as every job does: if the command is interrupted before its uninstall, `pulumi destroy` still
deletes the check before the claim and the queues (job_owner.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from trainstack.infra.config import JobConfig
from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR, project_relative
from trainstack.infra.kubernetes.job_owner import owner_reference
from trainstack.infra.kubernetes.job_submission import SUBMITTED_BY_CLI
from trainstack.infra.kubernetes.training_job import image_values

PROJECT_CHART = project_relative(TRAINING_JOB_CHART_DIR)
# ncclCheck.runner -> the chart's check profile: `trainer` is an all-reduce in the training image with the
# job's own launcher and NCCL settings (it also proves the image's NCCL is the plugin's); `nccl-tests` is
# the plugin image's all_gather_perf over mpirun (the network alone).
CHECK_PROFILES = {"trainer": "nccl-allreduce.yaml", "nccl-tests": "nccl-check.yaml"}
NCCL_CHECK_RELEASE = "nccl-check"


def nccl_check_command(*, machine_profile: str, namespace: str, min_bus_bandwidth_gbps: float, job: JobConfig,
                       image_ref: pulumi.Input[str], claim_name: pulumi.Input[str] | None,
                       service_account: pulumi.Input[str], owner_uid: pulumi.Input[str], runner: str = "trainer",
                       extra_sets: Sequence[str] = ()) -> pulumi.Output[str]:
    """`machine_profile`: a file of the chart's profiles/; `extra_sets`: more `--set` flags (the stack's own
    node facts the profile cannot know)."""
    profiles = f"{PROJECT_CHART}/profiles"
    job_name = f"job/{NCCL_CHECK_RELEASE}"
    condition = "jsonpath='{.status.conditions[?(@.status==\"True\")].type}'"
    queue = job.queue_name if job.queue else ""

    def command(resolved: list) -> str:
        image, claim, account, uid = resolved
        sets = [" ".join(f"--set-string owner.{key}={value}" for key, value in owner_reference(uid).items()),
                f"--set ncclCheck.minBusBandwidthGBps={min_bus_bandwidth_gbps}",
                f"--set-string kueue.queueName={queue}",
                f"--set serviceAccount.create=false --set-string serviceAccount.name={account}", *extra_sets]
        if runner == "trainer":
            values = image_values(image)
            sets.append(" ".join(f"--set-string image.{key}={values[key]}" for key in ("repository", "digest", "tag")
                                 if values[key]))
            if claim:
                sets.append(f"--set-string storage.pvc={claim}")
        return " ".join([
            f"helm install {NCCL_CHECK_RELEASE} {PROJECT_CHART} -n {namespace}",
            f"-f {profiles}/{machine_profile} -f {profiles}/{CHECK_PROFILES[runner]}",
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

    return pulumi.Output.all(image_ref, claim_name, service_account, owner_uid).apply(command)
