"""A submission checked with the stack's own job checks, then turned into the chart's values.

The checks are `trainstack:job`'s (trainstack/infra/config/job.py resolve_job: the name, the node range, one
process per GPU, the queue's name, every trainer flag through the trainer's own parser, W&B's key)
plus the GPU pool's size, as the clouds check it (gpu_nodes_for_job against the pool's maximum).
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainstack.contract.cli import build_parser
from trainstack.infra.config import ConfigError, gpu_nodes_for_job
from trainstack.infra.config.job import KEY as KEY_JOB
from trainstack.infra.config.job import JobConfig, resolve_job
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.loader import load
from trainstack.infra.config.train_args import train_keys
from trainstack.infra.kubernetes.pod_requests import format_quantity, parse_quantity, pod_requests
from trainstack.infra.kubernetes.training_job import (
    chart_default_values,
    deep_merge,
    image_values,
    pod_resources,
)
from trainstack.jobs.errors import UsageError
from trainstack.jobs.stack_outputs import StackOutputs

# The pod label that groups the jobs of one sweep (`list` shows them together).
SWEEP_LABEL = "trainstack.dev/sweep"
SNAPSHOT_FLAG = "--snapshot-uri"

# trainstack:job keys -> what the user typed instead, and how to fix it on the command line.
_CLI_FIXES = {
    "name": ("NAME", "pick a name of lowercase letters, digits and -, starting with a letter, at most 50 characters"),
    "podsMin": ("--pods", "give --pods MIN:MAX with MIN <= MAX"),
    "podsMax": ("--pods", "give --pods MIN:MAX with MIN <= MAX"),
    "train": ("the trainer flags after --", "fix them (python -m training train --help lists every flag)"),
}


@dataclass(frozen=True)
class Target:
    """What torchrun runs: the trainer (flags checked), or any module or script of the image."""

    trainer_flags: tuple[str, ...] = ()
    module: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()  # the module's or script's own arguments (not checked)

    @property
    def is_trainer(self) -> bool:
        return self.module is None and self.script is None


def run_prefix(outputs: StackOutputs, name: str) -> str:
    """Where the job's checkpoints and export go: its own prefix, as the stack's job gets (`runs/<job>`)."""
    return f"{outputs.bucket_uri}/runs/{name}"


def _cli_error(error: ConfigError, pods_flag: str) -> UsageError:
    """The stack's error in the CLI's terms; `pods_flag` is how the user gave the pods (--pods or --nodes)."""
    text = str(error)
    problem, _, fix = text[len(error.key) + 2:].rpartition(". Fix: ")
    field = error.key.removeprefix(f"{KEY_JOB}.").split(".", 1)[0].split("[", 1)[0]
    label, cli_fix = _CLI_FIXES.get(field, (f"the stack's {error.key}", fix))
    if label == "--pods" and pods_flag != label:
        label, cli_fix = pods_flag, f"{cli_fix} (--pods replaces {pods_flag})"
    return UsageError(f"{label}: {problem}", cli_fix)


@functools.cache
def _trainer_options() -> tuple[str, ...]:
    """Every option string the trainer's `train` parser knows, -h and --help included."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    return tuple(sub._option_string_actions)


def trainer_option(word: str) -> str | None:
    """The trainer option `word` means to its parser: argparse takes a unique prefix of a long option
    (allow_abbrev, on by default: cpython Lib/argparse.py _parse_optional, _get_option_tuples), so
    `--snapshot-u` is `--snapshot-uri`. None for a value, an unknown or an ambiguous flag."""
    flag = word.partition("=")[0] if word.startswith("--") else word
    options = _trainer_options()
    if flag in options:
        return flag
    if not flag.startswith("--") or len(flag) < 3:
        return None
    matches = [option for option in options if option.startswith(flag)]
    return matches[0] if len(matches) == 1 else None


HELP_FLAGS = ("-h", "--help")


