"""Issue 28 items 2, 3, 5 and 6 on the gcp-a4 stack: topology-aware placement only where capacity comes in one
block, FLEX_START as queued provisioning, the RDMA machines' GKE minimum, and the GPU subnets kept clear of
the cluster's own ranges. Run on the real __main__.py under mocks with Pulumi.gcp-a4.yaml's values."""

from __future__ import annotations

import pulumi
import pytest

from tests import stack_runs
from tests.gcp.stack_runs import (
    GET_ENGINE_VERSIONS,
    NODE_POOL,
    PROJECT,
    RELEASE,
    REPO,
    as_cli_config,
    provider_calls,
    provider_outputs,
)
from tests.workloads.chart import render
from trainstack.infra.core.topology_capacity import topology_choice
from trainstack.infra.gcp.config import parse_gcp_config
from trainstack.infra.gcp.machine_types import GPU_DIRECT, meets_gpu_direct_minimum

STACK_FILE = REPO / "Pulumi.gcp-a4.yaml"
POOL = "trainstack:gpuPools.a4"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
QUEUED_TOLERATION = {"key": "cloud.google.com/gke-queued", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
RESERVED = {"capacity": "RESERVATION", "reservation": "a4-block", "placement": "ANY"}
FLEX = {"capacity": "FLEX_START", "placement": "ANY"}


def a4_config(overrides=None):
    return stack_runs.config_with(STACK_FILE, {"gcp:project": PROJECT, "trainstack:job": {"enabled": True},
                                               **(overrides or {})})


def run(config, *, preview=False, calls=provider_calls):
    return stack_runs.run_main(config, stack="gcp-a4", outputs=None if preview else provider_outputs, calls=calls,
                               preview=preview)


def expect_config_error(config, key, fragment):
    stack_runs.assert_one_config_error_line(*stack_runs.run_main_expecting_error(
        config, stack="gcp-a4", outputs=provider_outputs, calls=provider_calls), key, fragment)


def parse(overrides=None):
    return parse_gcp_config(as_cli_config(a4_config(overrides)), stack="gcp-a4")


@pytest.fixture
def warnings(monkeypatch):
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: logged.append(message))
    return logged


# --- item 2: the capacity rule ------------------------------------------------------------------------------

@pytest.mark.parametrize(("capacity", "one_block", "enabled"), [
    ("RESERVATION", True, True), ("ON_DEMAND", False, False), ("SPOT", False, False), ("FLEX_START", False, False)])
def test_the_default_follows_the_capacity_type(capacity, one_block, enabled):
    choice = topology_choice("k", None, capacity, one_block=one_block)
    assert choice.enabled is enabled and choice.warning is None
    assert topology_choice("k", None, capacity, one_block=one_block, default_on=False).enabled is False


def test_an_explicit_opt_in_without_one_block_is_honoured_with_a_warning_naming_the_risk():
    choice = topology_choice("trainstack:gpuPools.a4", True, "ON_DEMAND", one_block=False)
    assert choice.enabled and "\n" not in choice.warning
    assert choice.warning.startswith("trainstack:gpuPools.a4.topologyAware is true on ON_DEMAND capacity")
    assert "stay pending with no error" in choice.warning
    assert "Fix: use reserved capacity, or pulumi config set --path trainstack:gpuPools.a4.topologyAware false" \
        in choice.warning
    assert topology_choice("k", True, "RESERVATION", one_block=True).warning is None
    assert topology_choice("k", False, "RESERVATION", one_block=True).enabled is False


def test_the_shipped_on_demand_stack_has_no_topology_and_no_provisioning_check(warnings):
    """Pulumi.gcp-a4.yaml is ON_DEMAND, autoscaled from zero: no TAS, no best-effort-atomic check."""
    (pool,) = parse().gpu_pools
    assert (pool.capacity, pool.topology_aware) == ("ON_DEMAND", False)
    result = run(a4_config())
    for kind in ("Topology", "AdmissionCheck", "ProvisioningRequestConfig"):
        assert result.by_type(f"{KUEUE}:{kind}") == [], kind
    assert "admissionChecksStrategy" not in result.one(f"{KUEUE}:ClusterQueue").inputs["spec"]
    assert not any("topologyAware" in w for w in warnings), warnings


