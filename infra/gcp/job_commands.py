"""The GCP half of the job's commands: credentials for kubectl and the data upload (`gcloud`)."""

from __future__ import annotations

import re

import pulumi

from infra.commands import LOCAL_DATA_DIR, UPLOAD_EXCLUDES, kubectl_commands
from infra.config import JobConfig


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
        **kubectl_commands(namespace=job.namespace, job_name=job.name, nodes_max=job.nodes_max,
                           tensorboard=job.tensorboard),
    }
