"""`trainstack:maxHourlyUsd` and `trainstack:maxRunUsd`: a budget the estimate must fit before anything
is created. Over it, the program stops with one ConfigError line that shows the estimate's breakdown."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi

from trainstack.infra.config.errors import NAMESPACE, ConfigError
from trainstack.infra.cost.estimate import CostEstimate


@dataclass(frozen=True)
class Budget:
    max_hourly_usd: float | None = None  # the stack at its largest: GPU pool at max
    max_run_usd: float | None = None  # the configured job, start to finish


def _raise_hint(key: str, needed: float) -> str:
    """The command that sets `key` to the estimate, rounded up to the cent (rounding down would still fail)."""
    return f"pulumi config set {key} {math.ceil(round(needed, 4) * 100) / 100:.2f}"


def check_budget(estimate: CostEstimate, budget: Budget, job_enabled: bool) -> None:
    """Raise ConfigError when the estimate exceeds a configured limit (or cannot be checked against it)."""
    gpu = estimate.inputs.gpu
    if budget.max_hourly_usd is not None:
        key = f"{NAMESPACE}:maxHourlyUsd"
        at_max = estimate.hourly(gpu.nodes_max)
        if at_max is None:
            raise ConfigError(key, f"cannot check the budget: {gpu.node_type} has no {estimate.inputs.region} price",
                              f"add it to trainstack/infra/cost/prices.yaml, or pulumi config rm {key}")
        if round(at_max, 4) > budget.max_hourly_usd:  # to 1/100 cent, as the outputs show it: no float noise
            raise ConfigError(key, f"the stack can cost {estimate.hourly_breakdown(gpu.nodes_max)} with the GPU pool "
                              f"at its max, over the ${budget.max_hourly_usd:.2f}/h limit",
                              f"{_raise_hint(key, at_max)}, or lower the GPU pool's max"
                              + ("" if gpu.spot else " or use spot capacity"))
        if gpu.not_included:
            # The limit passed against a node price with parts left out (e.g. the A4 host): say so in the preview.
            pulumi.log.warn(f"{key}: checked against {estimate.hourly_breakdown(gpu.nodes_max)}, which leaves out "
                            f"{'; '.join(gpu.not_included)}: the real price is higher")
    if budget.max_run_usd is not None and job_enabled:
        key = f"{NAMESPACE}:maxRunUsd"
        run = estimate.run
        if run is None:
            raise ConfigError(key, f"cannot check the budget: {estimate.run_unavailable}",
                              f"pulumi config rm {key}, or fix the cause")
        if round(run.usd, 4) > budget.max_run_usd:
            raise ConfigError(key, f"the job's run is estimated at ${run.usd:.2f}: {run.steps} steps x "
                              f"{run.tokens_per_step} tokens / {run.tokens_per_second:,.0f} tokens/s "
                              f"({run.throughput.kind}) = {run.hours:.2f} h x "
                              f"{estimate.hourly_breakdown(gpu.nodes_job)}, over the ${budget.max_run_usd:.2f} limit",
                              f"{_raise_hint(key, run.usd)}, or lower {NAMESPACE}:job.train.maxSteps")
