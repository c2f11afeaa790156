"""The price table, the throughput model and the estimate's arithmetic (trainstack/infra/cost), checked by hand.

The stacks' outputs and budget errors are tested in tests/<cloud>/test_cost.py and test_config.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from trainstack.contract.shapes import PRESETS, ModelShape, gpt2_params_without_positions
from trainstack.infra.config.job import parse_job
from trainstack.infra.cost import CostInputs, GpuNodes, LineItem, Rate, estimate
from trainstack.infra.cost.prices import PRICES_FILE, PriceTable
from trainstack.infra.cost.throughput import expected_throughput, model_flops_per_token


def test_every_price_names_a_source_that_says_where_and_when():
    table = yaml.safe_load(PRICES_FILE.read_text())
    sources = table["sources"]
    assert all(source.get("read") and (source.get("url") or source.get("dataset")) for source in sources.values())
    figures = []
    for cloud in ("aws", "gcp"):
        for region, entries in table[cloud].items():
            for entry in entries.values():
                nested = [entry] if "source" in entry else list(entry.values())
                figures += [(cloud, region, figure) for figure in nested]
    assert len(figures) > 25
    for cloud, region, figure in figures:
        assert figure["source"] in sources, (cloud, region, figure)
        if "spot_zones" in figure:  # `spot` is the zones' mean, as the file says
            zones = figure["spot_zones"].values()
            assert figure["spot"] == pytest.approx(sum(zones) / len(zones), abs=1e-4), figure


@pytest.mark.parametrize(("cloud", "region", "names"), [
    ("aws", "us-west-2", ["g4dn.xlarge", "g4dn.2xlarge", "g4dn.12xlarge", "g5.xlarge", "g5.12xlarge", "g5.48xlarge",
                          "g6.xlarge", "p4d.24xlarge", "p5.48xlarge", "t3.medium"]),
    ("gcp", "us-central1", ["n1-standard-4", "n1-standard-8", "e2-standard-4", "a3-highgpu-8g", "a3-megagpu-8g",
                            "g2-standard-24", "a2-highgpu-1g"]),
])
def test_the_table_prices_the_types_the_stacks_are_used_with(cloud, region, names):
    table = PriceTable(cloud, region)
    for name in names:
        rate = table.instance(name)
        assert rate is not None and 0 < rate.spot < rate.on_demand, name


def test_gcp_machines_with_gpus_cost_their_host_plus_their_gpus():
    table = PriceTable("gcp", "us-central1")
    a2 = table.instance("a2-highgpu-1g") + table.accelerator("nvidia-tesla-a100")
    assert a2.on_demand == pytest.approx(3.67339)  # 0.73948 host + 2.93391 A100 (the catalog's rows)
    assert table.accelerator("nvidia-tesla-t4") == Rate(0.35, 0.14)
    assert table.instance("m1-megamem-96") is None  # not in the table: None, never a guess
    assert PriceTable("aws", "eu-central-1").instance("g4dn.xlarge") is None


@pytest.mark.parametrize("shape", [PRESETS["tiny"], ModelShape(n_layer=3, n_embd=96, n_head=4, block_size=64)])
def test_the_torch_free_parameter_count_matches_the_real_model(shape):
    from training.model.build import config_for, create_model
    from training.observability.metrics import count_params

    model = create_model(config_for(shape, vocab_size=50257, dropout=0.0, eos_token_id=50256))
    assert gpt2_params_without_positions(shape) == count_params(model)


def test_flops_per_token_of_gpt2_is_the_benchmarks_figure():
    assert model_flops_per_token(PRESETS["gpt2"]) == pytest.approx(855.4e6, rel=1e-3)  # docs/BENCHMARKS.md


def test_throughput_is_documented_for_the_peer_run_and_derived_otherwise():
    documented = expected_throughput("A100", "gpt2", PRESETS["gpt2"])
    assert (documented.kind, documented.tokens_per_second_per_gpu) == ("documented", 106667)
    longer = ModelShape(n_layer=12, n_embd=768, n_head=12, block_size=512)  # not the peer's shape
    assert expected_throughput("A100", "gpt2", longer).kind == "derived"
    derived = expected_throughput("T4", "gpt2", PRESETS["gpt2"])
    assert derived.kind == "derived"
    assert derived.tokens_per_second_per_gpu == pytest.approx(0.29 * 65e12 / 855_383_040)
    assert expected_throughput("Radeon", "gpt2", PRESETS["gpt2"]) is None


NODE = Rate(2.0, 0.5)  # per node-hour, on demand and spot


def _inputs(train: dict, rate: Rate | None = NODE) -> CostInputs:
    job = parse_job({"trainstack:job": json.dumps({"podsMin": 1, "podsMax": 2, "train": train})}, 1, "x")
    return CostInputs(region="r", platform=(LineItem("controlPlane", 0.1), LineItem("nat", None)),
                      gpu=GpuNodes(node_type="n", capacity="SPOT", gpu="A100", gpus_per_node=1, rate=rate,
                                   nodes_min=0, nodes_job=2, nodes_max=3, per_node_platform=0.01),
                      job=job)


def test_hourly_estimate_adds_platform_and_nodes_at_min_job_and_max():
    result = estimate(_inputs({}))
    hourly = result.outputs()["estimatedHourlyUsd"]
    assert hourly["idlePlatform"] == 0.1
    assert (hourly["atMin"]["usd"], hourly["atJob"]["usd"], hourly["atMax"]["usd"]) == (0.1, 1.12, 1.63)
    assert (hourly["atJobSpot"], hourly["atJobOnDemand"]) == (1.12, 4.12)
    assert "nat (no price in trainstack/infra/cost/prices.yaml)" in hourly["notIncluded"]


def test_run_estimate_is_steps_times_tokens_over_throughput_times_nodes_and_price():
    # 2 processes x batch 8 x block 1024 = 16,384 tokens a step; the A100 figure is nanoGPT's 106,667 tokens/s.
    run = estimate(_inputs({"maxSteps": 5000})).run
    assert (run.global_batch, run.tokens_per_step) == (16, 16384)
    hours = 5000 * 16384 / (106667 * 2) / 3600
    assert run.hours == pytest.approx(hours)
    assert run.usd == pytest.approx(hours * (2 * 0.51 + 0.1))


def test_run_estimate_follows_global_batch_and_shape_flags_in_extra_args():
    run = estimate(_inputs({"globalBatchSize": 64, "extraArgs": ["--block-size", "512", "--n-layer=6"]})).run
    assert run.shape == ModelShape(n_layer=6, n_embd=768, n_head=12, block_size=512)
    assert (run.global_batch, run.tokens_per_step, run.throughput.kind) == (64, 32768, "derived")


@pytest.mark.parametrize(("inputs", "why"), [
    # The config refuses an unknown preset; the estimate still says why if handed one.
    (dataclasses.replace(_inputs({}), job=dataclasses.replace(_inputs({}).job, train={"preset": "gpt3"})),
     "train.preset 'gpt3' is not one of"),
    (_inputs({}, rate=None), "no price for n in trainstack/infra/cost/prices.yaml"),
])
def test_no_run_estimate_says_why(inputs, why):
    result = estimate(inputs)
    assert result.run is None and why in result.outputs()["estimatedRunUsd"]["why"]


def test_the_suggested_budget_is_rounded_up_so_that_it_passes():
    from trainstack.infra.config import ConfigError
    from trainstack.infra.cost import Budget, check_budget

    result = estimate(_inputs({}))  # $1.63/h at max: 0.1 + 3 x 0.51
    with pytest.raises(ConfigError) as raised:
        check_budget(result, Budget(max_hourly_usd=1.0), job_enabled=False)
    suggested = float(str(raised.value).split("maxHourlyUsd ")[-1].split(",")[0])
    assert suggested >= round(result.hourly(3), 4)
    check_budget(result, Budget(max_hourly_usd=suggested), job_enabled=False)  # passes
    check_budget(result, Budget(max_run_usd=0.01), job_enabled=False)  # a disabled job is not held to maxRunUsd
