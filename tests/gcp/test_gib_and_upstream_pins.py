"""Issue 28 items 1, 4 and 7: gIB loaded the way Google's pip-NCCL recipe does it, the gIB installer as upstream's
manifest runs it, and every GPUDirect installer / RxDM tag equal to what container-engine-accelerators names
at a cited commit. What no offline test can prove (the files in the installer image, the tags in the
registry, gIB's network name) is guarded by the NCCL check, tested here, and listed in docs/a4.md / a3.md."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.workloads.chart import CHART_DIR, load_values, one, render
from trainstack.infra.core.versions import GPU_DIRECT_UPSTREAM_PINS
from trainstack.infra.gcp.gpu_direct import plugin_image, rdma_installer_spec
from trainstack.infra.gcp.machine_types import GPU_DIRECT
from trainstack.infra.kubernetes.training_job import chart_default_values

SCRIPT = CHART_DIR / "files" / "nccl_allreduce.py"
spec = importlib.util.spec_from_file_location("nccl_allreduce_gib", SCRIPT)
nccl_allreduce = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nccl_allreduce)

VALUES = chart_default_values()["gpuNetworking"]
GIB_TRANSPORT = "/usr/local/gib/lib64/libnccl-net_internal.so"


def test_gib_is_loaded_as_googles_pip_nccl_recipe_does():
    """GKE tutorial scaling-rl-verl-gke (B200/H200, pip NCCL): NCCL_NET_PLUGIN at gIB's transport, no NCCL_NET."""
    env = VALUES["rdma"]["ncclEnv"]
    assert env["NCCL_NET_PLUGIN"] == GIB_TRANSPORT
    assert "NCCL_NET" not in env
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    # B200 is the chart's default; A3 Ultra (H200) gets its own tuner file from the stack.
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a4.txtpb"
    assert GPU_DIRECT["a4-highgpu-8g"].nccl_env == {}
    assert GPU_DIRECT["a3-ultragpu-8g"].nccl_env == {
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb"}


def test_the_plugin_path_is_where_the_installer_copies_gib_and_the_pod_mounts_it():
    """The installer copies /var/lib/gib/. to the node's /home/kubernetes/bin/gib; the pod mounts that at /usr/local/gib."""
    (init,) = rdma_installer_spec("nvidia-b200")["initContainers"]
    assert "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib" in init["args"][0]
    assert {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"} in init["volumeMounts"]
    pod = one(render(load_values("a4-rdma")), "Job")["spec"]["template"]["spec"]
    assert {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib", "type": "Directory"}} in pod["volumes"]
    container = pod["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "gib")
    assert GIB_TRANSPORT.startswith(mount["mountPath"] + "/lib64/")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NCCL_NET_PLUGIN"] == GIB_TRANSPORT and "NCCL_NET" not in env


def test_the_gib_installer_runs_upstreams_version_without_install_nccl():
    (init,) = rdma_installer_spec("nvidia-b200")["initContainers"]
    assert init["image"] == plugin_image("rdma") == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    assert "/scripts/container_entry.sh install\n" in init["args"][0]
    assert "--install-nccl" not in init["args"][0]


@pytest.mark.parametrize("mode", sorted(GPU_DIRECT_UPSTREAM_PINS))
def test_installer_and_rxdm_tags_are_what_upstream_names_at_the_cited_commit(mode):
    pin = GPU_DIRECT_UPSTREAM_PINS[mode]
    assert re.fullmatch(r"[0-9a-f]{40}", pin.commit)
    assert VALUES[mode]["plugin"]["tag"] == pin.plugin
    assert VALUES[mode].get("rxdm", {}).get("tag") == pin.rxdm
    assert set(GPU_DIRECT_UPSTREAM_PINS) == {profile.mode for profile in GPU_DIRECT.values()}


# --- the NCCL check's guard: a plugin file the environment names must be there before NCCL starts ----------

def test_the_nccl_check_fails_loudly_when_the_gib_transport_is_missing(tmp_path):
    env = {"NCCL_NET_PLUGIN": str(tmp_path / "lib64" / "libnccl-net_internal.so"),
           "LD_LIBRARY_PATH": str(tmp_path), "NCCL_CHECK_EXPECTED_NET": "gIB"}
    problem = nccl_allreduce.missing_plugin_file(env)
    assert problem.startswith(f"NCCL check FAILED: NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']} does not exist in the pod")
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libnccl-net_internal.so").write_bytes(b"")
    assert nccl_allreduce.missing_plugin_file(env) is None


def test_the_nccl_check_fails_loudly_when_the_tuner_file_is_missing(tmp_path):
    tuner = tmp_path / "tuner_config_a4.txtpb"
    env = {"NCCL_NET_PLUGIN": "", "NCCL_TUNER_CONFIG_PATH": str(tuner)}
    assert f"NCCL_TUNER_CONFIG_PATH={tuner} does not exist" in nccl_allreduce.missing_plugin_file(env)
    tuner.write_text("")
    assert nccl_allreduce.missing_plugin_file(env) is None


def test_the_nccl_check_fails_when_no_default_plugin_is_on_the_library_path(tmp_path):
    env = {"LD_LIBRARY_PATH": f"{tmp_path}/a:{tmp_path}/b", "NCCL_CHECK_EXPECTED_NET": "GPUDirectTCPX"}
    assert "no libnccl-net.so in LD_LIBRARY_PATH" in nccl_allreduce.missing_plugin_file(env)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "libnccl-net.so").write_bytes(b"")
    assert nccl_allreduce.missing_plugin_file(env) is None
    # No network expected (mode none, the CPU test runs): nothing to look for.
    assert nccl_allreduce.missing_plugin_file({"LD_LIBRARY_PATH": f"{tmp_path}/a"}) is None


def test_the_nccl_check_accepts_a_plugin_the_loader_finds_in_its_cache(tmp_path, monkeypatch):
    # dlopen("libnccl-net.so") also finds a plugin through ld.so.cache, outside LD_LIBRARY_PATH: no false alarm.
    env = {"LD_LIBRARY_PATH": f"{tmp_path}/a", "NCCL_CHECK_EXPECTED_NET": "AWS Libfabric"}
    found = {"nccl-net": "libnccl-net.so"}
    monkeypatch.setattr(nccl_allreduce.ctypes.util, "find_library", lambda name: found.get(name))
    assert nccl_allreduce.missing_plugin_file(env) is None
    found.clear()
    assert "no libnccl-net.so in LD_LIBRARY_PATH" in nccl_allreduce.missing_plugin_file(env)
