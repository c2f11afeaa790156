"""gpuNetworking efa (EKS p5 / p5e / p5en / p6-b200): every EFA of the node as vpc.amazonaws.com/efa,
aws-ofi-nccl's libfabric environment, no GKE wiring (sidecar, annotations, host volumes), no hugepages
or extra capabilities, and the NCCL check in the training image over it."""

from __future__ import annotations

import helm_python as helm
import pytest

from trainstack.infra.kubernetes.training_job import pod_resources

from .chart import chart_values, deep_merge, load_values, one, render
from .test_gpu_direct_pairing import image_nccl

DEFAULTS = chart_values()
EFA = "vpc.amazonaws.com/efa"


def pod(objects):
    return one(objects, "Job")["spec"]["template"]


def container(objects, name):
    return next(c for c in pod(objects)["spec"]["containers"] if c["name"] == name)


def test_the_trainer_takes_every_efa_of_its_node(rendered):
    trainer = container(rendered["eks-efa-train"], "trainer")
    assert trainer["resources"]["requests"][EFA] == trainer["resources"]["limits"][EFA] == 32
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == 8


@pytest.mark.parametrize("interfaces", [16, 8])
def test_the_stacks_interface_count_is_what_the_pod_asks_for(interfaces):
    values = deep_merge(load_values("eks-efa-train"), {"gpuNetworking": {"efa": {"interfaces": interfaces}}})
    trainer = container(render(values), "trainer")
    assert trainer["resources"]["requests"][EFA] == interfaces


def test_efa_adds_no_gke_wiring_no_hugepages_and_no_capabilities(rendered):
    template = pod(rendered["eks-efa-train"])
    assert not [k for k in template["metadata"].get("annotations", {}) if "gke.io" in k]
    assert not [c for c in template["spec"].get("initContainers", []) if c["name"].endswith("-daemon")]
    assert not [v for v in template["spec"]["volumes"] if "hostPath" in v]
    trainer = container(rendered["eks-efa-train"], "trainer")
    assert not [r for r in trainer["resources"]["requests"] if r.startswith("hugepages-")]
    assert trainer["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_nccl_finds_aws_ofi_nccl_over_libfabrics_efa_provider(rendered):
    env = {e["name"]: e.get("value") for e in container(rendered["eks-efa-train"], "trainer")["env"]}
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["FI_EFA_USE_HUGE_PAGE"] == "0"  # DataLoader workers fork: no huge-page buffers
    assert env["LD_LIBRARY_PATH"].split(":")[0] == "/opt/amazon/ofi-nccl/lib"
    assert env["NCCL_DEBUG"] == "INFO" and "NET" in env["NCCL_DEBUG_SUBSYS"]  # "Using network Libfabric"


def test_a_users_env_entry_wins_over_the_efa_default():
    values = deep_merge(load_values("eks-efa-train"), {"env": [{"name": "FI_EFA_USE_HUGE_PAGE", "value": "1"}]})
    env = [(e["name"], e.get("value")) for e in container(render(values), "trainer")["env"]]
    assert [value for name, value in env if name == "FI_EFA_USE_HUGE_PAGE"] == ["1"]


def test_the_allreduce_check_runs_over_efa_and_expects_the_plugin(rendered):
    check = container(rendered["eks-efa-allreduce-check"], "nccl-check")
    env = {e["name"]: e.get("value") for e in check["env"]}
    assert env["NCCL_CHECK_EXPECTED_NET"] == "Libfabric"
    assert env["NCCL_CHECK_EXPECTED_NCCL"] == DEFAULTS["gpuNetworking"]["efa"]["nccl"]
    assert float(env["NCCL_CHECK_MIN_BUSBW"]) == 100
    assert env["FI_PROVIDER"] == "efa"
    assert check["resources"]["limits"][EFA] == 32


def test_nccl_tests_runner_is_refused_in_efa_mode():
    values = deep_merge(load_values("eks-efa-allreduce-check"), {"ncclCheck": {"runner": "nccl-tests"}})
    with pytest.raises(helm.HelmError, match="ncclCheck.runner nccl-tests needs gpuNetworking.mode tcpx or tcpxo"):
        render(values)


def test_the_queue_counts_the_pods_efas_as_the_chart_renders_them(rendered):
    # trainstack/infra/kubernetes/training_job.pod_resources sizes Kueue's quota without Helm: it must agree with the chart.
    values = load_values("eks-efa-train")
    computed = pod_resources(values)
    (trainer,) = computed["containers"]
    assert trainer["resources"]["requests"][EFA] == 32
    assert computed["initContainers"] == []  # no RxDM sidecar in efa mode


def test_efa_runs_the_images_own_nccl():
    # aws-ofi-nccl is a net plugin loaded by whatever NCCL runs: torch's (the image's label), NCCL >= 2.17.1.
    assert tuple(int(p) for p in DEFAULTS["gpuNetworking"]["efa"]["nccl"].split(".")) == image_nccl()[:2]
    assert "LD_PRELOAD" not in DEFAULTS["gpuNetworking"]["efa"]["ncclEnv"]


def test_the_image_installs_the_efa_stack_only_when_asked_and_checks_awss_signature():
    from .dockerfile import instructions
    from .test_image import DOCKERFILE

    steps = instructions(DOCKERFILE)
    args = [arg for op, arg in steps if op == "ARG"]
    assert 'EFA_INSTALLER_VERSION=""' in args  # the default build (and the offline image tier) skips it
    # AWS's EFA signing key (EC2 user guide efa-start.html, "Verify the EFA installer").
    assert "EFA_KEY_FINGERPRINT=4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC" in args
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert "gpg --batch --verify" in runs
    assert "./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify" in runs  # efa-start-nccl.html
    assert [arg for op, arg in steps if op == "COPY" and "--from=efa-installer" in arg] == [
        "--from=efa-installer /efa /tmp/efa"]
