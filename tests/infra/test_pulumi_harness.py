"""The mock harness itself: what it records must be what the engine would receive."""

from __future__ import annotations

import pulumi
import pulumi_docker_build as docker_build
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime.proto import resource_pb2

from tests.pulumi_harness import UNKNOWN, run_program, unknown_output

NAMESPACE = "kubernetes:core/v1:Namespace"


class _Pair(pulumi.ComponentResource):
    """A component with two children, the second depending on the first through an input."""

    def __init__(self, name: str, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Pair", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        first = k8s.core.v1.Namespace(f"{name}-first", metadata={"name": "first"}, opts=child)
        second = k8s.core.v1.ConfigMap(
            f"{name}-second",
            metadata={"namespace": first.metadata.name},
            data={"plain": "x", "token": pulumi.Output.secret("s3cr3t")},
            opts=child,
        )
        self.namespace = first.metadata.name
        self.config_map_id = second.id
        self.register_outputs({"namespace": self.namespace})


def _pair_program() -> None:
    provider = k8s.Provider("k8s", kubeconfig="{}")
    pair = _Pair("pair", provider)
    pulumi.export("namespace", pair.namespace)
    pulumi.export("configMapId", pair.config_map_id)
    pulumi.export("secret", pulumi.Output.secret("hidden"))


def test_records_parents_providers_dependencies_and_inputs() -> None:
    result = run_program(_pair_program)

    provider = result.one("pulumi:providers:kubernetes")
    pair = result.one("test:index:Pair")
    first = result.one(NAMESPACE)
    second = result.one("kubernetes:core/v1:ConfigMap")
    assert pair.parent == provider.parent  # both top level: the stack
    assert pair.parent.endswith("::pulumi:pulumi:Stack::trainstack-test")
    assert [r.urn for r in result.children_of(pair.urn)] == sorted([first.urn, second.urn])
    assert {first.provider, second.provider} == {provider.urn}
    assert pair.custom is False and pair.provider is None and first.custom is True
    assert second.dependencies == [first.urn]
    assert second.property_dependencies["metadata"] == [first.urn]
    assert second.inputs["metadata"] == {"namespace": "first"}
    assert result.registered_outputs[pair.urn] == {"namespace": "first"}


def test_secret_paths_are_exact_not_pushed_up() -> None:
    def program() -> None:
        docker_build.Image(
            "image",
            push=False,
            registries=[
                docker_build.RegistryArgs(
                    address="r.example", username="u", password=pulumi.Output.secret("pw")
                )
            ],
        )

    image = run_program(program).one("docker-build:index:Image")
    assert image.secret_paths == frozenset({"registries[0].password"})
    assert image.inputs["registries"] == [{"address": "r.example", "username": "u", "password": "pw"}]
    assert image.is_secret("registries[0].password")
    assert not image.is_secret("registries[0].username")
    assert not image.is_secret("registries")


def test_exports_are_resolved_with_their_secretness() -> None:
    result = run_program(_pair_program)
    assert result.exports == {"namespace": "first", "configMapId": "pair-second-id", "secret": "hidden"}
    assert result.secret_exports == frozenset({"secret"})


def test_preview_leaves_ids_and_unsupplied_outputs_unknown() -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig=unknown_output())
        namespace = k8s.core.v1.Namespace(
            "ns", metadata={"name": "known"}, opts=pulumi.ResourceOptions(provider=provider)
        )
        k8s.core.v1.ConfigMap(
            "cm",
            metadata={"namespace": namespace.metadata.name, "labels": {"phase": namespace.status.phase}},
            opts=pulumi.ResourceOptions(provider=provider),
        )
        pulumi.export("id", namespace.id)
        pulumi.export("name", namespace.metadata.name)

    result = run_program(program, preview=True)
    assert result.exports == {"id": UNKNOWN, "name": "known"}
    config_map = result.one("kubernetes:core/v1:ConfigMap")
    assert config_map.inputs["metadata"] == {"namespace": "known", "labels": {"phase": UNKNOWN}}
    assert result.one("pulumi:providers:kubernetes").inputs["kubeconfig"] is UNKNOWN
    # The provider reference still names the provider's URN while its ID is unknown.
    assert config_map.provider == result.one("pulumi:providers:kubernetes").urn


