"""Artifact Registry: the Docker repository the training image is pushed to, readable by the nodes only."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.resource_options import child_options
from trainstack.infra.image.training_image import TENSORBOARD_TAG, TRAINING_TAG

# Registry logins with an OAuth access token use this user name (Artifact Registry's "access token" auth).
TOKEN_USERNAME = "oauth2accesstoken"
IMAGE_NAME = "trainstack"
KEEP_RECENT_VERSIONS = 10


@dataclass(frozen=True, kw_only=True)
class ArtifactRegistryArgs:
    project: str
    region: str
    repository_id: str
    reader_member: pulumi.Input[str]  # the nodes' service account: they pull the image


class ArtifactRegistry(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]  # <region>-docker.pkg.dev/<project>/<repository>/trainstack
    server: str
    username: str
    password: pulumi.Output[str]  # a short-lived access token of whoever runs `pulumi up` (secret)

    def __init__(self, name: str, args: ArtifactRegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:ArtifactRegistry", name, None, opts)
        child = child_options(self, None, opts)
        repository = gcp.artifactregistry.Repository(
            name,
            project=args.project,
            location=args.region,
            repository_id=args.repository_id,
            format="DOCKER",
            description="trainstack training images",
            # The job runs the newest image by digest; older builds and their cache go after a while.
            # What the stack deploys keeps its tag until the next push, and so is never expired: the
            # TensorBoard image is rebuilt far less often than the training image.
            cleanup_policies=[
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="keep-deployed", action="KEEP",
                    condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                        tag_state="TAGGED", tag_prefixes=[TRAINING_TAG, TENSORBOARD_TAG])),
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="keep-recent", action="KEEP",
                    most_recent_versions=gcp.artifactregistry.RepositoryCleanupPolicyMostRecentVersionsArgs(
                        keep_count=KEEP_RECENT_VERSIONS)),
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="delete-old", action="DELETE",
                    condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                        tag_state="ANY", older_than="2592000s")),
            ],
            vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                enablement_config="INHERITED"),
            opts=child,
        )
        gcp.artifactregistry.RepositoryIamMember(
            f"{name}-node-reader",
            project=args.project,
            location=args.region,
            repository=repository.name,
            role="roles/artifactregistry.reader",
            member=args.reader_member,
            opts=child,
        )
        self.server = f"{args.region}-docker.pkg.dev"
        self.repository_url = pulumi.Output.concat(
            self.server, "/", args.project, "/", repository.repository_id, f"/{IMAGE_NAME}")
        self.username = TOKEN_USERNAME
        client = gcp.organizations.get_client_config_output(opts=pulumi.InvokeOptions(parent=self))
        self.password = pulumi.Output.secret(client.access_token)
        self.register_outputs({"repositoryUrl": self.repository_url, "server": self.server})