def _train_values(flags: Sequence[str]) -> dict[str, Any]:
    """Trainer flags -> trainstack:job.train: the chart's first-class flags as its keys, the rest extraArgs.

    --data and --out stay in extraArgs, where the stack's check refuses them (the platform places both).
    """
    by_flag = {flag.flag: camel for camel, flag in train_keys().items()}
    chart_keys = set(chart_default_values()["train"]) - {"data", "out", "extraArgs"}
    train: dict[str, Any] = {}
    extra: list[str] = []
    words = list(flags)
    i = 0
    while i < len(words):
        word = words[i]
        flag, has_inline, inline = word.partition("=")
        key = by_flag.get(flag)
        meant = trainer_option(word)
        if meant == SNAPSHOT_FLAG:
            named = flag if flag == SNAPSHOT_FLAG else f"{flag} (an abbreviation of {SNAPSHOT_FLAG})"
            raise UsageError(f"{named} is set by trainstack: each job writes under its own prefix "
                             "(<bucket>/runs/<NAME>)", f"remove {flag} from the flags after --")
        if meant in HELP_FLAGS:
            raise UsageError(f"{flag} after -- would make the job print the trainer's usage and end: nothing "
                             "to submit", "see the flags with python -m training train --help, then submit them")
        if key in chart_keys and train_keys()[key].kind != "bool":
            if has_inline:
                train[key] = inline
            elif i + 1 < len(words):
                train[key] = words[i + 1]
                i += 1
            else:
                extra.append(word)  # the trainer's parser reports the missing value
        else:
            extra.append(word)
        i += 1
    if extra:
        train["extraArgs"] = extra
    return train


def check(outputs: StackOutputs, name: str, pods: tuple[int, int] | None, target: Target, *,
          pods_flag: str = "--pods") -> JobConfig:
    """The stack's checks for one job; UsageError (one line) on the first problem, naming `pods_flag` (the
    flag the user typed) for the pods."""
    section: dict[str, Any] = {
        "enabled": True,
        "name": name,
        "namespace": outputs.namespace,
        "queue": outputs.queue_name is not None,
        "secretEnv": list(outputs.values.get("secretEnv") or []),
    }
    if outputs.queue_name is not None:
        section["queueName"] = outputs.queue_name
    if pods is not None:
        section["podsMin"], section["podsMax"] = pods
    if target.is_trainer:
        section["train"] = _train_values(target.trainer_flags)
    try:
        job = resolve_job(load(Job, section, KEY_JOB), outputs.gpus_per_node, outputs.node_type)
    except ConfigError as error:
        raise _cli_error(error, pods_flag) from None
    check_object_names(name)
    _, nodes_for_max = gpu_nodes_for_job(job, outputs.gpus_per_node)
    if outputs.pool_max_nodes is not None and nodes_for_max > outputs.pool_max_nodes:
        raise UsageError(f"{pods_flag}: {job.pods_max} pods need {nodes_for_max} GPU nodes ({outputs.node_type}), but "
                         f"the stack's GPU pool has at most {outputs.pool_max_nodes}",
                         f"give --pods {min(job.pods_min, outputs.pool_max_nodes)}:{outputs.pool_max_nodes} or "
                         "raise the pool's maximum in the stack config and pulumi up")
    return job


