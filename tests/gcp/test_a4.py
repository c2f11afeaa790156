"""The `gcp-a4` stack: A4 (B200) and A3 Ultra (H200) pools with GPUDirect-RDMA, Kueue (topology-aware
placement on a reservation), Filestore, local SSD, checked on the real __main__.py under mocks with Pulumi.gcp-a4.yaml's values.

Reference: cluster-toolkit v1.95.0 examples/gke-a4 and examples/gke-a3-ultragpu (networks, node pool,
gIB installer, Kueue Topology), container-engine-accelerators gpudirect-rdma (installer, pod wiring).
"""

from __future__ import annotations

import pytest

from tests import stack_runs
from tests.gcp.stack_runs import (
    BUCKET,
    CLUSTER,
    GET_MACHINE_TYPES,
    NETWORK,
    NODE_POOL,
    PROJECT,
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
from trainstack.infra.gcp.gpu_networks import RDMA_NETWORK_MTU
from trainstack.infra.gcp.machine_types import GPU_DIRECT
from trainstack.infra.gcp.node_pools import GKE_TOPOLOGY_LEVELS
from trainstack.infra.kubernetes.pod_requests import parse_quantity, pod_requests

STACK_FILE = REPO / "Pulumi.gcp-a4.yaml"
GOLDEN = REPO / "tests" / "gcp" / "golden" / "gcp-a4-stack.json"
POOL = "trainstack:gpuPools.a4"
FIREWALL = "gcp:compute/firewall:Firewall"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
GKE_NETWORK = "kubernetes:networking.gke.io/v1:Network"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
RDMA_NETWORKS = [f"rdma-{i}" for i in range(8)]
PREFIX = "trainstack-gcp-a4-rdma"
RESERVED = {"capacity": "RESERVATION", "reservation": "a4-block", "placement": "ANY"}


def a4_config(overrides=None, remove=()):
    return stack_runs.config_with(STACK_FILE, {"gcp:project": PROJECT, "trainstack:job": {"enabled": True},
                                               **(overrides or {})}, remove)


def run(config=None, *, preview=False, calls=provider_calls):
    return stack_runs.run_main(a4_config() if config is None else config, stack="gcp-a4",
                               outputs=None if preview else provider_outputs, calls=calls, preview=preview)


@pytest.fixture(scope="module")
def up():
    return run()


@pytest.fixture(scope="module")
def ultra():
    return run(a4_config({"trainstack:gpuPools": {"a4": {"machineType": "a3-ultragpu-8g"}}}))


def test_rdma_vpc_has_the_roce_profile_and_a_subnet_per_nic_and_a_second_gvnic_vpc(up):
    networks = {n.inputs["name"]: n.inputs for n in up.by_type(NETWORK) if n.inputs.get("name", "").startswith(PREFIX)}
    assert set(networks) == {f"{PREFIX}-net", f"{PREFIX}-gvnic-1"}
    rdma = networks[f"{PREFIX}-net"]
    # cluster-toolkit's gke-a4-rdma-net: network_profile .../networkProfiles/<zone>-vpc-roce, MTU 8896.
    assert rdma["networkProfile"] == f"projects/{PROJECT}/global/networkProfiles/us-central1-b-vpc-roce"
    assert rdma["mtu"] == RDMA_NETWORK_MTU == 8896
    assert "networkProfile" not in networks[f"{PREFIX}-gvnic-1"]
    subnets = {s.inputs["name"]: s.inputs for s in up.by_type(SUBNETWORK) if s.inputs.get("name", "").startswith(PREFIX)}
    rdma_subnets = [f"{PREFIX}-sub-{i}" for i in range(8)]
    assert set(subnets) == {*rdma_subnets, f"{PREFIX}-gvnic-1-subnet"}
    cidrs = [subnets[name]["ipCidrRange"] for name in [f"{PREFIX}-gvnic-1-subnet", *rdma_subnets]]
    assert len(set(cidrs)) == 9
    # The gVNIC VPC allows traffic from its own subnet only; the RoCE VPC gets no rule of ours (as upstream).
    firewalls = [f.inputs for f in up.by_type(FIREWALL) if f.name != "trainstack-control-plane-calls"]
    assert [(f["network"], f["sourceRanges"]) for f in firewalls] == [(f"{PREFIX}-gvnic-1", [cidrs[0]])]


def test_pool_attaches_the_gvnic_then_the_eight_rdma_subnets_compact_on_local_ssd(up):
    pool = up.one(NODE_POOL, "trainstack-gpu-a4").inputs
    extra = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [(e["network"], e["subnetwork"]) for e in extra] == [
        (f"{PREFIX}-gvnic-1", f"{PREFIX}-gvnic-1-subnet"),
        *((f"{PREFIX}-net", f"{PREFIX}-sub-{i}") for i in range(8))]
    node = pool["nodeConfig"]
    assert node["machineType"] == "a4-highgpu-8g"
    assert node["guestAccelerators"][0]["type"] == "nvidia-b200" and node["guestAccelerators"][0]["count"] == 8
    assert node["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 32}
    assert node["gvnic"] == {"enabled": True}
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    assert up.one(CLUSTER).inputs["enableMultiNetworking"] is True


@pytest.mark.parametrize(("capacity", "expected_node"), [
    ({"capacity": "SPOT"}, {"spot": True, "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}),
    ({"capacity": "RESERVATION", "reservation": "a4-block", "placement": "ANY"},
     {"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                              "key": "compute.googleapis.com/reservation-name", "values": ["a4-block"]}}),
])
def test_placement_and_reservation_choices_are_wired_as_on_a3(capacity, expected_node):
    pool = run(a4_config({"trainstack:gpuPools": {"a4": capacity}})).one(NODE_POOL, "trainstack-gpu-a4").inputs
    assert expected_node.items() <= pool["nodeConfig"].items()
    assert ("placementPolicy" in pool) is (capacity.get("placement", "COMPACT") == "COMPACT")


def test_gke_networks_are_in_rdma_device_mode_and_the_gib_installer_runs_on_the_gpu_nodes(up):
    k8s_provider = up.one("pulumi:providers:kubernetes")
    params = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in up.by_type(PARAM_SET)}
    assert params == {
        "gvnic-1": {"vpc": f"{PREFIX}-gvnic-1", "vpcSubnet": f"{PREFIX}-gvnic-1-subnet", "deviceMode": "NetDevice"},
        **{f"rdma-{i}": {"vpc": f"{PREFIX}-net", "vpcSubnet": f"{PREFIX}-sub-{i}", "deviceMode": "RDMA"}
           for i in range(8)}}
    networks = up.by_type(GKE_NETWORK)
    assert sorted(n.inputs["metadata"]["name"] for n in networks) == sorted(["gvnic-1", *RDMA_NETWORKS])
    assert all(n.inputs["spec"]["type"] == "Device" for n in networks)
    (installer,) = up.by_type(DAEMON_SET)  # no RxDM: no device injector, no optmem tuning
    assert installer.inputs["metadata"] == {"name": "nccl-rdma-installer", "namespace": "kube-system",
                                            "labels": {"k8s-app": "nccl-rdma-installer"}}
    spec = installer.inputs["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    # The pinned gIB installer, the chart's record of it (values.yaml gpuNetworking.rdma.plugin), run as
    # upstream's gpudirect-rdma/nccl-rdma-installer.yaml does: without --install-nccl.
    assert init["image"] == plugin_image("rdma") == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    assert "/scripts/container_entry.sh install\n" in init["args"][0] and "--install-nccl" not in init["args"][0]
    assert {v["hostPath"]["path"] for v in spec["volumes"]} == {"/home/kubernetes/bin/nvidia/lib64",
                                                                "/home/kubernetes/bin/gib"}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["nvidia-b200"]
    for resource in [*up.by_type(PARAM_SET), *networks, installer]:
        assert resource.provider == k8s_provider.urn
    job = up.one("trainstack:index:TrainingJob")
    assert {n.urn for n in networks} | {installer.urn} <= set(job.dependencies)


def _job_pod(values: dict) -> dict:
    return next(o for o in render(values) if o["kind"] == "Job")["spec"]["template"]


def test_job_joins_the_rdma_networks_with_the_gib_environment(up):
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["gpuNetworking"] == {"mode": "rdma", "rdma": {"networks": RDMA_NETWORKS}}
    assert values["kueue"]["queueName"] == "a4-queue"
    assert values["resources"]["requests"] == {"cpu": "200", "memory": "2000Gi"}
    template = _job_pod(values)
    interfaces = template["metadata"]["annotations"]["networking.gke.io/interfaces"]
    assert '{"interfaceName":"eth2","network":"rdma-0"}' in interfaces
    assert '{"interfaceName":"eth9","network":"rdma-7"}' in interfaces
    pod = template["spec"]
    assert [c["name"] for c in pod.get("initContainers", [])] == ["fetch-data"]  # no RxDM sidecar
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # Google's pip-NCCL recipe: gIB's transport named directly, no NCCL_NET (the shim is for gIB's own NCCL).
    assert "NCCL_NET" not in env and env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["NCCL_NET_PLUGIN"] == "/usr/local/gib/lib64/libnccl-net_internal.so"
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a4.txtpb"
    assert {"name": "gib", "mountPath": "/usr/local/gib", "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_a3_ultra_gets_its_h200s_and_its_gib_tuner_file(ultra):
    pool = ultra.one(NODE_POOL, "trainstack-gpu-a4").inputs["nodeConfig"]
    assert pool["machineType"] == "a3-ultragpu-8g" and pool["guestAccelerators"][0]["type"] == "nvidia-h200-141gb"
    values = ultra.one(RELEASE, "train").inputs["values"]
    assert values["gpuNetworking"]["rdma"]["ncclEnv"] == {
        "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb"}
    env = {e["name"]: e.get("value") for e in _job_pod(values)["spec"]["containers"][0]["env"]}
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a3u.txtpb"
    assert "a3-ultragpu.yaml" in ultra.exports["ncclCheckCommand"]


@pytest.fixture(scope="module")
def reserved():
    """The pool on a reservation: the capacity that gets topology-aware placement by default."""
    return run(a4_config({"trainstack:gpuPools": {"a4": RESERVED}}))


def test_kueue_places_the_pool_by_gke_topology_after_provisioning(reserved):
    up = reserved
    flavor = up.one(f"{KUEUE}:ResourceFlavor").inputs
    topology = up.one(f"{KUEUE}:Topology").inputs
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(GKE_TOPOLOGY_LEVELS) == [
        "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host", "kubernetes.io/hostname"]
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    queue = up.one(f"{KUEUE}:ClusterQueue").inputs
    check = up.one(f"{KUEUE}:AdmissionCheck").inputs
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [
        {"name": check["metadata"]["name"], "onFlavors": [flavor["metadata"]["name"]]}]}
    provisioning = up.one(f"{KUEUE}:ProvisioningRequestConfig").inputs["spec"]
    assert provisioning["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    # Scarce A4 capacity: Kueue keeps asking for days rather than deactivating after 3 retries.
    assert provisioning["retryStrategy"]["backoffLimitCount"] == 1000
    # The two-node job's pods prefer the tightest domain; its queue admits exactly two of them.
    values = up.one(RELEASE, "train").inputs["values"]
    template = _job_pod(values)
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == "kubernetes.io/hostname"
    quotas = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert {name: parse_quantity(q) for name, q in quotas.items()} == {
        name: 2 * value for name, value in pod_requests(template["spec"]).items()}


def test_topology_aware_placement_can_be_switched_off_per_pool():
    result = run(a4_config({"trainstack:gpuPools": {"a4": {**RESERVED, "topologyAware": False}}}))
    assert result.by_type(f"{KUEUE}:Topology") == [] and result.by_type(f"{KUEUE}:AdmissionCheck") == []
    assert "topologyName" not in result.one(f"{KUEUE}:ResourceFlavor").inputs["spec"]
    assert "preferredTopology" not in result.one(RELEASE, "train").inputs["values"].get("kueue", {})


def test_nccl_check_runs_the_in_image_all_reduce_against_the_rdma_bar(up):
    command = up.exports["ncclCheckCommand"]
    assert "-f workloads/charts/training-job/profiles/a4-highgpu.yaml" in command
    assert "-f workloads/charts/training-job/profiles/nccl-allreduce.yaml" in command
    # cluster-toolkit's daily A4 and A3 Ultra tests require 100 GB/s (test-gke-a4.yml, test-gke-a3-ultra.yml).
    assert "--set ncclCheck.minBusBandwidthGBps=100" in command
    assert GPU_DIRECT["a4-highgpu-8g"].nccl_min_bus_bandwidth_gbps == 100
    assert command.endswith("test $passed -eq 0")
    # The gIB installer image carries no nccl-tests: no command that would run them.
    assert "ncclTestsCommand" not in up.exports


def test_cost_is_in_the_preview_with_the_a4_host_part_named_as_excluded(up, ultra):
    a4 = up.exports["estimatedHourlyUsd"]
    assert a4["gpuNode"]["type"] == "a4-highgpu-8g + 8 x nvidia-b200"
    assert a4["gpuNode"]["onDemandUsdPerNode"] > 8 * 11  # the B200 x 8 row, $90.216/h
    assert any(item.startswith("a4 host part") for item in a4["notIncluded"])
    h200 = ultra.exports["estimatedHourlyUsd"]["gpuNode"]
    assert h200["type"] == "a3-ultragpu-8g + 8 x nvidia-h200-141gb" and h200["spotUsdPerNode"] is not None
    preview = run(preview=True)
    assert preview.exports["estimatedHourlyUsd"] == a4


def test_budget_below_the_estimate_stops_with_one_line():
    stack_runs.assert_one_config_error_line(*stack_runs.run_main_expecting_error(
        a4_config({"trainstack:maxHourlyUsd": 100}), stack="gcp-a4", outputs=provider_outputs,
        calls=provider_calls), "trainstack:maxHourlyUsd", "")


def test_teardown_keeps_the_bucket(up):
    bucket = up.one(BUCKET)
    assert bucket.inputs["forceDestroy"] is False and bucket.retain_on_delete is True


def test_preflight_asks_the_zone_for_the_a4_machine_type():
    asked = []

    def calls(token, args):
        if token == GET_MACHINE_TYPES:
            asked.append((args["zone"], args["filter"]))
            return {"machineTypes": [], "zone": args["zone"], "project": args["project"], "filter": args["filter"],
                    "id": "machine-types"}
        return provider_calls(token, args)

    import pulumi
    with pytest.raises(pulumi.RunError) as raised:
        run(preview=True, calls=calls)
    assert asked == [("us-central1-b", "name = a4-highgpu-8g")]
    assert str(raised.value).startswith(f"{POOL}.machineType: a4-highgpu-8g is not offered in us-central1-b")


def test_preview_registers_the_same_graph(up):
    preview = run(preview=True)
    assert [(r.type, r.name) for r in preview.registrations] == [(r.type, r.name) for r in up.registrations]


A4_BAD_CONFIGS = [
    ("RDMA machine without its network for a multi-node job", {"gpuDirect": "none"}, f"{POOL}.gpuDirect",
     "none on a4-highgpu-8g while the job spans 2 nodes"),
    ("TCPX networking on an RDMA machine", {"gpuDirect": "tcpx"}, f"{POOL}.gpuDirect",
     "tcpx is not available: a4-highgpu-8g has rdma"),
    ("RDMA on a machine without RDMA NICs", {"machineType": "a3-highgpu-8g", "gpuDirect": "rdma"},
     f"{POOL}.gpuDirect", "rdma is not available: a3-highgpu-8g has tcpx"),
    ("a GPU count other than the machine's", {"acceleratorCount": 4}, f"{POOL}.acceleratorCount",
     "a4-highgpu-8g comes with 8 x nvidia-b200, not 4"),
    ("topologyAware that is not a boolean", {"topologyAware": "sometimes"}, f"{POOL}.topologyAware", ""),
    ("a persistent disk on a Hyperdisk-only machine", {"diskType": "pd-ssd"}, f"{POOL}.diskType",
     "a4-highgpu-8g boots only from Hyperdisk, not pd-ssd"),
    ("a persistent disk on A3 Ultra", {"machineType": "a3-ultragpu-8g", "diskType": "pd-balanced"},
     f"{POOL}.diskType", "a3-ultragpu-8g boots only from Hyperdisk, not pd-balanced"),
    ("topologyAware on a pool without GPUDirect", {"machineType": "g2-standard-48", "topologyAware": True},
     f"{POOL}.topologyAware", "true needs a GPUDirect pool"),
    ("topologyAware on an A3 High pool with GPUDirect off",
     {"machineType": "a3-highgpu-8g", "gpuDirect": "none", "topologyAware": True},
     f"{POOL}.topologyAware", "true needs a GPUDirect pool"),
]


@pytest.mark.parametrize(("pool", "key", "fragment"), [c[1:] for c in A4_BAD_CONFIGS], ids=[c[0] for c in A4_BAD_CONFIGS])
def test_bad_a4_config_stops_with_one_line(pool, key, fragment):
    stack_runs.assert_one_config_error_line(*stack_runs.run_main_expecting_error(
        a4_config({"trainstack:gpuPools": {"a4": pool}}), stack="gcp-a4", outputs=provider_outputs,
        calls=provider_calls), key, fragment)


def test_a_one_node_job_may_leave_the_rdma_network_out():
    result = run(a4_config({"trainstack:gpuPools": {"a4": {"gpuDirect": "none"}},
                            "trainstack:job": {"enabled": True, "podsMin": 1, "podsMax": 1}}))
    assert "networkConfig" not in result.one(NODE_POOL, "trainstack-gpu-a4").inputs
    assert result.by_type(PARAM_SET) == []


@pytest.mark.parametrize("machine_type", ["a4-highgpu-8g", "a3-ultragpu-8g"])
def test_hyperdisk_only_machines_boot_from_hyperdisk_by_default(machine_type):
    # cluster-toolkit v1.95.0 a4high-vm.yaml and a3ultra-vm.yaml: disk_type hyperdisk-balanced.
    raw = stack_runs.stack_file_config(STACK_FILE)
    pools = {"a4": {k: v for k, v in raw["trainstack:gpuPools"]["a4"].items() if k != "diskType"}}
    pools["a4"]["machineType"] = machine_type
    config = parse_gcp_config(as_cli_config({**raw, "trainstack:gpuPools": pools, "gcp:project": PROJECT}),
                              stack="gcp-a4")
    (pool,) = config.gpu_pools
    assert pool.disk_type == "hyperdisk-balanced"


def test_stack_file_parses_to_the_a4_shape():
    config = parse_gcp_config(as_cli_config({**stack_runs.stack_file_config(STACK_FILE), "gcp:project": PROJECT}),
                              stack="gcp-a4")
    (a4,) = config.gpu_pools
    assert a4.gpu_direct is GPU_DIRECT["a4-highgpu-8g"] and a4.gpu_direct.rdma
    assert (a4.gpu_direct.gpu_nics, a4.gpu_direct.extra_gvnics) == (8, 1)  # RDMA NICs, second gVNIC
    assert (a4.accelerator_type, a4.gpus_per_node) == ("nvidia-b200", 8)
    # On demand and autoscaled from zero: no topology-aware placement by default (pool_capacity.py).
    assert (a4.capacity, a4.compact_placement, a4.local_ssd_count, a4.topology_aware) == ("ON_DEMAND", True, 32, False)
    assert config.job.queue and config.job.queue_name == "a4-queue"
    assert config.budget.max_hourly_usd == 200


def test_resource_graph_matches_the_golden_file(up):
    # UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/gcp/test_a4.py, then review the diff.
    assert_matches_golden(up, GOLDEN)


def test_topology_without_kueue_is_named_in_a_warning(monkeypatch):
    """Re-check 4 v02: topologyAware with job.queue false had no effect, without a word."""
    import pulumi

    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    parse_gcp_config(as_cli_config(a4_config({"trainstack:gpuPools": {"a4": RESERVED},
                                              "trainstack:job": {"enabled": True, "queue": False}})), stack="gcp-a4")
    assert any("job.queue is false, so there is no Kueue and topologyAware on a4 has no effect. Fix: " in w
               for w in warnings), warnings
    warnings.clear()
    parse_gcp_config(as_cli_config(a4_config({"trainstack:gpuPools": {"a4": RESERVED}})), stack="gcp-a4")
    assert not any("topologyAware" in w for w in warnings), warnings
