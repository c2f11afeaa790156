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
from trainstack.infra.kubernetes.nccl_check_command import nccl_check_command as shared_nccl_check_command


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


# The chart's machine profile per GPUDirect machine type (workloads/charts/training-job/profiles/).
MACHINE_PROFILES = {"a3-highgpu-8g": "a3-highgpu.yaml", "a3-megagpu-8g": "a3-megagpu.yaml",
                    "a3-ultragpu-8g": "a3-ultragpu.yaml", "a4-highgpu-8g": "a4-highgpu.yaml"}


def nccl_check_command(*, machine_type: str, namespace: str, min_bus_bandwidth_gbps: int, job: JobConfig,
                       image_ref: pulumi.Input[str], claim_name: pulumi.Input[str] | None,
                       service_account: pulumi.Input[str], owner_uid: pulumi.Input[str],
                       runner: str = "trainer") -> pulumi.Output[str]:
    """Runs the NCCL check on two GPUDirect nodes over the job's wiring (trainstack/infra/kubernetes/nccl_check_command.py)."""
    return shared_nccl_check_command(
        machine_profile=MACHINE_PROFILES[machine_type], namespace=namespace,
        min_bus_bandwidth_gbps=min_bus_bandwidth_gbps, job=job, image_ref=image_ref, claim_name=claim_name,
        service_account=service_account, owner_uid=owner_uid, runner=runner)
