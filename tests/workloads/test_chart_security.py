"""Hardened by default: non-root, read-only, no capabilities, no API token, secrets by reference,
least-privilege identity and network."""

from __future__ import annotations

import pytest

from .chart import RELEASE, VALUE_SETS, by_kind, deep_merge, load_values, one, pod_specs, render, trainer

GPU_VALUES = load_values("gpu-4x8-queue-pvc")

# The documented exceptions to the hardened profile (chart README "Security"; checkov_skips.yaml):
# the RxDM sidecars of gpuNetworking and the NCCL check's container. test_chart_gpu_networking.py
# and test_chart_nccl_check.py pin exactly what each of them gets; every other container is
# checked here in full.
EXCEPTION_CONTAINERS = {"tcpx-daemon", "tcpxo-daemon", "nccl-check"}
# hostPath volumes and the containers that may mount them: the RxDM reads the node's NVIDIA
# libraries, /sys and /proc/sys; TCPXO's NCCL plugin (trainer or check) opens /dev/aperture_devices;
# on RDMA nodes the NCCL process reads the gIB installer's tuner configuration (read-only).
HOST_PATH_MOUNTERS = {
    "/home/kubernetes/bin/gib": {"trainer", "nccl-check"},
    "/home/kubernetes/bin/nvidia/lib64": {"tcpx-daemon", "tcpxo-daemon"},
    "/sys": {"tcpx-daemon", "tcpxo-daemon"},
    "/proc/sys": {"tcpx-daemon", "tcpxo-daemon"},
    "/dev/aperture_devices": {"trainer", "nccl-check"},
}


def all_containers(pod):
    return pod.get("initContainers", []) + pod["containers"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_pod_is_hardened(rendered, value_set):
    pods = pod_specs(rendered[value_set])
    assert pods
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_host_paths_only_where_documented(rendered, value_set):
    for pod in pod_specs(rendered[value_set]):
        host_paths = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
        for name, host_path in host_paths.items():
            assert host_path["path"] in HOST_PATH_MOUNTERS, host_path
            assert host_path["type"] == "Directory", name  # never created empty on a wrong node
            mounters = {c["name"] for c in all_containers(pod)
                        for m in c.get("volumeMounts", []) if m["name"] == name}
            assert mounters and mounters <= HOST_PATH_MOUNTERS[host_path["path"]], (name, mounters)


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_container_is_hardened(rendered, value_set):
    for pod in pod_specs(rendered[value_set]):
        for container in all_containers(pod):
            if container["name"] in EXCEPTION_CONTAINERS:
                continue
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, container["name"]
            assert context["privileged"] is False, container["name"]
            assert context["readOnlyRootFilesystem"] is True, container["name"]
            assert context["runAsNonRoot"] is True, container["name"]
            assert context["capabilities"] == {"drop": ["ALL"]}, container["name"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_home_and_caches_are_on_writable_volumes(rendered, value_set):
    # With a read-only root filesystem every path a program writes must be a mounted volume.
    for pod in pod_specs(rendered[value_set]):
        for container in all_containers(pod):
            mounts = [m["mountPath"] for m in container.get("volumeMounts", []) if not m.get("readOnly")]
            writable_env = {e["name"]: e["value"] for e in container.get("env", [])
                            if e["name"] in {"HOME", "XDG_CACHE_HOME", "HF_HOME", "CLOUDSDK_CONFIG"}}
            for name, path in writable_env.items():
                assert any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts), (
                    f"{container['name']}: {name}={path} is not on a writable volume")


def test_service_account_carries_the_cloud_identity_and_no_token(rendered):
    objects = rendered["gpu-4x8-queue-pvc"]
    account = one(objects, "ServiceAccount")
    assert account["metadata"]["annotations"] == GPU_VALUES["serviceAccount"]["annotations"]
    assert account["automountServiceAccountToken"] is False
    assert one(objects, "Job")["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_an_existing_service_account_is_used_not_created(rendered):
    objects = rendered["nemo-script-gcs"]
    assert not by_kind(objects, "ServiceAccount")
    assert one(objects, "Job")["spec"]["template"]["spec"]["serviceAccountName"] == "nemo-trainer"


def test_secrets_are_passed_by_reference_only(rendered):
    objects = rendered["gpu-4x8-queue-pvc"]
    assert not by_kind(objects, "Secret")
    env = {e["name"]: e for e in trainer(objects)["env"]}
    assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY",
                                    "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}
    assert env["WANDB_PROJECT"] == {"name": "WANDB_PROJECT", "value": "trainstack"}


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_only_this_releases_trainers_reach_the_trainers(rendered, value_set):
    objects = rendered[value_set]
    policy = one(objects, "NetworkPolicy", f"{RELEASE}-trainer")
    pod_labels = one(objects, "Job")["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]


def test_etcd_accepts_only_this_releases_trainers(rendered):
    objects = rendered["etcd"]
    policy = one(objects, "NetworkPolicy", f"{RELEASE}-etcd")
    trainer_labels = one(objects, "Job")["spec"]["template"]["metadata"]["labels"]
    [source] = policy["spec"]["ingress"][0]["from"]
    assert source["podSelector"]["matchLabels"].items() <= trainer_labels.items()
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= (
        one(objects, "Deployment", f"{RELEASE}-etcd")["spec"]["template"]["metadata"]["labels"].items())


def test_network_policies_can_be_turned_off():
    assert not by_kind(render(deep_merge(GPU_VALUES, {"networkPolicy": {"enabled": False}})), "NetworkPolicy")
