"""All four components wired together as a cloud stack wires them: parents, providers, dependency edges, preview."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from tests.infra.programs import (
    COMPONENTS,
    DEVICE_PLUGIN,
    DIGEST,
    IMAGE,
    KUEUE,
    LOCAL_QUEUE,
    PROVIDER,
    RELEASE,
    REPOSITORY,
    TRAINING_IMAGE,
    TRAINING_JOB,
    full_stack,
    provider_outputs,
)
from tests.pulumi_harness import UNKNOWN, ProgramResult, run_program


def _run(*, preview: bool = False) -> ProgramResult:
    return run_program(
        lambda: full_stack(unknown_kubeconfig=preview),
        preview=preview,
        outputs=None if preview else provider_outputs,
    )


@pytest.fixture(scope="module", params=[False, True], ids=["up", "preview"])
def result(request: pytest.FixtureRequest) -> ProgramResult:
    return _run(preview=request.param)


def test_every_resource_is_parented_to_its_component(result: ProgramResult) -> None:
    stack_urn = result.one(PROVIDER).parent
    components = {r.urn: r for r in result.registrations if r.type in COMPONENTS}
    assert sorted(r.type for r in components.values()) == sorted(COMPONENTS)
    for registration in result.registrations:
        if registration.type in COMPONENTS or registration.type == PROVIDER:
            assert registration.parent == stack_urn, registration.urn
        else:
            assert registration.parent in components, f"{registration.urn} is not parented to a component"
            # The parent is also in the URN's type chain, which is what `pulumi stack` shows.
            assert f"{components[registration.parent].type}$" in registration.urn

    expected_children = {
        TRAINING_IMAGE: [IMAGE],
        TRAINING_JOB: [RELEASE],
        DEVICE_PLUGIN: [RELEASE],
        KUEUE: sorted(
            [
                RELEASE,
                *(
                    f"kubernetes:kueue.x-k8s.io/v1beta2:{k}"
                    for k in ("ClusterQueue", "LocalQueue", "ResourceFlavor")
                ),
            ]
        ),
    }
    for component in components.values():
        assert sorted(c.type for c in result.children_of(component.urn)) == expected_children[component.type]


def test_every_kubernetes_resource_uses_the_explicit_provider(result: ProgramResult) -> None:
    provider = result.one(PROVIDER)
    kubernetes = [r for r in result.registrations if r.custom and r.type.startswith("kubernetes:")]
    assert len(kubernetes) == 6  # 3 releases + 3 Kueue objects
    assert {r.provider for r in kubernetes} == {provider.urn}


def test_the_job_depends_on_the_image_and_the_queue(result: ProgramResult) -> None:
    job_release = next(r for r in result.by_type(RELEASE) if TRAINING_JOB in r.urn)
    image = result.one(IMAGE)
    local_queue = result.one(LOCAL_QUEUE)
    assert {image.urn, local_queue.urn} <= set(job_release.dependencies)
    # Both edges come from the values the chart receives (the image ref and the queue name).
    assert {image.urn, local_queue.urn} <= set(job_release.property_dependencies["values"])


def test_every_component_registers_its_outputs(result: ProgramResult) -> None:
    registered = {
        r.type: result.registered_outputs.get(r.urn) for r in result.registrations if r.type in COMPONENTS
    }
    assert set(registered[TRAINING_IMAGE]) == {"ref", "digest"}
    assert set(registered[TRAINING_JOB]) == {"releaseName", "jobName", "namespace", "serviceAccountName"}
    assert set(registered[KUEUE]) == {"localQueueName", "clusterQueueName"}
    assert set(registered[DEVICE_PLUGIN]) == {"namespace"}


def test_stack_outputs() -> None:
    up, preview = _run(), _run(preview=True)
    known = {
        "queue": "training",
        "clusterQueue": "training",
        "jobName": "gpt2",
        "releaseName": "gpt2",
        "namespace": "training",
        "serviceAccount": "gpt2",
    }
    assert up.exports == {"imageRef": f"{REPOSITORY}@{DIGEST}", **known}
    # A fresh stack's preview: the image is not built yet, everything else is already known.
    assert preview.exports == {"imageRef": UNKNOWN, **known}


def test_preview_registers_the_same_resources_as_an_update() -> None:
    # A resource created inside an apply would be missing from a preview with unknown values.
    up, preview = _run(), _run(preview=True)
    assert [(r.type, r.urn, r.parent) for r in preview.registrations] == [
        (r.type, r.urn, r.parent) for r in up.registrations
    ]


def test_the_recorded_graph_is_deterministic() -> None:
    first, second = _run(), _run()
    assert [asdict(r) for r in first.registrations] == [asdict(r) for r in second.registrations]
