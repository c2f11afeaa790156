"""`submit --image` asks the stack's registry whether the image exists (issue 29 item 1): a fake `aws` or
`gcloud` on PATH answers as the real CLI does (ECR's DescribeImages errors; Artifact Registry's NOT_FOUND),
and nothing is installed for an image that is not there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# aws CLI v2: a service error is "An error occurred (<Code>) when calling the <Operation> operation: <message>",
# exit 254 (docs.aws.amazon.com/cli/latest/topic/return-codes.html).
ECR_MISSING = ("\nAn error occurred (ImageNotFoundException) when calling the DescribeImages operation: The image "
               "with imageId {imageDigest:'null', imageTag:'v2-typo'} does not exist within the repository with "
               "name 'trainstack-registry-4d5e6f7' in the registry with id '123456789012'\n", 254)
ECR_EXPIRED = ("\nError when retrieving token from sso: Token has expired and refresh failed\n", 255)
GCLOUD_MISSING = ("ERROR: (gcloud.artifacts.docker.images.describe) NOT_FOUND: Requested entity was not found.\n", 1)


def _fake(bin_dir: Path, tool: str, answer: tuple[str, int] | None, calls: Path) -> None:
    stderr, code = answer or ("", 0)
    script = bin_dir / tool
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                      f"sys.stderr.write({stderr!r})\nprint('{{}}' if {code} == 0 else '')\nsys.exit({code})\n")
    script.chmod(0o755)


def _stack_repository(exports) -> str:
    return exports["jobSubmission"]["values"]["image"]["repository"]


@pytest.mark.parametrize(("stack", "tool", "answer"), [("aws", "aws", ECR_MISSING), ("gcp", "gcloud", GCLOUD_MISSING)])
def test_an_image_the_registry_does_not_have_is_refused(stack, tool, answer, cluster, cli, outputs_file,
                                                        stack_exports, tmp_path):
    calls = tmp_path / f"{tool}.jsonl"
    _fake(cluster.bin, tool, answer, calls)
    image = f"{_stack_repository(stack_exports(stack))}:v2-typo"
    code, out, err = cli("submit", "exp", "--outputs", outputs_file(stack), "--image", image)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"--image {image} is not in the stack's registry" in err
    assert cluster.calls == []  # nothing asked of the cluster, nothing installed
    [asked] = [json.loads(line) for line in calls.read_text().splitlines()]
    if tool == "aws":
        assert asked[:2] == ["ecr", "describe-images"] and "imageTag=v2-typo" in asked
        assert asked[asked.index("--region") + 1] == "us-west-2"
    else:
        assert asked[:4] == ["artifacts", "docker", "images", "describe"] and asked[4] == image


def test_an_image_the_registry_has_is_submitted(cluster, cli, outputs_file, stack_exports, tmp_path):
    _fake(cluster.bin, "aws", None, tmp_path / "aws.jsonl")
    image = f"{_stack_repository(stack_exports('aws'))}:v2"
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--image", image)
    assert code == 0 and err == "", err


def test_a_registry_that_cannot_be_asked_leaves_a_warning(cluster, cli, outputs_file, stack_exports, tmp_path):
    _fake(cluster.bin, "aws", ECR_EXPIRED, tmp_path / "aws.jsonl")
    image = f"{_stack_repository(stack_exports('aws'))}:v2"
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--image", image)
    assert code == 0
    assert "warning: --image" in err and "not checked" in err and "Token has expired" in err


def test_another_registry_is_not_asked(cluster, cli, outputs_file, tmp_path):
    calls = tmp_path / "aws.jsonl"
    _fake(cluster.bin, "aws", ECR_MISSING, calls)
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--image", "ghcr.io/me/img:v1")
    assert code == 0, err
    assert not calls.exists()


# DescribeImages on a repository that does not exist (yet): a pull-through cache rule creates it at the first
# pull (docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html).
ECR_NO_REPOSITORY = ("\nAn error occurred (RepositoryNotFoundException) when calling the DescribeImages operation: "
                     "The repository with name 'docker-hub/library/python' does not exist in the registry with id "
                     "'123456789012'\n", 254)


def test_a_repository_not_yet_created_is_a_warning_not_a_refusal(cluster, cli, outputs_file, stack_exports, tmp_path):
    _fake(cluster.bin, "aws", ECR_NO_REPOSITORY, tmp_path / "aws.jsonl")
    domain = _stack_repository(stack_exports("aws")).split("/", 1)[0]
    image = f"{domain}/docker-hub/library/python:3.12"
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--image", image)
    assert code == 0, err
    assert err.count("\n") == 1 and "not checked: its repository does not exist yet" in err
    assert "pull-through cache" in err


def test_the_cloud_clis_cannot_prompt(cluster, cli, outputs_file, stack_exports, tmp_path, monkeypatch):
    """An SSO or gcloud reauth prompt must fail at once, not wait on the terminal: stdin closed, gcloud --quiet."""
    import subprocess

    seen = []
    original = subprocess.run

    def spy(argv, *args, **kwargs):
        seen.append((Path(argv[0]).name, argv, kwargs))
        return original(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    calls = tmp_path / "gcloud.jsonl"
    _fake(cluster.bin, "gcloud", None, calls)
    image = f"{_stack_repository(stack_exports('gcp'))}:v2"
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp"), "--image", image)
    assert code == 0, err
    [asked] = [json.loads(line) for line in calls.read_text().splitlines()]
    assert "--quiet" in asked
    assert cli("logs", "exp", "--outputs", outputs_file("gcp"))[0] == 0
    tools = {name for name, _, _ in seen}
    assert {"gcloud", "helm", "kubectl"} <= tools, tools
    for name, argv, kwargs in seen:  # every tool: a pipe we fill, or no input at all
        assert "input" in kwargs or kwargs.get("stdin") is subprocess.DEVNULL, (name, argv[1:3])
