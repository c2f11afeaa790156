"""profiles/nemo-megatron.yaml on A3 (seed 002): NeMo's pretraining script under torchrun with the
seed's data and experiment directory, reaching the Kueue queue the values name."""

from __future__ import annotations

import os
import re
import sys
from unittest import mock

from torch.distributed.run import config_from_args

from .chart import deep_merge, load_profile, load_values, one, parse_launch, render, trainer

NEMO_SCRIPT = "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py"
SEED_DATA = "gs://nemo-megatron-demo/training-data/tokenized/bpe2gpt/wikipedia"


def hydra_overrides(argv):
    """`++key=value` Hydra overrides -> {key: value}; anything else is a mistake here."""
    overrides = {}
    for arg in argv:
        match = re.fullmatch(r"\+\+([A-Za-z_][\w.]*)=(.+)", arg)
        assert match, f"not a ++key=value Hydra override: {arg!r}"
        overrides[match.group(1)] = match.group(2)
    return overrides


def launch(objects):
    container = trainer(objects)
    assert container["command"] == ["torchrun"]  # NeMo's image has no trainstack package
    with mock.patch.dict(os.environ):
        config, executable, argv = config_from_args(parse_launch(container))
    assert executable == sys.executable and argv[0] == "-u"
    return config, argv[1], hydra_overrides(argv[2:])


def test_torchrun_runs_nemos_pretraining_script_on_every_gpu(rendered):
    values = load_values("a3-nemo")
    config, script, overrides = launch(rendered["a3-nemo"])
    assert script == NEMO_SCRIPT
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (2, 2, 8)
    # NeMo's trainer must agree with what torchrun starts.
    assert int(overrides["trainer.num_nodes"]) == values["job"]["pods"]["max"]
    assert int(overrides["trainer.devices"]) == values["resources"]["gpusPerPod"] == 8


def test_data_comes_from_the_seeds_bucket_through_the_ssd_cache(rendered):
    values = load_values("a3-nemo")
    _, _, overrides = launch(rendered["a3-nemo"])
    cache = values["storage"]["cache"]
    assert cache["enabled"] and cache["sourceUri"] == SEED_DATA
    pod = one(rendered["a3-nemo"], "Job")["spec"]["template"]["spec"]
    [fetch] = [c for c in pod["initContainers"] if c["name"] == "fetch-data"]
    assert fetch["command"][-2:] == [SEED_DATA, "/mnt/cache"]
    # gcloud storage rsync copies the folder's contents: the .bin/.idx pair lands at the cache root.
    assert overrides["model.data.data_prefix"] == "[1.0,/mnt/cache/wikipedia-tokenized-for-gpt2]"
    assert {"name": "cache", "mountPath": "/mnt/cache", "readOnly": True} in trainer(rendered["a3-nemo"])["volumeMounts"]
    # Megatron's index files cannot go next to the read-only data; every node must see rank 0's.
    assert overrides["model.data.index_mapping_dir"].startswith("/mnt/shared/")


def test_experiments_land_on_the_shared_filestore_volume_for_tensorboard(rendered):
    _, _, overrides = launch(rendered["a3-nemo"])
    pod = one(rendered["a3-nemo"], "Job")["spec"]["template"]["spec"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "cluster-filestore"}} in pod["volumes"]
    assert {"name": "shared", "mountPath": "/mnt/shared"} in trainer(rendered["a3-nemo"])["volumeMounts"]
    assert overrides["exp_manager.exp_dir"] == "/mnt/shared/nemo-experiments"
    assert overrides["exp_manager.create_tensorboard_logger"] == "true"
    # One run directory per Job, the same for every pod: the Job UID, expanded by the kubelet.
    assert overrides["exp_manager.version"] == "$(TRAINSTACK_JOB_UID)"
    env = {e["name"]: e for e in trainer(rendered["a3-nemo"])["env"]}
    assert env["TRAINSTACK_JOB_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['batch.kubernetes.io/controller-uid']")


def test_the_queue_label_is_the_configured_queue_not_a_literal(rendered):
    # Seed 002's chart wrote `kueue.x-k8s.io/queue-name: "$root.Values.queue"`: a literal string, so
    # Kueue never matched a LocalQueue and the suspended Job waited forever.
    job = one(rendered["a3-nemo"], "Job")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == load_profile("a3-highgpu")["kueue"]["queueName"]
    assert "suspend" not in job["spec"]  # Kueue's webhook suspends it (test_chart_job_policy.py)
    other = one(render(deep_merge(load_values("a3-nemo"), {"kueue": {"queueName": "research-a3"}})), "Job")
    assert other["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research-a3"
    assert "$" not in str(job["metadata"]["labels"])


def test_nemo_runs_over_tcpx_with_the_seeds_workload_identity(rendered):
    objects = rendered["a3-nemo"]
    pod = one(objects, "Job")["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["name"] == "tcpx-daemon"
    assert {e["name"] for e in trainer(objects)["env"]} >= {"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "LD_LIBRARY_PATH"}
    account = one(objects, "ServiceAccount")
    assert account["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "nemo-data@my-project.iam.gserviceaccount.com"}
