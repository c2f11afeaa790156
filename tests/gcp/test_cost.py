"""The GCP stacks' cost outputs, checked against the price table by hand (trainstack/infra/cost/prices.yaml, us-central1)."""

from __future__ import annotations

import pulumi
import pytest

from tests.gcp.stack_runs import JOB_ENABLED, PROJECT, REPO, config_with, run_main
from tests.stack_runs import config_with as stack_config_with


def test_t4_stack_prices_host_gpus_disk_and_filestore():
    hourly = run_main(config_with(JOB_ENABLED)).exports["estimatedHourlyUsd"]
    platform = 0.10 + 0.13402 + (0.0014 + 0.005) + 1024 * 0.20 / 730  # GKE, e2-standard-4, NAT, BASIC_HDD 1 TiB
    node_spot = 0.04816 + 2 * 0.14 + 270 * 0.17 / 730 + 0.0014  # n1-standard-4 + 2 T4 + 270 GB pd-ssd + its NAT share
    assert hourly["idlePlatform"] == pytest.approx(platform, abs=1e-4)
    assert hourly["gpuNode"]["usdPerNode"] == pytest.approx(node_spot, abs=1e-4)
    assert hourly["atJob"] == {"nodes": 2, "usd": round(platform + 2 * node_spot, 4)}


def test_a3_stack_is_on_demand_and_says_what_it_leaves_out():
    config = stack_config_with(REPO / "Pulumi.gcp-a3.yaml", {"gcp:project": PROJECT})
    exports = run_main(config, stack="gcp-a3").exports
    hourly = exports["estimatedHourlyUsd"]
    assert hourly["gpuNode"]["capacity"] == "ON_DEMAND"
    assert hourly["gpuNode"]["onDemandUsdPerNode"] == pytest.approx(9.46006 + 8 * 4.20076 + 200 * 0.17 / 730 + 0.0014,
                                                                    abs=1e-4)
    assert "a3 local SSDs (16 per node: no price in trainstack/infra/cost/prices.yaml)" in hourly["notIncluded"]
    run = exports["estimatedRunUsd"]
    assert (run["preset"], run["processes"], run["tokensPerStep"]) == ("gpt2-medium", 16, 16 * 16 * 1024)


def test_a4_is_priced_by_its_b200s_with_the_host_part_named_as_excluded():
    # The price snapshot has the B200 x 8 row but no a4-highgpu-8g host row (trainstack/infra/cost/prices.yaml).
    config = stack_config_with(REPO / "Pulumi.gcp-a4.yaml", {"gcp:project": PROJECT})
    hourly = run_main(config, stack="gcp-a4").exports["estimatedHourlyUsd"]
    # The Hyperdisk boot disk has no price in the snapshot either: named, not counted.
    assert hourly["gpuNode"]["onDemandUsdPerNode"] == pytest.approx(8 * 11.277 + 0.0014, abs=1e-4)
    assert "a4 boot disks (hyperdisk-balanced: no price in trainstack/infra/cost/prices.yaml)" in hourly["notIncluded"]
    assert hourly["gpuNode"]["spotUsdPerNode"] is None  # the B200 row has no spot price
    assert "a4 host part (a4-highgpu-8g vCPU and memory: no price in trainstack/infra/cost/prices.yaml)" in hourly["notIncluded"]
    assert "a4 local SSDs (32 per node: no price in trainstack/infra/cost/prices.yaml)" in hourly["notIncluded"]


def test_the_a4_budget_check_says_in_the_preview_what_the_estimate_leaves_out(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_main(stack_config_with(REPO / "Pulumi.gcp-a4.yaml", {"gcp:project": PROJECT}), stack="gcp-a4", preview=True)
    [budget] = [w for w in warnings if w.startswith("trainstack:maxHourlyUsd: ")]
    assert "2 x a4-highgpu-8g + 8 x nvidia-b200 ON_DEMAND" in budget
    assert "leaves out a4 host part (a4-highgpu-8g vCPU and memory: no price" in budget
    assert budget.endswith("the real price is higher")


def test_a3_ultra_is_priced_by_host_and_h200s():
    config = stack_config_with(REPO / "Pulumi.gcp-a4.yaml", {"gcp:project": PROJECT,
                                                             "trainstack:gpuPools": {"a4": {"machineType": "a3-ultragpu-8g"}}})
    hourly = run_main(config, stack="gcp-a4").exports["estimatedHourlyUsd"]
    assert hourly["gpuNode"]["onDemandUsdPerNode"] == pytest.approx(12.266 + 8 * 9.31174 + 0.0014, abs=1e-4)
    assert not [item for item in hourly["notIncluded"] if "host part" in item]