def check_queue(outputs: StackOutputs, job: JobConfig, values: Mapping[str, Any], *,
                pods_flag: str = "--pods") -> str | None:
    """Refuse a job whose fewest pods, counted as Kueue counts them, exceed its queue's quota: Kueue would
    leave it pending for ever (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go, "> maximum
    capacity"). Above that, up to pods_max, Kueue admits it with fewer pods (PartialAdmission, Beta and
    on by default in v0.19.2 pkg/features/kube_features.go; the chart sets job-min-parallelism when
    min < max; pkg/scheduler/scheduler.go reduces the count): the returned warning says so, None if all fit."""
    queue = outputs.queues.get(outputs.queue_name or "")
    if not queue:
        return None
    quota = {name: parse_quantity(q) for name, q in queue["quota"].items()}
    per_pod = sorted(pod_requests(pod_resources(values)).items())
    for resource, request in per_pod:
        needed = request * job.pods_min
        if needed > quota.get(resource, 0):
            raise UsageError(f"{pods_flag}: {job.pods_min} pods ask {format_quantity(needed)} {resource}, but queue "
                             f"{outputs.queue_name} holds at most {format_quantity(quota.get(resource, 0))} (its "
                             "pool at its maximum)", "give a smaller --pods MIN, or raise the pool's maximum in "
                             "the stack config and pulumi up")
    fits = min((int(quota.get(resource, 0) // request) for resource, request in per_pod if request), default=job.pods_max)
    if fits < job.pods_max:
        return (f"queue {outputs.queue_name} holds {fits} of the {job.pods_max} pods at most: Kueue admits the job "
                f"with {fits} (between --pods MIN and MAX)")
    return None


# An image reference as the container runtime parses it (distribution/reference v0.6.0, the grammar
# in reference.go, the patterns in regexp.go; Go's \w is ASCII, hence re.ASCII): lowercase path
# components, a tag of word characters, an algorithm:hex digest.
# A reference outside it is InvalidImageName in the kubelet: the pod would hold its GPU node forever.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?", re.ASCII)

# Objects the chart names <release>-<suffix> (templates/tensorboard.yaml, etcd.yaml, nccl-check-configmap.yaml):
# a job named like one would collide with another job's object.
_CHART_SUFFIXES = ("-tensorboard", "-etcd", "-nccl-check")
# Objects every namespace already has, which a release of that name would try to create: the
# ServiceAccount "default" and, in the default namespace, the Service "kubernetes".
_TAKEN_BY_KUBERNETES = ("default", "kubernetes")


def check_image(image: str | None) -> dict[str, str] | None:
    if image is None:
        return None
    fix = "give <repository>@sha256:<digest> or <repository>:<tag>, lowercase (e.g. ghcr.io/me/img:v1)"
    if not _IMAGE_REFERENCE.fullmatch(image):
        raise UsageError(f"--image: {image!r} is not an image reference", fix)
    try:
        return image_values(image)
    except ValueError as error:
        raise UsageError(f"--image: {error}", fix) from None


def check_object_names(name: str) -> None:
    """A job's name must not be one of another object's the chart or Kubernetes already uses."""
    if name != name.strip():
        # The stack's check reads the name stripped; helm, the bucket prefix and the run directory would not.
        raise UsageError(f"NAME: {name!r} has white space around it", f"give {name.strip()!r} without it")
    if name in _TAKEN_BY_KUBERNETES:
        raise UsageError(f"NAME: {name!r} is the name of an object Kubernetes keeps in every namespace",
                         "pick another name")
    clash = next((suffix for suffix in _CHART_SUFFIXES if name.endswith(suffix)), None)
    if clash is not None:
        raise UsageError(f"NAME: {name!r} ends in {clash}, the chart's name for another job's object",
                         f"pick a name that does not end in {', '.join(_CHART_SUFFIXES)}")


def service_account(outputs: StackOutputs, name: str) -> dict[str, Any]:
    """The stack's own ServiceAccount, the one its cloud identity trusts (trainstack/infra/kubernetes/job_service_account.py): never
    created or deleted by a job's release. Outputs of a stack from before it existed: the stack job's, while
    that release exists; otherwise the job gets its own, annotated but not trusted (docs/jobs.md)."""
    if outputs.service_account is not None:
        return {"create": False, "name": outputs.service_account, "annotations": {}}
    trusted = outputs.identity_service_account
    if trusted is not None and trusted == outputs.stack_job:
        return {"create": False, "name": trusted, "annotations": {}}
    return {"create": True, "name": name, "annotations": dict(outputs.service_account_annotations)}


def chart_values(outputs: StackOutputs, job: JobConfig, target: Target, *, image: Mapping[str, str] | None = None,
                 sweep: str | None = None, tensorboard: bool = False) -> dict[str, Any]:
    """The stack's shared values plus this job's own: what `helm install` gets."""
    own: dict[str, Any] = {
        "job": {"pods": {"min": job.pods_min, "max": job.pods_max}, "procsPerPod": job.procs_per_pod},
        "resources": {"gpusPerPod": job.gpus_per_pod},
        "serviceAccount": service_account(outputs, job.name),
        # Opt-in (submit --tensorboard): its Deployment outlives the job, on a system node, holding the claim.
        "tensorboard": {"enabled": tensorboard},
    }
    if target.is_trainer:
        train = dict(job.train)
        # Where fetch-data puts the data set (jobSubmission.trainData); a stack from before that output
        # still has the cache's values.
        cache = (outputs.values.get("storage") or {}).get("cache") or {}
        data = outputs.train_data or (cache.get("mountPath") or chart_default_values()["storage"]["cache"]["mountPath"]
                                      if cache.get("enabled") else None)
        if data is not None:
            train["data"] = data
        train["extraArgs"] = [*train.get("extraArgs", []), SNAPSHOT_FLAG, run_prefix(outputs, job.name)]
        own["train"] = train
    else:
        own["command"] = {"module": target.module or "", "script": target.script or "", "args": list(target.args)}
    if image is not None:
        own["image"] = dict(image)
    if sweep is not None:
        own["podLabels"] = {SWEEP_LABEL: sweep}
    return deep_merge(outputs.values, own)



def check_name(outputs: StackOutputs, name: str) -> None:
    """trainstack:job.name's rule alone (a one-node trainer job with the trainer's defaults passes the rest)."""
    check(outputs, name, (1, 1), Target())
