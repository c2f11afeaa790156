"""Nobody types a master address: node 0 of the Indexed Job hosts the rendezvous behind a headless
Service, the run id is unique per Job, and scaling within min..max keeps the pod template."""

from __future__ import annotations

import pytest
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

from .chart import (
    NAMESPACE,
    RELEASE,
    TRAINING_SETS,
    deep_merge,
    load_values,
    one,
    parse_launch,
    render,
    trainer,
)

C10D_SETS = [name for name in TRAINING_SETS if load_values(name).get("job", {}).get("rdzvBackend", "c10d") == "c10d"]
GPU_VALUES = load_values("gpu-4x8-queue-pvc")


def pod_template(objects):
    return one(objects, "Job")["spec"]["template"]


@pytest.mark.parametrize("value_set", C10D_SETS)
def test_rendezvous_endpoint_is_node_0_through_the_headless_service(rendered, value_set):
    objects = rendered[value_set]
    job, service = one(objects, "Job"), one(objects, "Service", RELEASE)
    template = job["spec"]["template"]
    host, port = parse_rendezvous_endpoint(parse_launch(trainer(objects)).rdzv_endpoint, default_port=-1)

    # An Indexed Job names pod i's host "<job>-<i>"; with subdomain = the headless Service's name
    # it resolves as <job>-<i>.<service>.<namespace>.svc.<cluster domain>.
    assert job["spec"]["completionMode"] == "Indexed"
    assert template["spec"]["subdomain"] == service["metadata"]["name"]
    assert host == f"{job['metadata']['name']}-0.{service['metadata']['name']}.{NAMESPACE}.svc.cluster.local"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert port == service["spec"]["ports"][0]["port"] == trainer(objects)["ports"][0]["containerPort"]


def test_rendezvous_port_and_cluster_domain_come_from_values():
    objects = render(deep_merge(GPU_VALUES, {"job": {"rdzvPort": 29500, "clusterDomain": "corp.internal"}}))
    host, port = parse_rendezvous_endpoint(parse_launch(trainer(objects)).rdzv_endpoint, default_port=-1)
    assert (host.endswith(".svc.corp.internal"), port) == (True, 29500)
    assert one(objects, "Service", RELEASE)["spec"]["ports"][0]["port"] == 29500


def test_etcd_backend_points_at_the_charts_etcd_service(rendered):
    objects = rendered["etcd"]
    launch = parse_launch(trainer(objects))
    host, port = parse_rendezvous_endpoint(launch.rdzv_endpoint, default_port=-1)
    etcd_service = one(objects, "Service", f"{RELEASE}-etcd")
    etcd = one(objects, "Deployment", f"{RELEASE}-etcd")["spec"]["template"]["spec"]["containers"][0]

    assert launch.rdzv_backend == "etcd"
    assert host == f"{RELEASE}-etcd.{NAMESPACE}.svc.cluster.local"
    assert port == etcd_service["spec"]["ports"][0]["port"] == etcd["ports"][0]["containerPort"]
    assert "--enable-v2=true" in etcd["command"]  # torchrun's etcd backends speak the v2 API
    assert etcd_service["spec"]["selector"].items() <= (
        one(objects, "Deployment", f"{RELEASE}-etcd")["spec"]["template"]["metadata"]["labels"].items())


def test_default_run_id_is_the_release_plus_the_job_uid(rendered):
    container = trainer(rendered["cpu-single-node"])
    assert parse_launch(container).rdzv_id == f"{RELEASE}-$(TRAINSTACK_JOB_UID)"
    uid_env = next(env for env in container["env"] if env["name"] == "TRAINSTACK_JOB_UID")
    # Set on every pod by the Job controller; unique per Job object, stable for its whole life.
    assert uid_env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/controller-uid']"


def test_run_ids_differ_between_releases():
    values = load_values("cpu-single-node")
    ids = {parse_launch(trainer(render(values, release=name))).rdzv_id for name in ("run-a", "run-b")}
    assert len(ids) == 2


def test_an_explicit_run_id_is_used_verbatim():
    container = trainer(render(deep_merge(load_values("cpu-single-node"), {"job": {"runId": "exp-42"}})))
    assert parse_launch(container).rdzv_id == "exp-42"
    # The Job's own identity stays (the run lock and the lost-peer ledger tell two Jobs of one run id apart).
    assert "TRAINSTACK_JOB_UID" in {env["name"] for env in container["env"]}


def test_upgrade_renders_the_same_pod_template():
    # A Job's pod template is immutable: an upgrade with unchanged values must not touch it
    # (no revision-dependent or random content such as a re-randomised run id).
    install = render(GPU_VALUES, revision=1, is_install=True)
    upgrade = render(GPU_VALUES, revision=7, is_upgrade=True)
    assert pod_template(install) == pod_template(upgrade)


def test_scaling_within_min_and_max_changes_only_parallelism_and_completions():
    # Elastic Indexed Job: parallelism and completions may change together on a running Job;
    # torchrun's --nnodes MIN:MAX stays, so the running pods re-rendezvous instead of restarting.
    full = render(GPU_VALUES)
    scaled = render(deep_merge(GPU_VALUES, {"job": {"pods": {"replicas": 2}}}))
    assert pod_template(full) == pod_template(scaled)
    assert [one(o, "Job")["spec"][k] for o in (full, scaled) for k in ("parallelism", "completions")] == [4, 4, 2, 2]


def test_replicas_default_to_max_nodes(rendered):
    spec = one(rendered["gpu-4x8-queue-pvc"], "Job")["spec"]
    assert spec["parallelism"] == spec["completions"] == GPU_VALUES["job"]["pods"]["max"]


def test_changing_the_node_range_changes_the_pod_template():
    # Documented: new min/max means a new Job (it resumes from the newest checkpoint).
    wider = render(deep_merge(GPU_VALUES, {"job": {"pods": {"max": 8}}}))
    assert pod_template(wider) != pod_template(render(GPU_VALUES))
