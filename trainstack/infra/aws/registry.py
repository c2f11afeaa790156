"""The ECR repository the training image is pushed to, and short-lived push credentials for it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True, kw_only=True)
class RegistryArgs:
    keep_untagged_images: int = 3  # superseded builds cost storage; the job pins a digest anyway
    tags: Mapping[str, str] = field(default_factory=dict)


def lifecycle_policy(keep_untagged: int) -> str:
    return json.dumps({"rules": [{
        "rulePriority": 1,
        "description": f"keep the {keep_untagged} newest untagged images",
        "selection": {"tagStatus": "untagged", "countType": "imageCountMoreThan", "countNumber": keep_untagged},
        "action": {"type": "expire"},
    }]}, sort_keys=True)


class Registry(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]
    server: pulumi.Output[str]  # the registry host to log in to
    username: pulumi.Output[str]
    password: pulumi.Output[str]  # secret; an ECR token, valid 12 hours, fetched on every run

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:Registry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        repository = aws.ecr.Repository(
            name,
            # Mutable: the image builder re-pushes `latest` and its build cache tag; workloads are
            # deployed by digest, so a moved tag never changes what runs.
            image_tag_mutability="MUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
            # The image is rebuilt from images/ by `pulumi up`: destroy takes the images along.
            force_delete=True,
            tags=dict(args.tags),
            opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-expire-untagged", repository=repository.name,
                                policy=lifecycle_policy(args.keep_untagged_images), opts=child)
        token = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id,
                                                       opts=pulumi.InvokeOutputOptions(parent=self))
        self.repository_url = repository.repository_url
        self.server = repository.repository_url.apply(lambda url: url.split("/", 1)[0])
        self.username = token.user_name
        self.password = pulumi.Output.secret(token.password)
        self.register_outputs({"repositoryUrl": self.repository_url, "server": self.server})
