"""What a stack costs per hour and what its configured job costs per run, from its config alone.

Each cloud says what it runs (trainstack/infra/<cloud>/cost.py builds CostInputs from its parsed config); this
module adds it up the same way for every cloud:

    hourly at N GPU nodes = idle platform + N x (GPU node + its per-node platform share)
    run = steps x tokens per step / (tokens/s per GPU x GPUs) -> hours x hourly at the job's nodes
    tokens per step = global batch x block size; global batch = train.globalBatchSize, or
                      train.batchSize x processes (what training/trainer/train.py uses)

Prices come from prices.yaml, throughputs from throughput.yaml. Anything without a figure is listed
under `notIncluded` instead of being guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainstack.contract.shapes import PRESETS, ModelShape
from trainstack.infra.config.job import JobConfig, gpu_nodes_for_job
from trainstack.infra.cost.prices import Rate
from trainstack.infra.cost.throughput import Throughput, expected_throughput
from trainstack.infra.kubernetes.training_job import chart_default_values


@dataclass(frozen=True)
class LineItem:
    name: str
    usd_per_hour: float | None  # None: no figure in prices.yaml


@dataclass(frozen=True)
class GpuNodes:
    """The job's GPU node pool: what one node costs and how many there are in each situation."""

    node_type: str  # what the table priced, e.g. "g4dn.xlarge" or "n1-standard-4 + 2 x nvidia-tesla-t4"
    capacity: str  # SPOT, ON_DEMAND, RESERVATION or FLEX_START
    gpu: str | None  # the GPU's name for throughput, e.g. "T4"
    gpus_per_node: int
    rate: Rate | None  # per node-hour, on demand and spot, its disks included
    nodes_min: int
    nodes_job: int  # what the job runs on at its largest
    nodes_max: int
    per_node_platform: float = 0.0  # platform cost that grows with each node (GCP Cloud NAT per VM)
    not_included: tuple[str, ...] = ()

    @property
    def spot(self) -> bool:
        return self.capacity == "SPOT"

    def usd_per_node(self, spot: bool | None = None) -> float | None:
        if self.rate is None:
            return None
        use_spot = self.spot if spot is None else spot
        price = self.rate.spot if use_spot and self.rate.spot is not None else self.rate.on_demand
        return price + self.per_node_platform


@dataclass(frozen=True)
class CostInputs:
    region: str
    platform: Sequence[LineItem]  # what runs with no job: control plane, system nodes, NAT, filesystem
    gpu: GpuNodes
    job: JobConfig
    not_included: Sequence[str] = field(default_factory=tuple)  # usage-based or unpriced parts


@dataclass(frozen=True)
class RunEstimate:
    preset: str
    shape: ModelShape
    steps: int
    global_batch: int
    tokens_per_step: int
    processes: int
    throughput: Throughput
    hours: float
    gpu_nodes_usd: float
    platform_usd: float

    @property
    def usd(self) -> float:
        return self.gpu_nodes_usd + self.platform_usd

    @property
    def tokens_per_second(self) -> float:
        return self.throughput.tokens_per_second_per_gpu * self.processes


@dataclass(frozen=True)
class CostEstimate:
    inputs: CostInputs
    run: RunEstimate | None
    run_unavailable: str | None  # why there is no run estimate

    @property
    def idle_platform(self) -> float:
        return sum(item.usd_per_hour or 0.0 for item in self.inputs.platform)

    def hourly(self, nodes: int, spot: bool | None = None) -> float | None:
        node = self.inputs.gpu.usd_per_node(spot)
        if node is None:
            return None if nodes else self.idle_platform
        return self.idle_platform + nodes * node

    @property
    def not_included(self) -> list[str]:
        unpriced = [f"{item.name} (no price in trainstack/infra/cost/prices.yaml)" for item in self.inputs.platform
                    if item.usd_per_hour is None]
        if self.inputs.gpu.rate is None:
            unpriced.append(f"{self.inputs.gpu.node_type} (no {self.inputs.region} price in trainstack/infra/cost/prices.yaml)")
        return unpriced + list(self.inputs.gpu.not_included) + list(self.inputs.not_included)

    def outputs(self) -> dict[str, Any]:
        """The stack outputs estimatedHourlyUsd and estimatedRunUsd (camelCase, USD, rounded)."""
        gpu = self.inputs.gpu
        hourly: dict[str, Any] = {
            "idlePlatform": _usd(self.idle_platform),
            "platform": {item.name: _usd(item.usd_per_hour) for item in self.inputs.platform},
            "gpuNode": {"type": gpu.node_type, "capacity": gpu.capacity, "usdPerNode": _usd(gpu.usd_per_node()),
                        "onDemandUsdPerNode": _usd(gpu.usd_per_node(spot=False)),
                        "spotUsdPerNode": _usd(gpu.usd_per_node(spot=True)) if gpu.rate and gpu.rate.spot else None},
        }
        for label, nodes in (("atMin", gpu.nodes_min), ("atJob", gpu.nodes_job), ("atMax", gpu.nodes_max)):
            hourly[label] = {"nodes": nodes, "usd": _usd(self.hourly(nodes))}
        hourly["atJobOnDemand"] = _usd(self.hourly(gpu.nodes_job, spot=False))
        hourly["atJobSpot"] = _usd(self.hourly(gpu.nodes_job, spot=True)) if gpu.rate and gpu.rate.spot else None
        hourly["notIncluded"] = self.not_included
        hourly["prices"] = "trainstack/infra/cost/prices.yaml"
        return {"estimatedHourlyUsd": hourly, "estimatedRunUsd": self._run_output()}

    def _run_output(self) -> dict[str, Any]:
        run = self.run
        if run is None:
            return {"usd": None, "why": self.run_unavailable}
        return {
            "usd": _usd(run.usd),
            "hours": round(run.hours, 3),
            "gpuNodesUsd": _usd(run.gpu_nodes_usd),
            "platformUsd": _usd(run.platform_usd),
            "nodes": self.inputs.gpu.nodes_job,
            "steps": run.steps,
            "tokensPerStep": run.tokens_per_step,
            "globalBatch": run.global_batch,
            "blockSize": run.shape.block_size,
            "preset": run.preset,
            "processes": run.processes,
            "tokensPerSecond": round(run.tokens_per_second),
            "throughput": f"{round(run.throughput.tokens_per_second_per_gpu)} tokens/s per {self.inputs.gpu.gpu} "
                          f"({run.throughput.basis}; throughput.yaml)",
        }

    def hourly_breakdown(self, nodes: int) -> str:
        """One line: `$0.20 platform + 2 x g4dn.xlarge SPOT $0.19 = $0.57/h`."""
        gpu = self.inputs.gpu
        node = gpu.usd_per_node()
        node_text = "unpriced" if node is None else f"${node:.2f}"
        total = self.hourly(nodes)
        total_text = "unknown" if total is None else f"${total:.2f}/h"
        return (f"${self.idle_platform:.2f} platform + {nodes} x {gpu.node_type} {gpu.capacity} {node_text} "
                f"= {total_text}")


