"""gpuNetworking tcpx/tcpxo: the RxDM native sidecar, the multi-network and device-injection
annotations, the NCCL environment, the volumes, the data cache beside them, and `none` unchanged."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from .chart import (
    TRAINING_SETS,
    VALUE_SETS,
    chart_values,
    deep_merge,
    load_values,
    one,
    pod_specs,
    render,
    render_templates,
    trainer,
)

DEFAULTS = chart_values()
GPU_NET_SETS = {"a3-tcpx": "tcpx", "a3-tcpxo": "tcpxo", "a3-nemo": "tcpx"}
EFA_SETS = ["eks-efa-train"]  # gpuNetworking.mode efa (tests/workloads/test_chart_efa.py)
RDMA_SETS = {"a4-rdma"}  # gpuNetworking.mode rdma: tests/workloads/test_chart_rdma.py
NONE_SETS = [name for name in TRAINING_SETS if name not in GPU_NET_SETS and name not in EFA_SETS and name not in RDMA_SETS]

# The released pairs (NCCL plugin installer, RxDM) the chart pins: bump both from one release note.
#   tcpx:  cluster-toolkit modules/compute/gke-node-pool/gpu_direct.tf
#          ("rxdm_version = v2.0.12 # matching nccl-tcpx-installer version v3.1.9")
#   tcpxo: container-engine-accelerators gpudirect-tcpxo/README.md, release of Jan 9, 2026
# container-engine-accelerators gpudirect-tcpx(o)/README.md release notes.
RELEASED_PAIRS = {"tcpx": {("v3.1.12", "v2.0.15"), ("v3.1.9", "v2.0.12")},
                  "tcpxo": {("v1.0.15", "v1.0.21"), ("v1.0.14", "v1.0.20")}}


def pod_template(objects):
    return one(objects, "Job")["spec"]["template"]


def sidecar(objects, mode):
    [daemon] = [c for c in pod_template(objects)["spec"]["initContainers"] if c["name"] == f"{mode}-daemon"]
    return daemon


def env_list(container):
    return [(e["name"], e.get("value")) for e in container["env"]]


@pytest.mark.parametrize("mode", ["tcpx", "tcpxo"])
def test_plugin_and_rxdm_are_a_released_pair(mode):
    settings = DEFAULTS["gpuNetworking"][mode]
    assert (settings["plugin"]["tag"], settings["rxdm"]["tag"]) in RELEASED_PAIRS[mode]
    assert settings["plugin"]["repository"].startswith(f"us-docker.pkg.dev/gce-ai-infra/gpudirect-{mode}/")
    assert settings["rxdm"]["repository"].startswith(f"us-docker.pkg.dev/gce-ai-infra/gpudirect-{mode}/")


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_rxdm_runs_as_a_native_sidecar_so_the_job_still_ends(rendered, value_set, mode):
    pod = pod_template(rendered[value_set])["spec"]
    daemon = sidecar(rendered[value_set], mode)
    rxdm = DEFAULTS["gpuNetworking"][mode]["rxdm"]
    assert pod["initContainers"][0] is daemon  # up before the data copy and the trainer
    assert daemon["restartPolicy"] == "Always"
    assert daemon["image"] == f"{rxdm['repository']}:{rxdm['tag']}"
    # The only regular container is the trainer: when it exits, the kubelet stops the sidecar.
    assert [c["name"] for c in pod["containers"]] == ["trainer"]
    assert "nvidia.com/gpu" not in daemon["resources"]["limits"]  # its GPUs come from the annotation


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_the_sidecar_exception_is_exactly_the_documented_one(rendered, value_set, mode):
    context = sidecar(rendered[value_set], mode)["securityContext"]
    added = ["NET_ADMIN"] if mode == "tcpx" else ["NET_ADMIN", "NET_BIND_SERVICE"]
    assert context == {
        "allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": False,
        "runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0,
        # upstream's: the runtime's defaults plus these (issue 17 item 12; not proven reduced on hardware)
        "capabilities": {"add": added}, "seccompProfile": {"type": "RuntimeDefault"}}


def test_tcpx_daemon_command_is_upstreams(rendered):
    daemon = sidecar(rendered["a3-tcpx"], "tcpx")
    assert daemon["command"] == ["/bin/bash", "-c"]
    [script] = daemon["args"]
    umask, _, rest = script.partition(" && exec ")
    assert umask == "umask 0000"
    assert shlex.split(rest) == ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm",
                                 "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx",
                                 "--setup_param", "--verbose 128 2 0 "]


def test_tcpxo_daemon_holds_the_trainer_until_initialised(rendered):
    daemon = sidecar(rendered["a3-tcpxo"], "tcpxo")
    assert "/fts/entrypoint_rxdm_container.sh --num_hops=2" in daemon["args"][0]
    env = dict(env_list(daemon))
    assert env["HEALTH_CHECK_LOG_FILE"] == "/run/health-check"
    assert daemon["startupProbe"]["exec"]["command"] == ["cat", "/run/health-check"]


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_pod_joins_the_gpu_networks_named_by_the_values(rendered, value_set, mode):
    annotations = pod_template(rendered[value_set])["metadata"]["annotations"]
    networks = load_values(value_set).get("gpuNetworking", {}).get(mode, {}).get(
        "networks", DEFAULTS["gpuNetworking"][mode]["networks"])
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert json.loads(annotations["networking.gke.io/interfaces"]) == [
        {"interfaceName": "eth0", "network": "default"},
        *({"interfaceName": f"eth{i}", "network": name} for i, name in enumerate(networks, start=1))]
    assert len(networks) == (4 if mode == "tcpx" else 8)


def test_network_names_are_the_cluster_sides_contract(rendered):
    interfaces = json.loads(pod_template(rendered["a3-tcpxo"])["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", *(f"a3-gpu-{n}" for n in range(1, 9))]
    assert DEFAULTS["gpuNetworking"]["tcpx"]["networks"] == ["vpc1", "vpc2", "vpc3", "vpc4"]
    assert DEFAULTS["gpuNetworking"]["tcpxo"]["networks"] == [f"vpc{n}" for n in range(1, 9)]


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_device_injection_gives_the_rxdm_every_gpu(rendered, value_set, mode):
    annotations = pod_template(rendered[value_set])["metadata"]["annotations"]
    devices = yaml.safe_load(annotations[f"devices.gke.io/container.{mode}-daemon"])
    expected = [f"/dev/nvidia{i}" for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    if mode == "tcpxo":
        expected.append("/dev/dmabuf_import_helper")
    assert devices == [{"path": path} for path in expected]


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_trainer_gets_the_nccl_environment(rendered, value_set, mode):
    env = env_list(trainer(rendered[value_set]))
    names = [name for name, _ in env]
    overrides = {e["name"]: e["value"] for e in load_values(value_set).get("env", [])}
    for name, value in DEFAULTS["gpuNetworking"][mode]["ncclEnv"].items():
        assert (name, overrides.get(name, value)) in env, name
        assert names.count(name) == 1, name


def test_env_overrides_an_nccl_default_once(rendered):
    env = env_list(trainer(rendered["a3-tcpx"]))
    assert [value for name, value in env if name == "NCCL_DEBUG"] == ["WARN"]
    assert DEFAULTS["gpuNetworking"]["tcpx"]["ncclEnv"]["NCCL_DEBUG"] == "INFO"


def test_nccl_defaults_can_be_changed_and_added_in_values():
    values = deep_merge(load_values("a3-tcpx"), {"gpuNetworking": {"tcpx": {"ncclEnv": {
        "NCCL_ALGO": "Ring,Tree", "NCCL_IB_DISABLE": "1"}}}})
    env = dict(env_list(trainer(render(values))))
    assert env["NCCL_ALGO"] == "Ring,Tree" and env["NCCL_IB_DISABLE"] == "1"
    assert env["NCCL_PROTO"] == "Simple"  # the other defaults stay


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_no_container_sets_a_variable_twice(rendered, value_set):
    for pod in pod_specs(rendered[value_set]):
        for container in pod.get("initContainers", []) + pod["containers"]:
            names = [e["name"] for e in container.get("env", [])]
            assert len(names) == len(set(names)), (container["name"], names)


def test_tcpx_socket_is_shared_by_the_daemon_and_nccl_only(rendered):
    objects = rendered["a3-tcpx"]
    pod = pod_template(objects)["spec"]
    [socket] = [v for v in pod["volumes"] if v["name"] == "tcpx-socket"]
    assert socket == {"name": "tcpx-socket", "emptyDir": {}}  # private to the pod
    mounts = {c["name"]: [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "tcpx-socket"]
              for c in pod["initContainers"] + pod["containers"]}
    assert mounts == {"tcpx-daemon": ["/run/tcpx"], "fetch-data": [], "trainer": ["/run/tcpx"]}
    # Where NCCL looks for the daemon's sockets is where the daemon creates them.
    assert dict(env_list(trainer(objects)))["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"
    assert "--uds_path /run/tcpx" in sidecar(objects, "tcpx")["args"][0]


def test_tcpxo_trainer_opens_the_llcm_devices(rendered):
    objects = rendered["a3-tcpxo"]
    mounts = {m["name"]: m["mountPath"] for m in trainer(objects)["volumeMounts"]}
    assert mounts["aperture-devices"] == "/dev/aperture_devices"
    volumes = {v["name"]: v for v in pod_template(objects)["spec"]["volumes"]}
    assert volumes["aperture-devices"]["hostPath"] == {"path": "/dev/aperture_devices", "type": "Directory"}
    assert dict(env_list(trainer(objects)))["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert "tcpx-socket" not in volumes


@pytest.mark.parametrize(("value_set", "mode"), GPU_NET_SETS.items())
def test_the_daemon_reads_the_plugin_libraries_read_only(rendered, value_set, mode):
    daemon = sidecar(rendered[value_set], mode)
    [libraries] = [m for m in daemon["volumeMounts"] if m["name"] == "nvidia-libraries"]
    assert libraries == {"name": "nvidia-libraries", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True}
    volumes = {v["name"]: v for v in pod_template(rendered[value_set])["spec"]["volumes"]}
    assert volumes["nvidia-libraries"]["hostPath"]["path"] == "/home/kubernetes/bin/nvidia/lib64"


def test_gcs_data_reaches_local_ssd_through_workload_identity(rendered):
    objects = rendered["a3-tcpx"]
    values = load_values("a3-tcpx")
    pod = pod_template(objects)["spec"]
    fetch = pod["initContainers"][1]
    assert fetch["name"] == "fetch-data"
    assert fetch["command"] == ["gcloud", "storage", "rsync", "--recursive", values["storage"]["cache"]["sourceUri"],
                                "/mnt/cache"]
    # Credentials: the KSA's Workload Identity binding, through the GKE metadata server. No key file,
    # no secret, no API token in the pod.
    account = one(objects, "ServiceAccount")
    assert account["metadata"]["annotations"] == values["serviceAccount"]["annotations"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert not [v for v in pod["volumes"] if "secret" in v or "projected" in v]
    assert not [e for c in pod["initContainers"] + pod["containers"] for e in c.get("env", [])
                if e["name"] == "GOOGLE_APPLICATION_CREDENTIALS" or "valueFrom" in e and "secretKeyRef" in e["valueFrom"]]
    # The cache is an emptyDir, on local SSD because the pod lands on a local-SSD node; the copy step
    # gets none of the GPU networking.
    assert {"name": "cache", "emptyDir": {"sizeLimit": "2Ti"}} in pod["volumes"]
    assert pod["nodeSelector"]["cloud.google.com/gke-ephemeral-storage-local-ssd"] == "true"
    assert not [e for e in fetch["env"] if e["name"].startswith("NCCL_")]
    assert {m["name"] for m in fetch["volumeMounts"]} == {"tmp", "cache"}


@pytest.mark.parametrize("value_set", NONE_SETS)
def test_none_adds_nothing(rendered, value_set):
    template = pod_template(rendered[value_set])
    pod = template["spec"]
    assert not [k for k in template["metadata"].get("annotations", {}) if "gke.io" in k]
    assert not [c for c in pod.get("initContainers", []) if c["name"].endswith("-daemon")]
    assert not [e for e in trainer(rendered[value_set])["env"] if e["name"].startswith("NCCL_")]
    assert not [v for v in pod["volumes"] if "hostPath" in v or v["name"] == "tcpx-socket"]


@pytest.mark.parametrize("value_set", NONE_SETS)
def test_none_ignores_every_other_gpu_networking_setting(value_set):
    # Byte for byte: with mode none, the per-mode settings cannot leak into a render.
    changed = deep_merge(load_values(value_set), {"gpuNetworking": {
        "tcpx": {"networks": ["a", "b", "c", "d"], "rxdm": {"tag": "v9"}, "ncclEnv": {"NCCL_DEBUG": "TRACE"}},
        "tcpxo": {"plugin": {"tag": "v9"}}, "rxdmResources": {"requests": {"cpu": "3"}}}})
    assert render_templates(changed) == render_templates(load_values(value_set))


def test_user_pod_annotations_merge_with_the_networking_ones():
    values = deep_merge(load_values("a3-tcpx"), {"podAnnotations": {"example.com/team": "research"}})
    annotations = pod_template(render(values))["metadata"]["annotations"]
    assert annotations["example.com/team"] == "research"
    assert annotations["networking.gke.io/default-interface"] == "eth0"
