"""The AWS half of the job's commands: credentials for kubectl and the data upload (`aws` CLI)."""

from __future__ import annotations

import shlex

import pulumi

from trainstack.infra.config import JobConfig
from trainstack.infra.core.commands import (
    LOCAL_DATA_DIR,
    LOCAL_RESULTS_DIR,
    UPLOAD_EXCLUDES,
    copy_results_command,
    kubectl_commands,
)


def job_commands(*, region: str, cluster_name: str, aws_profile: str | None, job: JobConfig,
                 bucket_name: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    profile = f" --profile {shlex.quote(aws_profile)}" if aws_profile else ""
    excludes = "".join(f" --exclude '{pattern}'" for pattern in UPLOAD_EXCLUDES)
    return {
        "kubeconfigCommand": f"aws eks update-kubeconfig --region {region} --name {cluster_name}{profile}",
        # --delete drops superseded generations so pods never download them.
        "uploadDataCommand": pulumi.Output.concat(
            f"aws s3 sync --delete{excludes} {LOCAL_DATA_DIR} s3://", bucket_name, f"/{job.data_prefix}/{profile}"),
        # The run directory off the shared volume and into the kept bucket: before `pulumi destroy`.
        "saveResultsCommand": pulumi.Output.concat(
            copy_results_command(job), f" && aws s3 sync {LOCAL_RESULTS_DIR}/{job.name} s3://", bucket_name,
            f"/results/{job.name}/{profile}"),
        **kubectl_commands(namespace=job.namespace, job_name=job.name, pods_max=job.pods_max,
                           tensorboard=job.tensorboard),
    }