def test_outputs_hook_supplies_provider_computed_outputs() -> None:
    def program() -> None:
        namespace = k8s.core.v1.Namespace("ns")
        pulumi.export("uid", namespace.metadata.uid)

    def outputs(type_: str, name: str, inputs: dict) -> dict:
        return {"metadata": {"uid": f"{name}-uid"}} if type_ == NAMESPACE else {}

    assert run_program(program, outputs=outputs).exports == {"uid": "ns-uid"}


def test_program_errors_propagate_and_leave_no_state_behind() -> None:
    def failing() -> None:
        k8s.core.v1.Namespace("before-the-error")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_program(failing, config={"trainstack:gpu": "1"})

    def probe() -> None:
        pulumi.export("gpu", pulumi.Config("trainstack").get("gpu"))

    result = run_program(probe)
    assert result.registrations == []  # nothing from the failed run
    assert result.exports == {"gpu": None}  # config does not leak into the next run


def test_errors_inside_apply_propagate() -> None:
    def program() -> None:
        namespace = k8s.core.v1.Namespace("ns", metadata={"name": "x"})
        namespace.metadata.apply(lambda _: (_ for _ in ()).throw(ValueError("bad apply")))

    with pytest.raises(ValueError, match="bad apply"):
        run_program(program)


def test_config_and_secret_config_reach_the_program() -> None:
    def program() -> None:
        config = pulumi.Config("trainstack")
        pulumi.export("nodes", config.require_int("nodes"))
        pulumi.export("token", config.require_secret("token"))

    result = run_program(
        program,
        config={"trainstack:nodes": "4", "trainstack:token": "t0k3n"},
        secret_config_keys=["trainstack:token"],
        stack="dev",
    )
    assert result.exports == {"nodes": 4, "token": "t0k3n"}
    assert result.secret_exports == frozenset({"token"})


def test_invokes_are_answered_by_calls_or_fail_loudly() -> None:
    def program() -> None:
        answer = pulumi.runtime.invoke("test:index:lookup", {"key": "k"})
        pulumi.export("value", answer.value["value"])

    result = run_program(program, calls=lambda token, args: {"value": f"{token}:{args['key']}"})
    assert result.exports == {"value": "test:index:lookup:k"}
    assert result.invokes == [("test:index:lookup", {"key": "k"})]
    with pytest.raises(Exception, match="unmocked invoke test:index:lookup"):
        run_program(program)


def test_resource_references_are_off_and_reads_are_recorded() -> None:
    def program() -> None:
        supported = pulumi.runtime.settings.monitor_supports_feature(
            resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        )
        pulumi.export("resourceReferences", supported)
        k8s.core.v1.Namespace.get("existing", "kube-system")

    result = run_program(program)
    assert result.exports == {"resourceReferences": False}
    existing = result.one(NAMESPACE, "existing")
    assert existing.read is True


def test_program_value_is_returned() -> None:
    result = run_program(lambda: "built")
    assert result.value == "built"


def test_multi_language_components_register_once_as_remote() -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        k8s.helm.v4.Chart(
            "chart", chart="oci://example/chart", opts=pulumi.ResourceOptions(provider=provider)
        )

    result = run_program(program)
    chart = result.one("kubernetes:helm.sh/v4:Chart")
    assert chart.remote is True and chart.custom is False
    assert result.children_of(chart.urn) == []  # what it expands to never appears under mocks
    assert chart.providers == {"kubernetes": result.one("pulumi:providers:kubernetes").urn}
