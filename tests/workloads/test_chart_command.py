"""The trainer's command, read by the real parsers: torchrun's, then trainstack.contract.cli.build_parser()."""

from __future__ import annotations

import os
import re
import sys
from unittest import mock

import pytest
from torch.distributed.run import config_from_args

from trainstack.contract.cli import build_parser

from .chart import RELEASE, TRAINING_SETS, deep_merge, load_values, parse_launch, render, trainer

IMAGE = load_values("cpu-single-node")["image"]
BUILT_IN_TRAINER_SETS = [name for name in TRAINING_SETS if not load_values(name).get("command")]


def launch_config(container):
    """torchrun's LaunchConfig for this container and the argv of each worker it would start."""
    with mock.patch.dict(os.environ):  # config_from_args may set OMP_NUM_THREADS
        config, executable, worker_args = config_from_args(parse_launch(container))
    assert executable == sys.executable and worker_args[0] == "-u"
    return config, worker_args[1:]


def module_args(container, module="training"):
    """What `python -m <module>` receives in each worker."""
    _, argv = launch_config(container)
    assert argv[:2] == ["-m", module], argv
    return argv[2:]


def expand_env_refs(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of container args; an undefined reference stays literal."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


@pytest.mark.parametrize("value_set", TRAINING_SETS)
def test_launcher_flags_match_the_values(rendered, value_set):
    job_values = deep_merge(
        {"pods": {"min": 1, "max": 1}, "procsPerPod": 1, "maxRestarts": 3, "rdzvBackend": "c10d"},
        load_values(value_set).get("job", {}))
    config, _ = launch_config(trainer(rendered[value_set]))

    assert (config.min_nodes, config.max_nodes) == (job_values["pods"]["min"], job_values["pods"]["max"])
    assert config.nproc_per_node == job_values["procsPerPod"]
    assert config.max_restarts == job_values["maxRestarts"]
    assert config.rdzv_backend == job_values["rdzvBackend"]
    assert config.rdzv_configs["join_timeout"] == "1800"
    assert config.rdzv_configs["last_call_timeout"] == "10"
    assert config.run_id.startswith(f"{RELEASE}-")


@pytest.mark.parametrize("backend", ["c10d", "etcd-v2"])
def test_rendezvous_timeouts_reach_torchs_rendezvous_handler(backend):
    """The values, through torchrun's parser, become the timeouts of the handler torchrun builds."""
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    values = deep_merge(load_values("gpu-4x8-queue-pvc"),
                        {"job": {"joinTimeoutSeconds": 900, "lastCallTimeoutSeconds": 45, "rdzvBackend": backend},
                         "etcd": {"enabled": backend != "c10d"}})
    config, _ = launch_config(trainer(render(values)))
    params = RendezvousParameters(config.rdzv_backend, config.rdzv_endpoint, config.run_id, config.min_nodes,
                                  config.max_nodes, **config.rdzv_configs)
    handler = create_handler(mock.Mock(), mock.Mock(), params)
    assert (handler.settings.timeout.join.total_seconds(), handler.settings.timeout.last_call.total_seconds()) == \
        (900, 45)


@pytest.mark.parametrize("value_set", TRAINING_SETS)
def test_every_env_reference_in_the_args_is_defined(rendered, value_set):
    container = trainer(rendered[value_set])
    defined = {env["name"] for env in container["env"]}
    referenced = set(re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", " ".join(container["args"])))
    assert referenced <= defined, f"kubelet would pass {referenced - defined} through unexpanded"


def test_default_run_id_expands_to_release_and_job_uid(rendered):
    container = trainer(rendered["cpu-single-node"])
    config, _ = launch_config(container)
    uid = "6f1c2d9e-0b7a-4c55-9a43-2e8f3b1d7c10"
    assert expand_env_refs(config.run_id, {"TRAINSTACK_JOB_UID": uid}) == f"{RELEASE}-{uid}"


@pytest.mark.parametrize("value_set", BUILT_IN_TRAINER_SETS)
def test_train_args_parse_with_the_training_cli(rendered, value_set):
    args = build_parser().parse_args(module_args(trainer(rendered[value_set])))

    train = deep_merge({"data": "/mnt/shared/data", "preset": "gpt2", "maxSteps": 1000, "batchSize": 8,
                        "checkpointEvery": 200, "out": f"/mnt/shared/runs/{RELEASE}"},
                       load_values(value_set).get("train", {}))
    assert args.command == "train"
    assert args.data == train["data"]
    assert args.out == train["out"]
    assert args.preset == train["preset"]
    assert args.max_steps == train["maxSteps"]
    assert args.batch_size == train["batchSize"]
    assert args.checkpoint_every == train["checkpointEvery"]
    assert args.global_batch_size == train.get("globalBatchSize")
    assert args.init_from == (train.get("initFrom") or None)


def test_extra_train_args_reach_the_cli(rendered):
    args = build_parser().parse_args(module_args(trainer(rendered["gpu-4x8-queue-pvc"])))
    assert (args.lr, args.precision) == (3e-4, "bf16")


def test_large_step_counts_render_as_integers():
    # Helm numbers are floats: without `int` 1000000 would render as 1e+06 and break the CLI.
    objects = render({"image": IMAGE, "train": {"maxSteps": 1_000_000, "checkpointEvery": 100_000}})
    args = build_parser().parse_args(module_args(trainer(objects)))
    assert (args.max_steps, args.checkpoint_every) == (1_000_000, 100_000)


def test_a_script_target_gets_its_own_args(rendered):
    values = load_values("nemo-script-gcs")
    _, argv = launch_config(trainer(rendered["nemo-script-gcs"]))
    assert argv == [values["command"]["script"], *values["command"]["args"]]


def test_any_module_with_explicit_args():
    objects = render({"image": IMAGE, "command": {"module": "my_project.train", "args": ["--epochs", "3"]}})
    assert module_args(trainer(objects), module="my_project.train") == ["--epochs", "3"]


def test_explicit_args_replace_the_built_in_train_flags():
    objects = render({"image": IMAGE, "command": {"args": ["sample", "/mnt/shared/runs/x"]}})
    assert build_parser().parse_args(module_args(trainer(objects))).command == "sample"
