"""Volumes: the shared PVC, /dev/shm, the object-store cache with its init step, TensorBoard."""

from __future__ import annotations

from .chart import RELEASE, by_kind, load_values, one, render, trainer


def volumes(objects):
    return {v["name"]: v for v in one(objects, "Job")["spec"]["template"]["spec"]["volumes"]}


def mounts(container):
    return {m["name"]: m for m in container["volumeMounts"]}


def init_containers(objects):
    return one(objects, "Job")["spec"]["template"]["spec"].get("initContainers", [])


def test_shared_pvc_is_mounted_for_data_and_checkpoints(rendered):
    objects = rendered["gpu-4x8-queue-pvc"]
    assert volumes(objects)["shared"]["persistentVolumeClaim"] == {"claimName": "shared-runs"}
    assert mounts(trainer(objects))["shared"] == {"name": "shared", "mountPath": "/mnt/shared"}


def test_without_a_pvc_a_single_node_writes_to_pod_storage(rendered):
    assert volumes(rendered["cpu-single-node"])["shared"] == {"name": "shared", "emptyDir": {}}


def test_dev_shm_is_a_sized_memory_volume(rendered):
    objects = rendered["gpu-4x8-queue-pvc"]
    assert volumes(objects)["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert mounts(trainer(objects))["dshm"]["mountPath"] == "/dev/shm"


def test_s3_cache_is_filled_by_the_pinned_aws_cli_before_training(rendered):
    objects = rendered["cache-s3"]
    [fetch] = init_containers(objects)
    assert fetch["image"] == "amazon/aws-cli:2.27.9"
    assert fetch["command"] == ["aws", "s3", "sync", "--no-progress", "s3://trainstack-data/tokens", "/mnt/cache"]
    assert mounts(fetch)["cache"]["mountPath"] == "/mnt/cache" and not mounts(fetch)["cache"].get("readOnly")
    assert volumes(objects)["cache"]["emptyDir"] == {"sizeLimit": "500Gi"}
    # Training only reads the cache.
    assert mounts(trainer(objects))["cache"] == {"name": "cache", "mountPath": "/mnt/cache", "readOnly": True}


def test_gcs_cache_is_filled_by_the_pinned_cloud_sdk(rendered):
    [fetch] = init_containers(rendered["nemo-script-gcs"])
    assert fetch["image"] == "google/cloud-sdk:530.0.0-slim"
    assert fetch["command"][:4] == ["gcloud", "storage", "rsync", "--recursive"]
    assert fetch["command"][4:] == [load_values("nemo-script-gcs")["storage"]["cache"]["sourceUri"], "/mnt/cache"]


def test_no_cache_no_init_step(rendered):
    assert not init_containers(rendered["gpu-4x8-queue-pvc"])
    assert "cache" not in volumes(rendered["gpu-4x8-queue-pvc"])


def test_tensorboard_reads_the_runs_event_files_read_only(rendered):
    objects = rendered["tensorboard"]
    deployment = one(objects, "Deployment", f"{RELEASE}-tensorboard")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    shared = next(v for v in pod["volumes"] if v["name"] == "shared")

    assert "--logdir=/mnt/shared/runs/tb-demo/tensorboard" in container["args"]
    assert container["image"] == trainer(objects)["image"]  # the training image ships tensorboard
    assert shared["persistentVolumeClaim"] == {"claimName": "shared-runs", "readOnly": True}
    assert mounts(container)["shared"]["readOnly"] is True

    service = one(objects, "Service", f"{RELEASE}-tensorboard")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_tensorboard_runs_its_own_small_image_when_given():
    values = load_values("tensorboard")
    digest = "sha256:" + "ab" * 32
    values["tensorboard"]["image"] = {"repository": "registry.example.com/trainstack", "digest": digest}
    objects = render(values)
    [container] = one(objects, "Deployment", f"{RELEASE}-tensorboard")["spec"]["template"]["spec"]["containers"]

    assert container["image"] == f"registry.example.com/trainstack@{digest}"
    assert container["image"] != trainer(objects)["image"]  # the trainer keeps the training image
    assert container["command"] == ["tensorboard"]


def test_tensorboard_and_etcd_are_off_by_default(rendered):
    assert not by_kind(rendered["gpu-4x8-queue-pvc"], "Deployment")


def test_tensorboard_follows_a_custom_run_directory():
    values = load_values("tensorboard")
    values["train"]["out"] = "/mnt/shared/experiments/7"
    [container] = one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--logdir=/mnt/shared/experiments/7/tensorboard" in container["args"]
