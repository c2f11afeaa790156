"""`submit --image`: does the image exist in the stack's own registry? Asked when it can be, bounded.

A tag that does not exist (a typo, a push that never happened, a deleted digest) passes every offline
check, and its pods then sit in ImagePullBackOff on a GPU node until Kueue's waitForPodsReady evicts them.
When `--image` is in the registry the stack's own image lives in (ECR, `<account>.dkr.ecr.<region>.amazonaws.com`;
Artifact Registry, `<location>-docker.pkg.dev`) and that cloud's CLI is on PATH, `submit` asks it once:
- `aws ecr describe-images --registry-id A --region R --repository-name P --image-ids imageTag=T|imageDigest=D`
  (an unknown image or repository is the API error ImageNotFoundException / RepositoryNotFoundException,
  docs.aws.amazon.com/AmazonECR/latest/APIReference/API_DescribeImages.html, "Errors");
- `gcloud artifacts docker images describe REF --quiet` (an unknown one is the API's NOT_FOUND).
An image not found in its repository is bad input (exit 2); an ECR repository not found is a warning (a
pull-through cache's repository appears only at its first pull). Every call runs with stdin closed. No CLI, another registry, or any other answer (an expired login, no
network) leaves the image unchecked with one warning line: the cluster may still pull what a laptop
cannot see.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Mapping

from trainstack.jobs.errors import UsageError, failure_detail

ASK_TIMEOUT_S = 30
_ECR = re.compile(r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com")
_ARTIFACT_REGISTRY = re.compile(r"[a-z0-9-]+-docker\.pkg\.dev")
# An image missing from a repository that exists. A missing ECR repository is not proof: a pull-through
# cache rule creates its repository at the first pull through it (docs.aws.amazon.com/AmazonECR/latest/
# userguide/pull-through-cache.html), so until then DescribeImages answers RepositoryNotFoundException for
# an image the cluster can pull; that one is a warning.
_NOT_FOUND = {"aws": re.compile(r"ImageNotFoundException"),
              # The API's status only: a shell's "command not found" or "credentials were not found" is no answer.
              "gcloud": re.compile(r"\bNOT_FOUND\b")}
_NO_REPOSITORY = {"aws": re.compile(r"RepositoryNotFoundException"), "gcloud": re.compile(r"(?!)")}


def _domain(repository: str) -> str:
    return repository.split("/", 1)[0]


def _question(image: Mapping[str, str]) -> list[str] | None:
    """The cloud CLI call that asks the registry for `image`, or None when it is no registry we can ask."""
    repository, digest, tag = image["repository"], image.get("digest") or "", image.get("tag") or ""
    domain, _, path = repository.partition("/")
    ecr = _ECR.fullmatch(domain)
    if ecr:
        wanted = f"imageDigest={digest}" if digest else f"imageTag={tag}"
        return ["aws", "ecr", "describe-images", "--registry-id", ecr["account"], "--region", ecr["region"],
                "--repository-name", path, "--image-ids", wanted, "--output", "json"]
    if _ARTIFACT_REGISTRY.fullmatch(domain):
        ref = f"{repository}@{digest}" if digest else f"{repository}:{tag}"
        # --quiet: a login that needs re-authentication fails instead of prompting on the terminal.
        return ["gcloud", "artifacts", "docker", "images", "describe", ref, "--format=json", "--quiet"]
    return None


def check_image_exists(image: Mapping[str, str] | None, stack_image: Mapping[str, str] | None) -> None:
    """UsageError when the stack's registry says `image` is not there; a warning when it cannot be asked."""
    if image is None or not isinstance(stack_image, Mapping) or not stack_image.get("repository"):
        return
    if _domain(image["repository"]) != _domain(str(stack_image["repository"])):
        return  # another registry: its credentials are the cluster's, not ours
    question = _question(image)
    if question is None:
        return
    shown = f"{image['repository']}{'@' + image['digest'] if image.get('digest') else ':' + image.get('tag', '')}"
    binary = shutil.which(question[0])
    if binary is None:
        print(f"trainstack submit: warning: --image {shown} not checked ({question[0]} is not on PATH to ask the "
              "registry); a missing image shows in `trainstack list` as not starting", file=sys.stderr)
        return
    try:
        # stdin closed: a CLI that wants to ask something (an SSO or gcloud reauth prompt) fails at once.
        done = subprocess.run([binary, *question[1:]], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False, timeout=ASK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"trainstack submit: warning: --image {shown} not checked ({question[0]} did not answer within "
              f"{ASK_TIMEOUT_S}s)", file=sys.stderr)
        return
    except OSError as error:
        print(f"trainstack submit: warning: --image {shown} not checked ({question[0]} cannot run: "
              f"{error.strerror or error})", file=sys.stderr)
        return
    if done.returncode == 0:
        return
    detail = failure_detail(done.stderr, done.returncode)
    if _NO_REPOSITORY[question[0]].search(done.stderr):
        print(f"trainstack submit: warning: --image {shown} not checked: its repository does not exist yet "
              f"({question[0]}: {detail}); a pull-through cache creates it at the first pull, otherwise push the "
              "image first; a missing image shows in `trainstack list` as not starting", file=sys.stderr)
        return
    if _NOT_FOUND[question[0]].search(done.stderr):
        raise UsageError(f"--image {shown} is not in the stack's registry ({question[0]}: {detail})",
                         "push it first (docker push), or give a tag or digest that exists")
    print(f"trainstack submit: warning: --image {shown} not checked ({question[0]}: {detail})", file=sys.stderr)
