"""The image tier (`make test-image`): tests that build and run images/Dockerfile need --image-tier,
root, podman, buildah and debootstrap; without the flag they are skipped. The lint and lock tests in
this folder always run."""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--image-tier", action="store_true", help="build and run the training image (make test-image)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--image-tier"):
        return
    skip = pytest.mark.skip(reason="builds the image: run `make test-image`")
    for item in items:
        if "image_tier" in item.keywords:
            item.add_marker(skip)
