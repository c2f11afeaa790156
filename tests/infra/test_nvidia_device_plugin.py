"""NvidiaDevicePlugin under Pulumi mocks: the pinned chart, scheduled onto the GPU nodes only."""

from __future__ import annotations

import pulumi
import pytest

from tests.infra.programs import DEVICE_PLUGIN, GPU_NODE_LABELS, PROVIDER, RELEASE, make_provider
from tests.pulumi_harness import ProgramResult, run_program
from trainstack.infra import InvalidArgsError, NvidiaDevicePlugin, NvidiaDevicePluginArgs
from trainstack.infra.core.versions import NVIDIA_DEVICE_PLUGIN_CHART
from trainstack.infra.kubernetes.nvidia_device_plugin import CHART_DEFAULT_TOLERATIONS

SPOT_TOLERATION = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def _run_plugin(*, preview: bool = False, **overrides) -> ProgramResult:
    def program() -> None:
        provider = make_provider(unknown_kubeconfig=preview)
        plugin = NvidiaDevicePlugin("nvidia", NvidiaDevicePluginArgs(provider=provider, **overrides))
        pulumi.export("namespace", plugin.namespace)

    return run_program(program, preview=preview)


def test_release_is_the_pinned_chart_from_nvidias_repository() -> None:
    inputs = _run_plugin().one(RELEASE).inputs
    assert inputs["chart"] == "nvidia-device-plugin" == NVIDIA_DEVICE_PLUGIN_CHART.chart
    assert inputs["version"] == "0.20.0" == NVIDIA_DEVICE_PLUGIN_CHART.version
    assert inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert inputs["namespace"] == "nvidia-device-plugin" and inputs["createNamespace"] is True


def test_node_selector_replaces_the_charts_nfd_affinity() -> None:
    values = _run_plugin(node_selector=dict(GPU_NODE_LABELS)).one(RELEASE).inputs["values"]
    assert values["nodeSelector"] == GPU_NODE_LABELS
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchExpressions": [{"key": "trainstack.dev/pool", "operator": "In", "values": ["gpu"]}]}
    ]


def test_without_node_selector_the_charts_affinity_applies() -> None:
    values = _run_plugin().one(RELEASE).inputs["values"]
    assert "nodeSelector" not in values and "affinity" not in values


def test_tolerations_extend_the_chart_defaults_without_duplicates() -> None:
    gpu_taint = dict(CHART_DEFAULT_TOLERATIONS[1])
    values = _run_plugin(tolerations=(SPOT_TOLERATION, gpu_taint)).one(RELEASE).inputs["values"]
    assert values["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        SPOT_TOLERATION,
    ]


def test_release_is_parented_and_uses_the_explicit_provider() -> None:
    result = _run_plugin(preview=True)
    component = result.one(DEVICE_PLUGIN)
    release = result.one(RELEASE)
    assert result.children_of(component.urn) == [release]
    assert release.provider == result.one(PROVIDER).urn
    assert result.exports == {"namespace": "nvidia-device-plugin"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"namespace": "default"}, "namespace must not be 'default'"),
        ({"namespace": "GPU"}, "namespace must be a DNS label"),
        ({"node_selector": {"pool": None}}, "node_selector must map non-empty strings to strings"),
        ({"tolerations": ["nvidia.com/gpu"]}, "tolerations[0] must be a mapping"),
    ],
)
def test_invalid_arguments_fail_before_anything_is_registered(overrides: dict, message: str) -> None:
    def program() -> None:
        args = NvidiaDevicePluginArgs(provider=make_provider(), **overrides)
        with pytest.raises(InvalidArgsError, match="^NvidiaDevicePlugin 'nvidia': ") as error:
            NvidiaDevicePlugin("nvidia", args)
        assert message in str(error.value)

    assert [r.type for r in run_program(program).registrations] == [PROVIDER]
