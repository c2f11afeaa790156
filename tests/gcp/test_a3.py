"""Seed 002 on the `gcp-a3` stack: A3 H100 pools with GPUDirect-TCPX (and TCPXO on A3 Mega), Kueue,
Filestore, local SSD, checked on the real __main__.py under mocks with Pulumi.gcp-a3.yaml's values."""

from __future__ import annotations

import pulumi
import pytest
import yaml

from tests import stack_runs
from tests.gcp.stack_runs import (
    CLUSTER,
    GET_ENGINE_VERSIONS,
    NETWORK,
    NODE_POOL,
    PROJECT,
    PVC,
    RELEASE,
    REPO,
    SUBNETWORK,
    as_cli_config,
    provider_calls,
    provider_outputs,
)
from tests.golden import assert_matches_golden
from tests.workloads.chart import render
from trainstack.infra.gcp.config import parse_gcp_config
from trainstack.infra.gcp.gpu_direct import plugin_image
from trainstack.infra.gcp.machine_types import GPU_DIRECT
from trainstack.infra.kubernetes.pod_requests import parse_quantity, pod_requests
from trainstack.infra.kubernetes.training_job import chart_default_values

STACK_FILE = REPO / "Pulumi.gcp-a3.yaml"
GOLDEN = REPO / "tests" / "gcp" / "golden" / "gcp-a3-stack.json"
POOL = "trainstack:gpuPools.a3"
FIREWALL = "gcp:compute/firewall:Firewall"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
GKE_NETWORK = "kubernetes:networking.gke.io/v1:Network"
KUEUE_RELEASE = "kueue"


def a3_config(overrides=None, remove=()):
    project = {} if "gcp:project" in remove else {"gcp:project": PROJECT}
    return stack_runs.config_with(STACK_FILE, {**project, "trainstack:job": {"enabled": True},
                                               **(overrides or {})}, remove)


def run(config=None, *, preview=False, calls=provider_calls):
    return stack_runs.run_main(a3_config() if config is None else config, stack="gcp-a3",
                               outputs=None if preview else provider_outputs, calls=calls, preview=preview)


@pytest.fixture(scope="module")
def up():
    return run()


def test_four_gpu_vpcs_with_one_subnet_each_reach_the_pool(up):
    gpu_networks = [n for n in up.by_type(NETWORK) if "gpunet" in n.inputs.get("name", "")]
    assert sorted(n.inputs["name"] for n in gpu_networks) == [f"trainstack-gcp-a3-tcpx-gpunet-{i}" for i in range(4)]
    assert all(n.inputs["mtu"] == 8244 for n in gpu_networks)
    subnets = [s for s in up.by_type(SUBNETWORK) if "gpunet" in s.inputs.get("name", "")]
    assert len(subnets) == 4
    cidrs = {s.inputs["name"]: s.inputs["ipCidrRange"] for s in subnets}
    # The GPU VPCs' own rules (the control plane's rule to Kueue lives in the cluster's network).
    firewalls = [f for f in up.by_type(FIREWALL) if f.name != "trainstack-control-plane-calls"]
    assert len(firewalls) == 4
    for firewall in firewalls:
        (source,) = firewall.inputs["sourceRanges"]
        assert source in cidrs.values()  # only the VPC's own subnet
        assert firewall.inputs["direction"] == "INGRESS"
    pool = up.one(NODE_POOL, "trainstack-gpu-a3").inputs
    extra = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [(e["network"], e["subnetwork"]) for e in extra] == [
        (f"trainstack-gcp-a3-tcpx-gpunet-{i}", f"trainstack-gcp-a3-tcpx-gpunet-{i}-subnet") for i in range(4)]


