"""Kueue Topology Aware Scheduling under Pulumi mocks: the Topology, the flavor that names it, and the
ProvisioningRequest admission check for pools that scale from zero, checked against Kueue's own CRD
schemas (kueue v0.19.2, where the TopologyAwareScheduling feature gate is beta and on by default:
pkg/features/kube_features.go). Any cloud's pool uses the same hook: a NodeTopology of its node labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.infra.programs import (
    CLUSTER_QUEUE,
    GPU_NODE_LABELS,
    GPU_TOLERATIONS,
    PROVIDER,
    RESOURCE_FLAVOR,
    make_provider,
)
from tests.pulumi_harness import ProgramResult, run_program
from trainstack.infra import InvalidArgsError, Kueue, KueueArgs
from trainstack.infra.core.contracts import NodeTopology
from trainstack.infra.core.versions import KUEUE_API_VERSION
from trainstack.infra.kubernetes.kueue import PoolQueue

SCHEMAS = json.loads((Path(__file__).parent / "fixtures" / "kueue-v0.19.2-v1beta2-schemas.json").read_text())
TOPOLOGY = f"kubernetes:{KUEUE_API_VERSION}:Topology"
ADMISSION_CHECK = f"kubernetes:{KUEUE_API_VERSION}:AdmissionCheck"
PROVISIONING = f"kubernetes:{KUEUE_API_VERSION}:ProvisioningRequestConfig"
GKE_LEVELS = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
              "cloud.google.com/gce-topology-host", "kubernetes.io/hostname")
# What another cloud's pool might hand over (e.g. EC2 instance topology labels): the hook takes any labels.
AWS_LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
              "kubernetes.io/hostname")
AUTOSCALED = NodeTopology(levels=GKE_LEVELS, provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io")


def _run(**overrides: Any) -> ProgramResult:
    def program() -> None:
        Kueue("kueue", KueueArgs(**{"provider": make_provider(), "namespace": "training", "gpu_quota": 16,
                                    "node_labels": dict(GPU_NODE_LABELS), "tolerations": GPU_TOLERATIONS,
                                    **overrides}))

    return run_program(program)


def _python_patterns(schema: Any) -> Any:
    """The schema with Go's `^(?i)` (a flag after the anchor, which Go's RE2 allows and Python's re
    does not) written as `(?i)^`: same meaning (AdmissionCheck's parameters.kind pattern)."""
    if isinstance(schema, dict):
        return {k: (v.replace("^(?i)", "(?i)^") if k == "pattern" else _python_patterns(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_python_patterns(v) for v in schema]
    return schema


def _object(inputs: dict) -> dict:
    return {key: inputs[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in inputs}


@pytest.mark.parametrize("kind", ["Topology", "AdmissionCheck", "ProvisioningRequestConfig", "ResourceFlavor",
                                  "ClusterQueue"])
def test_tas_objects_are_valid_for_the_pinned_kueue(kind):
    obj = _object(_run(topology=AUTOSCALED).one(f"kubernetes:{KUEUE_API_VERSION}:{kind}").inputs)
    crd = SCHEMAS[kind]
    assert crd["served"] and crd["storage"]
    jsonschema.validate(obj, _python_patterns(crd["openAPIV3Schema"]))
    assert ("namespace" in obj["metadata"]) == (crd["scope"] == "Namespaced")


def test_the_flavor_names_a_topology_of_the_pools_levels():
    result = _run(topology=AUTOSCALED)
    topology = result.one(TOPOLOGY).inputs
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(GKE_LEVELS)
    flavor = result.one(RESOURCE_FLAVOR).inputs["spec"]
    assert flavor["topologyName"] == topology["metadata"]["name"]
    # Kueue's CEL rule: a topology flavor selects its nodes (at least one nodeLabel).
    assert flavor["nodeLabels"] == GPU_NODE_LABELS
    assert result.one(TOPOLOGY).urn in result.one(RESOURCE_FLAVOR).dependencies


def test_an_autoscaled_pool_gets_the_provisioning_admission_check_on_its_flavor():
    result = _run(topology=AUTOSCALED)
    config = result.one(PROVISIONING).inputs
    assert config["spec"] == {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                              "managedResources": ["nvidia.com/gpu"],
                              "retryStrategy": {"backoffLimitCount": 1000, "backoffBaseSeconds": 60,
                                                "backoffMaxSeconds": 600}}
    check = result.one(ADMISSION_CHECK).inputs
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/provisioning-request",
                             "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                            "name": config["metadata"]["name"]}}
    queue = result.one(CLUSTER_QUEUE).inputs["spec"]
    flavor = result.one(RESOURCE_FLAVOR).inputs["metadata"]["name"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [
        {"name": check["metadata"]["name"], "onFlavors": [flavor]}]}


def test_a_pool_whose_nodes_exist_needs_no_provisioning_and_another_clouds_labels_work_the_same():
    result = _run(topology=NodeTopology(levels=AWS_LEVELS))
    assert [level["nodeLabel"] for level in result.one(TOPOLOGY).inputs["spec"]["levels"]] == list(AWS_LEVELS)
    assert result.by_type(ADMISSION_CHECK) == [] and result.by_type(PROVISIONING) == []
    assert "admissionChecksStrategy" not in result.one(CLUSTER_QUEUE).inputs["spec"]


def test_without_a_topology_nothing_changes():
    result = _run()
    assert result.by_type(TOPOLOGY) == [] and result.by_type(ADMISSION_CHECK) == []
    assert "topologyName" not in result.one(RESOURCE_FLAVOR).inputs["spec"]
    assert "admissionChecksStrategy" not in result.one(CLUSTER_QUEUE).inputs["spec"]


def test_each_further_pool_gets_its_own_topology_under_its_flavors_name():
    more = PoolQueue(queue_name="training-h200", flavor_name="h200-nodes", gpu_quota=8,
                     node_labels={"trainstack.dev/pool": "h200"}, topology=AUTOSCALED)
    result = _run(more_queues=[more])
    [topology] = [t.inputs["metadata"]["name"] for t in result.by_type(TOPOLOGY)]
    assert topology.startswith("h200-nodes-")
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in result.by_type(RESOURCE_FLAVOR)}
    assert "topologyName" not in flavors["training-nodes"] and flavors[topology]["topologyName"] == topology


def _flavor_and_queue(result: ProgramResult) -> tuple[str, str]:
    flavor = result.one(RESOURCE_FLAVOR).inputs["metadata"]["name"]
    [group] = result.one(CLUSTER_QUEUE).inputs["spec"]["resourceGroups"]
    return flavor, group["flavors"][0]["name"]


def test_switching_the_topology_on_or_off_gives_the_flavor_a_new_name_and_the_queue_follows():
    # Kueue refuses to change a topology flavor's topologyName, nodeLabels or tolerations in place
    # (resourceflavor_types.go CEL rules): a new name makes Pulumi create a new flavor instead.
    plain_flavor, plain_queue = _flavor_and_queue(_run())
    tas_flavor, tas_queue = _flavor_and_queue(_run(topology=AUTOSCALED))
    assert plain_flavor == plain_queue == "training-nodes"
    assert tas_queue == tas_flavor != plain_flavor and tas_flavor.startswith("training-nodes-")
    names = {r.inputs["metadata"]["name"] for r in _run(topology=AUTOSCALED).registrations
             if r.type in (TOPOLOGY, PROVISIONING, ADMISSION_CHECK)}
    assert names == {tas_flavor}


@pytest.mark.parametrize("change", [
    {"node_labels": {**GPU_NODE_LABELS, "cloud.google.com/gke-ephemeral-storage-local-ssd": "true"}},
    {"tolerations": []},
    {"topology": NodeTopology(levels=GKE_LEVELS[1:], provisioning_class=AUTOSCALED.provisioning_class)},
])
def test_a_topology_flavor_gets_a_new_name_when_what_kueue_keeps_immutable_changes(change):
    before, _ = _flavor_and_queue(_run(topology=AUTOSCALED))
    after, queue = _flavor_and_queue(_run(**{"topology": AUTOSCALED, **change}))
    assert after == queue != before


def test_an_unchanged_pool_keeps_its_flavors_name():
    assert _flavor_and_queue(_run(topology=AUTOSCALED)) == _flavor_and_queue(_run(topology=AUTOSCALED))
    # Without a topology every flavor field can be updated in place: the name never moves.
    assert _flavor_and_queue(_run(node_labels={"trainstack.dev/pool": "other"}))[0] == "training-nodes"


@pytest.mark.parametrize(("topology", "node_labels", "message"), [
    (NodeTopology(levels=()), GPU_NODE_LABELS, "topology.levels must list 1 to 16 node labels, got 0"),
    (NodeTopology(levels=tuple(f"l{i}" for i in range(17))), GPU_NODE_LABELS, "got 17"),
    (NodeTopology(levels=("kubernetes.io/hostname", "rack")), GPU_NODE_LABELS,
     "kubernetes.io/hostname can only be the last (lowest) level"),
    (NodeTopology(levels=("rack", "rack")), GPU_NODE_LABELS, "must not repeat a label"),
    (NodeTopology(levels=("not a label",)), GPU_NODE_LABELS, "'not a label' is not a node label key"),
    (NodeTopology(levels=("rack",), provisioning_class=""), GPU_NODE_LABELS, "provisioning_class must be"),
    (NodeTopology(levels=("rack",)), {}, "topology needs node_labels"),
])
def test_a_topology_kueue_would_refuse_fails_before_anything_is_registered(topology, node_labels, message):
    def program() -> None:
        with pytest.raises(InvalidArgsError, match="^Kueue 'kueue': ") as error:
            Kueue("kueue", KueueArgs(provider=make_provider(), node_labels=node_labels, topology=topology))
        assert message in str(error.value)

    assert [r.type for r in run_program(program).registrations] == [PROVIDER]


def test_a_workload_short_of_capacity_keeps_asking_for_days_without_being_deactivated():
    # Kueue's default (3 retries) deactivates the workload within about an hour of failed or expired
    # requests (kueue v0.19.2 provisioningrequestconfig_types.go); each retry waits at least the
    # capped backoff once the cap is reached, so the limit times the cap bounds how long it keeps asking.
    retry = _run(topology=AUTOSCALED).one(PROVISIONING).inputs["spec"]["retryStrategy"]
    assert all(isinstance(v, int) and 0 < v < 2**31 for v in retry.values())  # int32 fields
    assert retry["backoffLimitCount"] * retry["backoffMaxSeconds"] >= 5 * 24 * 3600
    # One request per workload every 10 minutes at most once backed off: no load on the autoscaler.
    assert retry["backoffBaseSeconds"] <= retry["backoffMaxSeconds"] == 600