def _usd(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


_SHAPE_FLAGS = {"--n-layer": "n_layer", "--n-embd": "n_embd", "--n-head": "n_head", "--block-size": "block_size"}


def _train_values(job: JobConfig) -> dict[str, Any]:
    return {**chart_default_values()["train"], **{k: v for k, v in job.train.items() if v is not None}}


def _shape_overrides(extra_args: Sequence[str]) -> dict[str, int]:
    """--n-layer/--n-embd/--n-head/--block-size given in train.extraArgs, as resolve_shape takes them."""
    overrides: dict[str, int] = {}
    args = [str(arg) for arg in extra_args]
    for i, arg in enumerate(args):
        flag, _, inline = arg.partition("=")
        if flag in _SHAPE_FLAGS:
            value = inline or (args[i + 1] if i + 1 < len(args) else "")
            if re.fullmatch(r"\d+", value):
                overrides[_SHAPE_FLAGS[flag]] = int(value)
    return overrides


def estimate(inputs: CostInputs) -> CostEstimate:
    """The hourly estimate, and the configured job's run estimate where it can be made."""
    base = CostEstimate(inputs=inputs, run=None, run_unavailable=None)
    train = _train_values(inputs.job)
    preset = str(train.get("preset"))
    if preset not in PRESETS:
        return replace(base, run_unavailable=f"train.preset {preset!r} is not one of {', '.join(sorted(PRESETS))}")
    shape = replace(PRESETS[preset], **_shape_overrides(train.get("extraArgs") or ()))
    gpu = inputs.gpu
    throughput = expected_throughput(gpu.gpu, preset, shape) if gpu.gpu else None
    if throughput is None:
        return replace(base, run_unavailable=f"no throughput for {gpu.gpu or gpu.node_type} in "
                                             "trainstack/infra/cost/throughput.yaml or trainstack/contract/shapes.py PEAK_FLOPS")
    node = gpu.usd_per_node()
    if node is None:
        return replace(base, run_unavailable=f"no price for {gpu.node_type} in trainstack/infra/cost/prices.yaml")
    job = inputs.job
    processes = job.pods_max * job.procs_per_pod
    global_batch = int(train.get("globalBatchSize") or int(train["batchSize"]) * processes)
    tokens_per_step = global_batch * shape.block_size
    steps = int(train["maxSteps"])
    hours = steps * tokens_per_step / (throughput.tokens_per_second_per_gpu * processes) / 3600
    run = RunEstimate(preset=preset, shape=shape, steps=steps, global_batch=global_batch,
                      tokens_per_step=tokens_per_step, processes=processes, throughput=throughput, hours=hours,
                      gpu_nodes_usd=hours * gpu.nodes_job * node, platform_usd=hours * base.idle_platform)
    return replace(base, run=run)


def gpu_node_counts(job: JobConfig, gpus_per_node: int, nodes_min: int, nodes_max: int) -> Mapping[str, int]:
    """(min, job, max) GPU nodes: the job runs on as many as its largest size needs."""
    _, for_job = gpu_nodes_for_job(job, gpus_per_node)
    return {"nodes_min": nodes_min, "nodes_job": min(for_job, nodes_max), "nodes_max": nodes_max}