def test_a_reservation_gets_topology_and_the_atomic_check_by_default(warnings):
    result = run(a4_config({"trainstack:gpuPools": {"a4": RESERVED}}))
    assert result.one(f"{KUEUE}:Topology")
    provisioning = result.one(f"{KUEUE}:ProvisioningRequestConfig").inputs["spec"]
    assert provisioning["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert not any("topologyAware" in w for w in warnings), warnings


def test_opting_in_on_demand_warns_and_keeps_the_choice(warnings):
    (pool,) = parse({"trainstack:gpuPools": {"a4": {"topologyAware": True}}}).gpu_pools
    assert pool.topology_aware
    assert [w for w in warnings if w.startswith(f"{POOL}.topologyAware is true on ON_DEMAND capacity")]


# --- item 3: FLEX_START is queued provisioning ---------------------------------------------------------------

def test_flex_start_pool_is_queued_provisioning_with_its_class_and_toleration(warnings):
    result = run(a4_config({"trainstack:gpuPools": {"a4": FLEX}}))
    pool = result.one(NODE_POOL, "trainstack-gpu-a4").inputs
    assert pool["queuedProvisioning"] == {"enabled": True}
    # Auto-upgrade cannot be off on a cluster in a release channel (GKE answers 400 "Auto_upgrade cannot
    # be false when release_channel REGULAR is set"); only auto-repair is off for flex-start VMs.
    assert pool["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert pool["autoscaling"]["totalMinNodeCount"] == 0 and "placementPolicy" not in pool
    assert pool["nodeConfig"]["flexStart"] is True
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    # Not one block: no TAS by default, but the pool's nodes come only through this ProvisioningRequest.
    assert result.by_type(f"{KUEUE}:Topology") == []
    provisioning = result.one(f"{KUEUE}:ProvisioningRequestConfig").inputs["spec"]
    assert provisioning["provisioningClassName"] == "queued-provisioning.gke.io"
    check = result.one(f"{KUEUE}:AdmissionCheck").inputs
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    flavor = result.one(f"{KUEUE}:ResourceFlavor").inputs
    queue = result.one(f"{KUEUE}:ClusterQueue").inputs["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [
        {"name": check["metadata"]["name"], "onFlavors": [flavor["metadata"]["name"]]}]}
    # Kueue adds the flavor's tolerations to every pod it admits (the NCCL check's too); the job has it itself.
    assert QUEUED_TOLERATION in flavor["spec"]["tolerations"]
    job = next(o for o in render(result.one(RELEASE, "train").inputs["values"]) if o["kind"] == "Job")
    assert QUEUED_TOLERATION in job["spec"]["template"]["spec"]["tolerations"]
    assert not any("topologyAware" in w for w in warnings), warnings


def test_flex_start_with_topology_asks_for_queued_provisioning_not_the_atomic_class(warnings):
    result = run(a4_config({"trainstack:gpuPools": {"a4": {**FLEX, "topologyAware": True}}}))
    assert result.one(f"{KUEUE}:Topology")
    assert result.one(f"{KUEUE}:ProvisioningRequestConfig").inputs["spec"]["provisioningClassName"] == \
        "queued-provisioning.gke.io"
    assert [w for w in warnings if w.startswith(f"{POOL}.topologyAware is true on FLEX_START capacity")]


def test_other_capacity_keeps_auto_upgrade_and_no_queued_provisioning():
    pool = run(a4_config({"trainstack:gpuPools": {"a4": RESERVED}})).one(NODE_POOL, "trainstack-gpu-a4").inputs
    assert "queuedProvisioning" not in pool and pool["management"]["autoUpgrade"] is True


def test_flex_start_with_nodes_at_rest_stops_with_one_line():
    expect_config_error(a4_config({"trainstack:gpuPools": {"a4": {**FLEX, "min": 1}}}), f"{POOL}.min",
                        "1 with capacity FLEX_START: queued provisioning adds a job's nodes all at once")


def test_flex_start_without_kueue_stops_with_one_line():
    expect_config_error(a4_config({"trainstack:gpuPools": {"a4": FLEX},
                                   "trainstack:job": {"enabled": True, "queue": False}}),
                        "trainstack:job.queue", "false, but gpuPools.a4 has capacity FLEX_START")


# --- item 5: the RDMA machines' GKE minimum ------------------------------------------------------------------

@pytest.mark.parametrize(("machine", "version", "minimum"), [
    ("a4-highgpu-8g", "1.31.14-gke.1243000", "1.32.2-gke.1475000"),  # B200 nodes start at 1.32
    ("a4-highgpu-8g", "1.32.2-gke.1474999", "1.32.2-gke.1475000"),
    ("a4-highgpu-8g", "1.32.2-gke.1475000", None),
    ("a4-highgpu-8g", "1.35.1-gke.1200000", None),
    ("a3-ultragpu-8g", "1.31.4-gke.1182000", "1.31.4-gke.1183000"),
    ("a3-ultragpu-8g", "1.31.4-gke.1183000", None),
    ("a3-ultragpu-8g", "1.34.3-gke.1300000", None),
    # TCPX/TCPXO keep their per-minor minimums; their oldest listed minors are older than any GKE accepts.
    ("a3-megagpu-8g", "1.31.10-gke.1000", "1.31.14-gke.1243000"),
    ("a3-highgpu-8g", "1.31.10-gke.1000", None),
])
def test_rdma_machines_have_their_gke_minimum(machine, version, minimum):
    assert meets_gpu_direct_minimum(GPU_DIRECT[machine], version) == minimum


def test_an_a4_cluster_below_the_rdma_minimum_fails_the_preview():
    def calls(token, args):
        if token == GET_ENGINE_VERSIONS:
            return {"latestMasterVersion": "1.31.10-gke.1000", "validMasterVersions": ["1.31.10-gke.1000"],
                    "releaseChannelLatestVersion": {"REGULAR": "1.31.10-gke.1000"}}
        return provider_calls(token, args)

    with pytest.raises(pulumi.RunError) as raised:
        run(a4_config({"trainstack:kubernetesVersion": "1.31"}), preview=True, calls=calls)
    assert str(raised.value).startswith(
        "trainstack:kubernetesVersion: GKE 1.31.10-gke.1000 is older than GPUDirect-RDMA needs "
        "(1.32.2-gke.1475000 or newer). Fix: ")


# --- item 6: the cluster's ranges stay out of the GPU subnets ------------------------------------------------

@pytest.mark.parametrize(("key", "cidr", "subnet"), [
    ("podsCidr", "192.168.0.0/18", "192.168.0.0/20"),  # the gVNIC subnet
    ("servicesCidr", "192.168.32.0/24", "192.168.32.0/20"),  # rdma-1
    ("subnetCidr", "192.168.128.0/20", "192.168.128.0/20"),  # rdma-7, the last one
    ("masterCidr", "192.168.16.16/28", "192.168.16.0/20"),  # rdma-0
])
def test_a_cluster_range_inside_the_gpu_subnets_stops_with_one_line(key, cidr, subnet):
    expect_config_error(a4_config({"trainstack:network": {key: cidr}}), f"trainstack:network.{key}",
                        f"{cidr} overlaps the GPUDirect subnets {subnet}")


def test_ranges_outside_the_used_gpu_subnets_are_accepted():
    # A4 uses 9 of the 16 /20 blocks (one gVNIC, eight RDMA NICs): 192.168.144.0/20 onwards is free.
    assert parse({"trainstack:network": {"servicesCidr": "192.168.144.0/20"}}).network.services_cidr == \
        "192.168.144.0/20"
    # No GPUDirect pool, no GPU subnets.
    plain = parse({"trainstack:gpuPools": {"a4": {"gpuDirect": "none"}},
                   "trainstack:job": {"enabled": True, "podsMin": 1, "podsMax": 1},
                   "trainstack:network": {"podsCidr": "192.168.0.0/18"}})
    assert plain.network.pods_cidr == "192.168.0.0/18"


def test_an_existing_network_only_has_its_control_plane_range_checked():
    existing = {"network": "vpc", "subnetwork": "sub", "podsRangeName": "pods", "servicesRangeName": "svc"}
    config = parse({"trainstack:existingNetwork": existing,
                    "trainstack:network": {"podsCidr": "192.168.0.0/18"}})
    assert config.network.existing is not None
    expect_config_error(a4_config({"trainstack:existingNetwork": existing,
                                   "trainstack:network": {"masterCidr": "192.168.0.16/28"}}),
                        "trainstack:network.masterCidr", "overlaps the GPUDirect subnets 192.168.0.0/20")
