"""Kueue under Pulumi mocks: the pinned release and the queue objects, checked against Kueue's own CRD schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pulumi
import pytest

from tests.infra.programs import (
    CLUSTER_QUEUE,
    GPU_NODE_LABELS,
    GPU_TOLERATIONS,
    KUEUE,
    LOCAL_QUEUE,
    PROVIDER,
    RELEASE,
    RESOURCE_FLAVOR,
    make_provider,
)
from tests.pulumi_harness import ProgramResult, run_program, unknown_output
from trainstack.infra import InvalidArgsError, Kueue, KueueArgs
from trainstack.infra.core.versions import KUEUE_API_VERSION, KUEUE_CHART, KUEUE_VERSION

# v1beta2 schemas of Kueue's CRDs at the pinned release (see "_source" inside the file).
SCHEMAS = json.loads((Path(__file__).parent / "fixtures" / "kueue-v0.19.2-v1beta2-schemas.json").read_text())


def _args(provider, /, **overrides: Any) -> KueueArgs:
    values: dict[str, Any] = {
        "provider": provider,
        "namespace": "training",
        "gpu_quota": 32,
        "cpu_quota": "384",
        "memory_quota": "1536Gi",
        "node_labels": dict(GPU_NODE_LABELS),
        "tolerations": GPU_TOLERATIONS,
    }
    return KueueArgs(**{**values, **overrides})


def _run_kueue(*, preview: bool = False, **overrides: Any) -> ProgramResult:
    def program() -> None:
        kueue = Kueue("kueue", _args(make_provider(unknown_kubeconfig=preview), **overrides))
        pulumi.export("localQueue", kueue.local_queue_name)
        pulumi.export("clusterQueue", kueue.cluster_queue_name)

    return run_program(program, preview=preview)


def _object(inputs: dict) -> dict:
    return {key: inputs[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in inputs}


def _unknown_fields(instance: Any, schema: dict, path: str = "") -> list[str]:
    """Fields the API server would prune silently: absent from a structural schema."""
    if isinstance(instance, dict) and "properties" in schema:
        if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema:
            return []
        found = []
        for key, value in instance.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += _unknown_fields(value, schema["properties"][key], f"{path}.{key}")
        return found
    if isinstance(instance, list) and "items" in schema:
        return [
            f
            for i, item in enumerate(instance)
            for f in _unknown_fields(item, schema["items"], f"{path}[{i}]")
        ]
    return []


def test_schemas_fixture_matches_the_pinned_versions() -> None:
    # Bumping Kueue in trainstack/infra/core/versions.py without regenerating the fixture must fail here.
    assert SCHEMAS["_source"]["tag"] == KUEUE_VERSION
    assert SCHEMAS["_source"]["apiVersion"] == KUEUE_API_VERSION


def test_kueue_release_is_the_pinned_chart() -> None:
    release = _run_kueue().one(RELEASE)
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" == KUEUE_CHART.chart
    assert release.inputs["version"] == "0.19.2" == KUEUE_CHART.version == KUEUE_VERSION.removeprefix("v")
    assert release.inputs["name"] == "kueue"
    assert release.inputs["namespace"] == "kueue-system"
    assert release.inputs["createNamespace"] is True
    assert "skipAwait" not in release.inputs  # the queues need the webhook up: wait for the release


@pytest.mark.parametrize("kind", ["ResourceFlavor", "ClusterQueue", "LocalQueue"])
def test_queue_objects_are_valid_for_the_pinned_kueue(kind: str) -> None:
    registration = _run_kueue().one(f"kubernetes:{KUEUE_API_VERSION}:{kind}")
    crd = SCHEMAS[kind]
    assert crd["served"] and crd["storage"], f"{KUEUE_API_VERSION} is not Kueue's storage version for {kind}"
    obj = _object(registration.inputs)
    assert obj["apiVersion"] == KUEUE_API_VERSION and obj["kind"] == kind
    jsonschema.validate(obj, crd["openAPIV3Schema"])
    assert _unknown_fields(obj, crd["openAPIV3Schema"]) == []
    assert ("namespace" in obj["metadata"]) == (crd["scope"] == "Namespaced")


def test_quotas_node_labels_and_tolerations_are_wired_through() -> None:
    result = _run_kueue()
    flavor = result.one(RESOURCE_FLAVOR).inputs
    assert flavor["metadata"] == {"name": "training-nodes"}
    assert flavor["spec"] == {
        "nodeLabels": GPU_NODE_LABELS,
        "tolerations": [dict(t) for t in GPU_TOLERATIONS],
    }

    cluster_queue = result.one(CLUSTER_QUEUE).inputs
    assert cluster_queue["metadata"] == {"name": "training"}
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    (flavor_quota,) = group["flavors"]
    assert flavor_quota["name"] == "training-nodes"
    assert flavor_quota["resources"] == [
        {"name": "cpu", "nominalQuota": "384"},
        {"name": "memory", "nominalQuota": "1536Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": 32},
    ]
    # Kueue's CEL rule: every flavor lists exactly the covered resources (the JSON schema cannot say it).
    assert [r["name"] for r in flavor_quota["resources"]] == group["coveredResources"]
    assert cluster_queue["spec"]["queueingStrategy"] == "BestEffortFIFO"

    local_queue = result.one(LOCAL_QUEUE).inputs
    assert local_queue["metadata"] == {"name": "training", "namespace": "training"}
    assert local_queue["spec"] == {"clusterQueue": "training"}


def test_cluster_queue_admits_only_the_training_namespace() -> None:
    spec = _run_kueue().one(CLUSTER_QUEUE).inputs["spec"]
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}


def test_empty_node_labels_and_tolerations_leave_the_flavor_unconstrained() -> None:
    flavor = _run_kueue(node_labels={}, tolerations=()).one(RESOURCE_FLAVOR).inputs
    assert flavor["spec"] == {}


def test_queue_objects_wait_for_the_release_and_each_other() -> None:
    result = _run_kueue()
    release, flavor = result.one(RELEASE), result.one(RESOURCE_FLAVOR)
    cluster_queue, local_queue = result.one(CLUSTER_QUEUE), result.one(LOCAL_QUEUE)
    assert release.urn in flavor.dependencies  # the CRDs come with the release
    assert {release.urn, flavor.urn} <= set(cluster_queue.dependencies)
    assert {release.urn, cluster_queue.urn} <= set(local_queue.dependencies)


def test_children_are_parented_and_use_the_explicit_provider() -> None:
    result = _run_kueue()
    component = result.one(KUEUE)
    provider = result.one(PROVIDER)
    children = result.children_of(component.urn)
    assert sorted(r.type for r in children) == sorted([RELEASE, RESOURCE_FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE])
    assert all(child.provider == provider.urn for child in children)


def test_outputs_name_the_queues() -> None:
    result = _run_kueue(queue_name="research")
    assert result.exports == {"localQueue": "research", "clusterQueue": "research"}
    component = result.one(KUEUE)
    assert result.registered_outputs[component.urn] == {
        "localQueueName": "research",
        "clusterQueueName": "research",
    }


def test_preview_with_unknown_cluster_and_namespace() -> None:
    def program() -> None:
        Kueue("kueue", _args(make_provider(unknown_kubeconfig=True), namespace=unknown_output()))

    result = run_program(program, preview=True)
    assert len(result.by_type(LOCAL_QUEUE)) == 1
    assert (
        result.one(CLUSTER_QUEUE).inputs["spec"]["resourceGroups"][0]["flavors"][0]["name"]
        == "training-nodes"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gpu_quota": -1}, "gpu_quota must be >= 0, got -1"),
        ({"cpu_quota": "many"}, "cpu_quota must be a Kubernetes quantity"),
        ({"memory_quota": "1.5TB"}, "memory_quota must be a Kubernetes quantity"),
        ({"node_labels": {"": "x"}}, "node_labels must map non-empty strings to strings"),
        ({"tolerations": [{"operator": "Sometimes"}]}, "tolerations[0].operator must be Exists or Equal"),
        ({"queue_name": "Training"}, "queue_name must be a DNS label"),
        ({"flavor_name": "gpu_nodes"}, "flavor_name must be a DNS label"),
        ({"namespace": "a" * 64}, "namespace must be a DNS label"),
        ({"queueing_strategy": "LIFO"}, "queueing_strategy must be one of ['BestEffortFIFO', 'StrictFIFO']"),
        ({"provider": "k8s"}, "provider must be an explicit kubernetes.Provider"),
    ],
)
def test_invalid_arguments_fail_before_anything_is_registered(overrides: dict, message: str) -> None:
    def program() -> None:
        args = _args(make_provider(), **overrides)
        with pytest.raises(InvalidArgsError, match="^Kueue 'kueue': ") as error:
            Kueue("kueue", args)
        assert message in str(error.value)

    assert [r.type for r in run_program(program).registrations] == [PROVIDER]
