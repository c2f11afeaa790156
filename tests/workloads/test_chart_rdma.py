"""gpuNetworking rdma (A3 Ultra, A4): the RDMA interfaces, the gIB environment and mount, no RxDM; the
NCCL check over it; and Kueue's preferred-topology annotation for multi-node jobs.

Upstream shape: container-engine-accelerators gpudirect-rdma/nccl-test-a4.yaml (992db81) and
cluster-toolkit v1.95.0 examples/gke-a4/nccl-jobset-example.yaml.
"""

from __future__ import annotations

import json

import helm_python as helm
import pytest

from .chart import chart_values, deep_merge, load_values, one, render

DEFAULTS = chart_values()
RDMA = load_values("a4-rdma")
CHECK = load_values("a4-allreduce-check")
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def template(values):
    return one(render(values), "Job")["spec"]["template"]


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_the_pod_joins_the_eight_rdma_networks_as_eth2_to_eth9():
    annotations = template(RDMA)["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces == [{"interfaceName": "eth0", "network": "default"},
                          *({"interfaceName": f"eth{i + 2}", "network": f"rdma-{i}"} for i in range(8))]
    # No RxDM, so no device-injection annotation and no sidecar.
    assert not [k for k in annotations if k.startswith("devices.gke.io")]
    assert not [c for c in template(RDMA)["spec"].get("initContainers", []) if c["name"].endswith("-daemon")]


def test_the_trainer_gets_the_gib_environment_and_its_configuration_read_only():
    pod = template(RDMA)["spec"]
    (trainer,) = pod["containers"]
    env = env_of(trainer)
    assert {k: v for k, v in env.items() if k in DEFAULTS["gpuNetworking"]["rdma"]["ncclEnv"]} == \
        DEFAULTS["gpuNetworking"]["rdma"]["ncclEnv"]
    # Google's pip-NCCL recipe: gIB's transport by path, no NCCL_NET (the check fails if the file is missing).
    assert env["NCCL_NET_PLUGIN"] == "/usr/local/gib/lib64/libnccl-net_internal.so" and "NCCL_NET" not in env
    assert {"name": "gib", "mountPath": "/usr/local/gib", "readOnly": True} in trainer["volumeMounts"]
    assert {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib", "type": "Directory"}} in pod["volumes"]
    # Nothing of TCPX/TCPXO's: no RxDM socket, no /sys or /proc/sys, no aperture devices.
    names = {v["name"] for v in pod["volumes"]}
    assert not names & {"tcpx-socket", "host-sys", "host-proc-sys", "aperture-devices", "nvidia-libraries"}


def test_a_user_env_entry_wins_over_the_gib_setting():
    values = deep_merge(RDMA, {"env": [{"name": "NCCL_DEBUG", "value": "WARN"}]})
    entries = [e for e in template(values)["spec"]["containers"][0]["env"] if e["name"] == "NCCL_DEBUG"]
    assert entries == [{"name": "NCCL_DEBUG", "value": "WARN"}]


def test_the_in_image_check_expects_the_gib_network_and_the_rdma_bar():
    pod = template(CHECK)["spec"]
    (check,) = pod["containers"]
    env = env_of(check)
    assert check["name"] == "nccl-check"
    assert env["NCCL_CHECK_EXPECTED_NET"] == "gIB"
    assert env["NCCL_CHECK_EXPECTED_NCCL"] == DEFAULTS["gpuNetworking"]["rdma"]["nccl"]
    assert env["NCCL_CHECK_MIN_BUSBW"] == "100"  # profiles/a4-highgpu.yaml: cluster-toolkit's A4 bar
    assert env["NCCL_NET_PLUGIN"] == "/usr/local/gib/lib64/libnccl-net_internal.so" and "NCCL_NET" not in env
    assert {"name": "gib", "mountPath": "/usr/local/gib", "readOnly": True} in check["volumeMounts"]


@pytest.mark.parametrize(("values", "fragment"), [
    (deep_merge(CHECK, {"ncclCheck": {"runner": "nccl-tests"}}), "ncclCheck.runner nccl-tests is not wired for"),
    (deep_merge(RDMA, {"gpuNetworking": {"rdma": {"networks": ["rdma-0", "rdma-1"]}}}), "/gpuNetworking/rdma/networks"),
    (deep_merge(RDMA, {"gpuNetworking": {"rdma": {"rxdm": {"repository": "x", "tag": "y"}}}}), "/gpuNetworking/rdma"),
])
def test_what_rdma_cannot_do_is_refused(values, fragment):
    with pytest.raises(helm.HelmError, match=fragment.replace(".", r"\.")):
        render(values)


def test_a_queued_multi_node_job_prefers_one_topology_domain():
    assert template(RDMA)["metadata"]["annotations"][PREFERRED] == "kubernetes.io/hostname"
    single = deep_merge(RDMA, {"job": {"pods": {"min": 1, "max": 1}}})
    unqueued = deep_merge(RDMA, {"kueue": {"queueName": ""}})
    unset = deep_merge(RDMA, {"kueue": {"preferredTopology": ""}})
    for values in (single, unqueued, unset):
        assert PREFERRED not in (template(values)["metadata"].get("annotations") or {})
    # The job itself carries no topology annotation: Kueue reads it from the pod template.
    assert PREFERRED not in (one(render(RDMA), "Job")["metadata"].get("annotations") or {})


def test_the_users_pod_annotation_wins_over_the_preferred_topology():
    values = deep_merge(RDMA, {"podAnnotations": {PREFERRED: "cloud.google.com/gce-topology-block"}})
    assert template(values)["metadata"]["annotations"][PREFERRED] == "cloud.google.com/gce-topology-block"


def test_a_preferred_topology_must_be_a_node_label():
    with pytest.raises(helm.HelmError, match="/kueue/preferredTopology"):
        render(deep_merge(RDMA, {"kueue": {"preferredTopology": "not a label!"}}))


@pytest.mark.parametrize("values", [RDMA, CHECK], ids=["trainer", "allreduce check"])
def test_rdma_mode_keeps_the_hardened_profile_and_adds_no_capability(values):
    # Google's A4 test pods add none (container-engine-accelerators gpudirect-rdma/nccl-test-a4.yaml at
    # 992db81); IPC_LOCK would not reach the non-root trainer anyway (_gpu_networking_rdma.tpl).
    (container,) = template(values)["spec"]["containers"]
    context = container["securityContext"]
    assert (context["privileged"], context["allowPrivilegeEscalation"], context["runAsNonRoot"]) == (False, False, True)
    assert context["capabilities"] == {"drop": ["ALL"]}