def test_cluster_has_multi_networking(up):
    cluster = up.one(CLUSTER).inputs
    assert cluster["enableMultiNetworking"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"


def test_a3_pool_is_compact_on_local_ssd_and_scales_from_zero(up):
    pool = up.one(NODE_POOL, "trainstack-gpu-a3").inputs
    node = pool["nodeConfig"]
    assert node["machineType"] == "a3-highgpu-8g"
    assert node["guestAccelerators"][0]["type"] == "nvidia-h100-80gb"
    assert node["guestAccelerators"][0]["count"] == 8
    assert node["guestAccelerators"][0]["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert node["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16}
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    assert "spot" not in node and "flexStart" not in node and "reservationAffinity" not in node


@pytest.mark.parametrize(("capacity", "expected_node", "auto_repair"), [
    ({"capacity": "SPOT"}, {"spot": True, "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}, True),
    ({"capacity": "FLEX_START", "placement": "ANY"},
     {"flexStart": True, "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}, False),
    ({"capacity": "RESERVATION", "reservation": "h100-block", "placement": "ANY"},
     {"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                              "key": "compute.googleapis.com/reservation-name", "values": ["h100-block"]}}, True),
])
def test_capacity_choices_are_wired(capacity, expected_node, auto_repair):
    result = run(a3_config({"trainstack:gpuPools": {"a3": capacity}}))
    pool = result.one(NODE_POOL, "trainstack-gpu-a3").inputs
    assert expected_node.items() <= pool["nodeConfig"].items()
    assert pool["management"]["autoRepair"] is auto_repair
    assert ("placementPolicy" in pool) is (capacity.get("placement", "COMPACT") == "COMPACT")


def test_networking_objects_and_daemonsets_are_on_the_cluster_after_it(up):
    k8s_provider = up.one("pulumi:providers:kubernetes")
    assert k8s_provider.inputs["kubeconfig"]  # built from the cluster's outputs
    params = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in up.by_type(PARAM_SET)}
    assert params == {f"vpc{i + 1}": {"vpc": f"trainstack-gcp-a3-tcpx-gpunet-{i}",
                                      "vpcSubnet": f"trainstack-gcp-a3-tcpx-gpunet-{i}-subnet",
                                      "deviceMode": "NetDevice"} for i in range(4)}
    networks = up.by_type(GKE_NETWORK)
    assert sorted(n.inputs["metadata"]["name"] for n in networks) == ["vpc1", "vpc2", "vpc3", "vpc4"]
    daemonsets = {d.inputs["metadata"]["name"]: d for d in up.by_type(DAEMON_SET)}
    assert set(daemonsets) == {"nccl-tcpx-installer", "device-injector", "optmem-max"}
    # upstream's optmem_max tuning for TCPX (container-engine-accelerators gpudirect-tcpx/optmem-max-ds.yaml)
    optmem = daemonsets["optmem-max"].inputs["spec"]["template"]["spec"]
    assert optmem["hostNetwork"] is True
    [tune] = optmem["initContainers"]
    assert "echo 131072 > /proc/sys/net/core/optmem_max" in tune["command"][-1]
    assert optmem["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["nvidia-h100-80gb"]
    installer = daemonsets["nccl-tcpx-installer"].inputs["spec"]["template"]["spec"]
    # The installer's plugin is the one the chart's RxDM sidecar is paired with.
    tcpx = chart_default_values()["gpuNetworking"]["tcpx"]["plugin"]
    assert installer["initContainers"][0]["image"] == f"{tcpx['repository']}:{tcpx['tag']}" == plugin_image("tcpx")
    terms = installer["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["nvidia-h100-80gb"]
    for resource in [*up.by_type(PARAM_SET), *networks, *daemonsets.values()]:
        assert resource.provider == k8s_provider.urn
    # The job waits for all of it.
    job = up.one("trainstack:index:TrainingJob")
    assert {n.urn for n in networks} | {d.urn for d in daemonsets.values()} <= set(job.dependencies)


def test_job_gets_tcpx_wiring_the_queue_local_ssd_and_filestore(up):
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["gpuNetworking"] == {"mode": "tcpx", "tcpx": {"networks": ["vpc1", "vpc2", "vpc3", "vpc4"]}}
    assert values["kueue"]["queueName"] == "a3-queue"
    assert values["nodeSelector"]["cloud.google.com/gke-ephemeral-storage-local-ssd"] == "true"
    assert values["resources"]["gpusPerPod"] == 8
    assert values["resources"]["requests"] == {"cpu": "180", "memory": "1500Gi"}
    assert values["job"]["pods"] == {"min": 2, "max": 2} and values["job"]["procsPerPod"] == 8
    assert values["storage"]["pvc"] == up.one(PVC).inputs["metadata"]["name"]
    assert values["tensorboard"]["enabled"] is True and values["tensorboard"]["image"]["tag"] == ""  # its own image


def test_kueue_queue_is_a3_queue_with_the_pools_quota_after_its_release(up):
    release = up.one(RELEASE, "trainstack-kueue")
    queue = up.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    assert queue.inputs["metadata"]["name"] == "a3-queue"
    assert up.one("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue").inputs["metadata"]["name"] == "a3-queue"
    quotas = {r["name"]: r["nominalQuota"] for r in queue.inputs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    # Two pods of what the chart renders for this job, counted as Kueue counts them: the trainer
    # plus the RxDM sidecar (181 CPUs, 1501Gi each), and the local disk for /tmp (the data cache requests none by default).
    assert quotas == {"cpu": "362", "memory": "3002Gi", "nvidia.com/gpu": 16, "ephemeral-storage": "64Gi"}
    rendered = render(up.one(RELEASE, "train").inputs["values"])
    pod = next(o for o in rendered if o["kind"] == "Job")["spec"]["template"]["spec"]
    assert {name: parse_quantity(q) for name, q in quotas.items()} == {
        name: 2 * value for name, value in pod_requests(pod).items()}
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):
        assert release.urn in up.one(f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}").dependencies
    assert release.inputs["name"] == KUEUE_RELEASE


def test_topology_aware_placement_is_opt_in_on_a3(up):
    # Off by default: the existing queue and flavor stay as they were before Kueue TAS (docs/a4.md).
    flavor = up.one("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor").inputs
    assert flavor["metadata"]["name"] == "training-nodes" and "topologyName" not in flavor["spec"]
    assert up.by_type("kubernetes:kueue.x-k8s.io/v1beta2:Topology") == []
    assert "admissionChecksStrategy" not in up.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs["spec"]
    opted_in = run(a3_config({"trainstack:gpuPools": {"a3": {"topologyAware": True}}}))
    topology = opted_in.one("kubernetes:kueue.x-k8s.io/v1beta2:Topology").inputs["metadata"]["name"]
    flavor = opted_in.one("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor").inputs
    queue = opted_in.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs["spec"]
    # A new flavor name: Pulumi creates the topology flavor and moves the queue to it (kueue.py).
    assert flavor["metadata"]["name"] == flavor["spec"]["topologyName"] == topology != "training-nodes"
    assert queue["resourceGroups"][0]["flavors"][0]["name"] == topology
    # The opted-in pool scales from zero: its provisioning check retries for days, as on A4 and aws-p5.
    retry = opted_in.one("kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig").inputs["spec"]["retryStrategy"]
    assert retry["backoffLimitCount"] == 1000


def test_filestore_is_zonal_1tib_in_the_a3_zone(up):
    instance = up.one("gcp:filestore/instance:Instance").inputs
    assert (instance["tier"], instance["fileShares"]["capacityGb"], instance["location"]) == (
        "ZONAL", 1024, "us-central1-c")


def _helm_install_values(command: str) -> tuple[list[str], dict]:
    """The `helm install` words of a command and the values they give the chart (-f files, then --set)."""
    import shlex

    from tests.stack_runs import REPO
    from trainstack.infra.kubernetes.training_job import deep_merge

    words = shlex.split(command.split(" && ", 1)[0])
    values: dict = {}
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "-f":
            values = deep_merge(values, yaml.safe_load((REPO / value).read_text()))
        elif flag in ("--set", "--set-string"):
            path, _, text = value.partition("=")
            typed = text if flag == "--set-string" else {"true": True, "false": False}.get(
                text, int(text) if text.isdigit() else text)
            for key in reversed(path.split(".")):
                typed = {key: typed}
            values = deep_merge(values, typed)
    return words, values


def test_nccl_check_command_runs_the_in_image_check_and_fails_below_the_bar(up):
    command = up.exports["ncclCheckCommand"]
    assert command.startswith("helm install nccl-check workloads/charts/training-job -n default ")
    assert "-f workloads/charts/training-job/profiles/a3-highgpu.yaml" in command
    assert "-f workloads/charts/training-job/profiles/nccl-allreduce.yaml" in command
    assert command.endswith("helm uninstall nccl-check -n default; test $passed -eq 0")
    _, values = _helm_install_values(command)
    assert values["ncclCheck"]["runner"] == "trainer" and values["ncclCheck"]["minBusBandwidthGBps"] == 25
    objects = render(values, release="nccl-check")
    job = next(o for o in objects if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    # The stack's training image by digest, with the job's own NCCL settings, as the jobs' ServiceAccount.
    assert container["name"] == "nccl-check" and container["image"] == up.exports["imageRef"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    stack_job = render(up.one(RELEASE, "train").inputs["values"])
    trainer_env = {e["name"]: e.get("value") for e in next(o for o in stack_job if o["kind"] == "Job")[
        "spec"]["template"]["spec"]["containers"][0].get("env", [])}
    assert "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" in env
    assert {k: v for k, v in trainer_env.items() if k.startswith("NCCL_")} == {
        k: v for k, v in env.items() if k.startswith("NCCL_") and not k.startswith("NCCL_CHECK")}
    assert pod["serviceAccountName"] == up.exports["jobSubmission"]["serviceAccount"]
    assert not [o for o in objects if o["kind"] == "ServiceAccount"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-queue"
    # nccl-tests stays one command away.
    _, tests_values = _helm_install_values(up.exports["ncclTestsCommand"])
    assert tests_values["ncclCheck"]["runner"] == "nccl-tests" and "image" not in tests_values


@pytest.mark.parametrize("output", ["ncclCheckCommand", "ncclTestsCommand"])
def test_the_nccl_check_names_the_job_owner_so_destroy_deletes_it(up, output):
    # An interrupted command (Ctrl-C in its wait, a laptop asleep) leaves the check's 2-pod Job on the
    # claim and in the queue; owned like every job, pulumi destroy deletes it before them.
    _, values = _helm_install_values(up.exports[output])
    owner = up.exports["jobSubmission"]["values"]["owner"]
    assert values["owner"] == owner
    [job] = [o for o in render(values, release="nccl-check") if o["kind"] == "Job"]
    assert job["metadata"]["ownerReferences"] == [{**owner, "blockOwnerDeletion": True}]


def test_a3_mega_gets_tcpxo_with_eight_networks():
    result = run(a3_config({"trainstack:gpuPools": {"a3": {"machineType": "a3-megagpu-8g"}}}))
    pool = result.one(NODE_POOL, "trainstack-gpu-a3").inputs
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 8
    assert pool["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-h100-mega-80gb"
    values = result.one(RELEASE, "train").inputs["values"]
    assert values["gpuNetworking"]["mode"] == "tcpxo"
    assert len(values["gpuNetworking"]["tcpxo"]["networks"]) == 8
    names = {d.inputs["metadata"]["name"] for d in result.by_type(DAEMON_SET)}
    assert names == {"nccl-tcpxo-installer", "device-injector"}
    assert "a3-megagpu.yaml" in result.exports["ncclCheckCommand"]
    assert "minBusBandwidthGBps=30" in result.exports["ncclCheckCommand"]


def test_other_gpu_machines_keep_the_plain_pool():
    # No price for G2 in the table: the budget cannot be checked, so this run sets none.
    result = run(a3_config({"trainstack:gpuPools": {"a3": {"machineType": "g2-standard-48", "diskSizeGb": 100}},
                            "trainstack:job": {"enabled": True, "podsMin": 1, "podsMax": 2}},
                           remove=("trainstack:maxHourlyUsd",)))
    pool = result.one(NODE_POOL, "trainstack-gpu-a3").inputs
    assert "networkConfig" not in pool and "placementPolicy" not in pool
    assert "gpuNetworking" not in result.one(RELEASE, "train").inputs["values"]
    assert result.by_type(DAEMON_SET) == [] and result.by_type(PARAM_SET) == []
    assert "enableMultiNetworking" not in result.one(CLUSTER).inputs


def test_preview_registers_the_same_graph(up):
    preview = run(preview=True)
    assert [(r.type, r.name) for r in preview.registrations] == [(r.type, r.name) for r in up.registrations]


A3_BAD_CONFIGS = [
    ("TCPX on a machine type without it", {"machineType": "n1-standard-8", "acceleratorType": "nvidia-tesla-t4",
                                           "acceleratorCount": 1, "gpuDirect": "tcpx"},
     f"{POOL}.gpuDirect", "tcpx is not available: n1-standard-8 has no GPUDirect NICs"),
    ("TCPXO on A3 High", {"gpuDirect": "tcpxo"}, f"{POOL}.gpuDirect", "a3-highgpu-8g has tcpx"),
    ("GPU count other than 8 on A3", {"acceleratorCount": 4}, f"{POOL}.acceleratorCount",
     "a3-highgpu-8g comes with 8 x nvidia-h100-80gb, not 4"),
    ("compact placement with a specific reservation", {"capacity": "RESERVATION", "reservation": "r1"},
     f"{POOL}.placement", "COMPACT cannot be combined with a specific reservation"),
    ("compact placement with flex-start on A3 High", {"capacity": "FLEX_START"}, f"{POOL}.placement",
     "COMPACT is not offered with FLEX_START"),
    ("reservation without its name", {"capacity": "RESERVATION", "placement": "ANY"}, f"{POOL}.reservation",
     "a reservation name goes with capacity RESERVATION"),
]


@pytest.mark.parametrize(("pool", "key", "fragment"), [c[1:] for c in A3_BAD_CONFIGS], ids=[c[0] for c in A3_BAD_CONFIGS])
def test_bad_a3_config_stops_with_one_line(pool, key, fragment):
    stack_runs.assert_one_config_error_line(*stack_runs.run_main_expecting_error(
        a3_config({"trainstack:gpuPools": {"a3": pool}}), stack="gcp-a3", outputs=provider_outputs,
        calls=provider_calls), key, fragment)


def test_filestore_below_the_zonal_minimum_stops():
    stop, logged, _ = stack_runs.run_main_expecting_error(
        a3_config({"trainstack:sharedFilesystem": {"capacityGb": 512}}), stack="gcp-a3", outputs=provider_outputs,
        calls=provider_calls)
    assert logged[0].startswith("trainstack:sharedFilesystem.capacityGb: a ZONAL Filestore share holds 1024")


def test_gke_patch_below_the_gpu_direct_minimum_fails_the_preview():
    def calls(token, args):
        if token == GET_ENGINE_VERSIONS:
            return {"latestMasterVersion": "1.31.10-gke.1000", "validMasterVersions": ["1.31.10-gke.1000"],
                    "releaseChannelLatestVersion": {"REGULAR": "1.31.10-gke.1000"}}
        return provider_calls(token, args)

    config = a3_config({"trainstack:gpuPools": {"a3": {"machineType": "a3-megagpu-8g"}},
                        "trainstack:kubernetesVersion": "1.31"})
    with pytest.raises(pulumi.RunError) as raised:
        run(config, preview=True, calls=calls)
    assert str(raised.value).startswith(
        "trainstack:kubernetesVersion: GKE 1.31.10-gke.1000 is older than GPUDirect-TCPXO needs "
        "(1.31.14-gke.1243000 or newer for 1.31)")


def test_stack_file_parses_to_seed_002s_shape():
    config = parse_gcp_config(as_cli_config({**stack_runs.stack_file_config(STACK_FILE), "gcp:project": PROJECT}),
                              stack="gcp-a3")
    (a3,) = config.gpu_pools
    assert a3.gpu_direct is GPU_DIRECT["a3-highgpu-8g"]
    assert (a3.capacity, a3.compact_placement, a3.local_ssd_count) == ("ON_DEMAND", True, 16)
    assert config.job.queue and config.job.queue_name == "a3-queue"
    assert (config.job.gpus_per_pod, config.job.procs_per_pod) == (8, 8)


def test_resource_graph_matches_the_golden_file(up):
    # UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/gcp/test_a3.py, then review the diff.
    assert_matches_golden(up, GOLDEN)
