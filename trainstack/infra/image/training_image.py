"""TrainingImage: build images/Dockerfile with BuildKit (pulumi-docker-build) and push it to a registry."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_docker_build as docker_build

from trainstack.infra.core import validation
from trainstack.infra.core.paths import (
    DOCKERFILE,
    REPO_ROOT,
    TENSORBOARD_DOCKERFILE,
    TENSORBOARD_IMAGE_DIR,
    project_relative,
)
from trainstack.infra.core.resource_options import child_options

_PLATFORMS = frozenset(p.value for p in docker_build.Platform)
# The tags the stacks push their images under: the registry must never expire what they carry.
TRAINING_TAG = "latest"
TENSORBOARD_TAG = "tensorboard"


@dataclass(frozen=True, kw_only=True)
class TrainingImageArgs:
    repository_url: pulumi.Input[str]  # e.g. 123.dkr.ecr.us-west-2.amazonaws.com/trainstack
    registry_server: pulumi.Input[str]  # registry host to log in to
    registry_username: pulumi.Input[str]
    registry_password: pulumi.Input[str]  # always stored as a Pulumi secret
    context: str = field(default_factory=lambda: project_relative(REPO_ROOT))
    dockerfile: str = field(default_factory=lambda: project_relative(DOCKERFILE))
    platform: str = "linux/amd64"
    # Optional, with defaults:
    tags: Sequence[str] = (TRAINING_TAG,)  # pushed as <repository_url>:<tag>; the job uses the digest
    registry_cache: bool = True  # layer cache in the same repository, tag `cache_tag`
    cache_tag: str = "buildcache"
    provider: docker_build.Provider | None = None  # e.g. one pointing at a remote BuildKit (`host`)

    def validate(self, component: str) -> None:
        missing = missing_build_context(self.context, self.dockerfile)
        if missing:
            validation.fail(component, missing)
        if self.platform not in _PLATFORMS:
            validation.fail(
                component, f"platform must be one of docker-build's platforms, got {self.platform!r}"
            )
        if (
            isinstance(self.tags, str)
            or not self.tags
            or not all(isinstance(t, str) and t for t in self.tags)
        ):
            validation.fail(component, f"tags must be a non-empty list of tag names, got {self.tags!r}")
        if self.registry_cache and self.cache_tag in self.tags:
            validation.fail(component, f"cache_tag {self.cache_tag!r} must differ from the image tags")


def missing_build_context(context: str | None = None, dockerfile: str | None = None) -> str | None:
    """Why the image cannot be built here (its context or Dockerfile is not on disk), or None.

    The default context is the checkout; a trainstack installed from a wheel has no images/ and no
    pyproject.toml, and docker-build would fail only at `pulumi up`, after everything before it was created.
    """
    context = REPO_ROOT if context is None else context
    dockerfile = DOCKERFILE if dockerfile is None else dockerfile
    if Path(context).is_dir() and Path(dockerfile).is_file():
        return None
    return (f"the training image's build context ({context}) or Dockerfile ({dockerfile}) is missing: an installed "
            "trainstack does not carry images/; install it from a checkout (pip install -e <checkout>) or use the "
            "package from a checkout or its git tag (pulumi package add)")


def tensorboard_image_args(training: TrainingImageArgs) -> TrainingImageArgs:
    """TensorBoard's own small CPU image (images/tensorboard), pushed with the training image's registry
    and builder under its own tags: the system node then pulls a few hundred MB, not the CUDA image."""
    return dataclasses.replace(training, context=project_relative(TENSORBOARD_IMAGE_DIR),
                               dockerfile=project_relative(TENSORBOARD_DOCKERFILE), tags=(TENSORBOARD_TAG,),
                               cache_tag="tensorboard-buildcache")


class TrainingImage(pulumi.ComponentResource):
    """The training image, pushed by digest: `ref` is "<repository_url>@sha256:..."."""

    ref: pulumi.Output[str]
    digest: pulumi.Output[str]

    def __init__(
        self, name: str, args: TrainingImageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args.validate(f"TrainingImage {name!r}")
        super().__init__("trainstack:index:TrainingImage", name, None, opts)

        registry = docker_build.RegistryArgs(
            address=args.registry_server,
            username=args.registry_username,
            password=pulumi.Output.secret(args.registry_password),
        )
        cache_ref = pulumi.Output.concat(args.repository_url, ":", args.cache_tag)
        image = docker_build.Image(
            name,
            docker_build.ImageArgs(
                context=docker_build.BuildContextArgs(location=args.context),
                dockerfile=docker_build.DockerfileArgs(location=args.dockerfile),
                platforms=[docker_build.Platform(args.platform)],
                tags=[pulumi.Output.concat(args.repository_url, ":", tag) for tag in args.tags],
                push=True,
                # A preview must not need a Docker daemon or spend minutes building; `up` builds.
                build_on_preview=False,
                registries=[registry],
                cache_from=[
                    docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=cache_ref))
                ]
                if args.registry_cache
                else None,
                cache_to=[
                    docker_build.CacheToArgs(
                        registry=docker_build.CacheToRegistryArgs(
                            ref=cache_ref,
                            mode=docker_build.CacheMode.MAX,  # cache the dependency layers too
                            # ECR accepts cache exports only as OCI image manifests.
                            image_manifest=True,
                            oci_media_types=True,
                            # A cache that cannot be written must not fail the build.
                            ignore_error=True,
                        )
                    )
                ]
                if args.registry_cache
                else None,
            ),
            opts=child_options(self, args.provider, opts),
        )

        self.digest = image.digest
        # Deploy by digest, not by a tag that can move; carries the dependency on the image.
        self.ref = pulumi.Output.concat(args.repository_url, "@", image.digest)
        self.register_outputs({"ref": self.ref, "digest": self.digest})
