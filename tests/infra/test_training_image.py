"""TrainingImage under Pulumi mocks: the docker-build Image it registers and the reference it exposes."""

from __future__ import annotations

import os

import pulumi
import pytest

from tests.infra.programs import (
    DIGEST,
    IMAGE,
    PASSWORD,
    REGISTRY,
    REPOSITORY,
    TRAINING_IMAGE,
    image_args,
    provider_outputs,
    walk,
)
from tests.pulumi_harness import UNKNOWN, ProgramResult, run_program
from trainstack.infra import InvalidArgsError, TrainingImage
from trainstack.infra.core.paths import DOCKERFILE, REPO_ROOT

CACHE_REF = f"{REPOSITORY}:buildcache"


def _run_image(*, preview: bool = False, **overrides) -> ProgramResult:
    def program() -> None:
        image = TrainingImage("image", image_args(**overrides))
        pulumi.export("ref", image.ref)
        pulumi.export("digest", image.digest)

    return run_program(program, preview=preview, outputs=None if preview else provider_outputs)


def test_builds_the_repository_with_images_dockerfile_and_pushes() -> None:
    inputs = _run_image().one(IMAGE).inputs
    # Paths relative to the project root keep the state identical across machines.
    assert not os.path.isabs(inputs["context"]["location"])
    assert os.path.realpath(inputs["context"]["location"]) == os.path.realpath(REPO_ROOT)
    assert os.path.realpath(inputs["dockerfile"]["location"]) == os.path.realpath(DOCKERFILE)
    assert inputs["push"] is True
    assert inputs["buildOnPreview"] is False
    assert inputs["platforms"] == ["linux/amd64"]
    assert inputs["tags"] == [f"{REPOSITORY}:latest"]
    assert inputs["registries"] == [{"address": REGISTRY, "username": "AWS", "password": PASSWORD}]


def test_registry_password_is_a_secret_and_nothing_else_holds_it() -> None:
    result = _run_image()
    image = result.one(IMAGE)
    assert image.secret_paths == frozenset({"registries[0].password"})
    for registration in result.registrations:
        for path, leaf in walk(registration.inputs):
            if leaf == PASSWORD:
                assert registration.is_secret(path), (
                    f"{registration.name}: {path} holds the password in plain text"
                )


def test_registry_layer_cache_suits_ecr() -> None:
    inputs = _run_image().one(IMAGE).inputs
    assert inputs["cacheFrom"] == [{"registry": {"ref": CACHE_REF}}]
    assert inputs["cacheTo"] == [
        {
            "registry": {
                "ref": CACHE_REF,
                "mode": "max",
                "imageManifest": True,
                "ociMediaTypes": True,
                "ignoreError": True,
                "compression": "gzip",
                "compressionLevel": 0,
                "forceCompression": False,
            }
        }
    ]


def test_cache_and_platform_and_tags_are_configurable() -> None:
    inputs = _run_image(registry_cache=False, platform="linux/arm64", tags=("v1", "stable")).one(IMAGE).inputs
    assert "cacheFrom" not in inputs and "cacheTo" not in inputs
    assert inputs["platforms"] == ["linux/arm64"]
    assert inputs["tags"] == [f"{REPOSITORY}:v1", f"{REPOSITORY}:stable"]


def test_ref_is_the_repository_at_the_pushed_digest() -> None:
    result = _run_image()
    assert result.exports == {"ref": f"{REPOSITORY}@{DIGEST}", "digest": DIGEST}
    component = result.one(TRAINING_IMAGE)
    assert result.registered_outputs[component.urn] == {"ref": f"{REPOSITORY}@{DIGEST}", "digest": DIGEST}
    assert [r.urn for r in result.children_of(component.urn)] == [result.one(IMAGE).urn]


def test_preview_does_not_know_the_digest_and_does_not_fail() -> None:
    result = _run_image(preview=True)
    assert result.exports == {"ref": UNKNOWN, "digest": UNKNOWN}
    assert result.one(IMAGE).inputs["tags"] == [f"{REPOSITORY}:latest"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"platform": "linux/amd65"}, "platform must be one of docker-build's platforms"),
        ({"tags": ()}, "tags must be a non-empty list of tag names"),
        ({"tags": "latest"}, "tags must be a non-empty list of tag names"),
        ({"tags": ("buildcache",)}, "cache_tag 'buildcache' must differ from the image tags"),
    ],
)
def test_invalid_arguments_fail_before_anything_is_registered(overrides: dict, message: str) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgsError, match="^TrainingImage 'image': ") as error:
            TrainingImage("image", image_args(**overrides))
        assert message in str(error.value)

    assert run_program(program).registrations == []
