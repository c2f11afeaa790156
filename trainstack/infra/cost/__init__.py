"""Cost guardrails every cloud shares: the price table, expected throughput, the estimate and the budget.

trainstack/infra/<cloud>/cost.py turns its parsed config into CostInputs; `estimate()` adds it up; the stacks
export the result as `estimatedHourlyUsd` / `estimatedRunUsd`, and `check_budget()` stops the
program when `trainstack:maxHourlyUsd` or `trainstack:maxRunUsd` is exceeded.
"""

from trainstack.infra.cost.budget import Budget, check_budget
from trainstack.infra.cost.estimate import (
           CostEstimate,
           CostInputs,
           GpuNodes,
           LineItem,
           estimate,
           gpu_node_counts,
)
from trainstack.infra.cost.prices import HOURS_PER_MONTH, PriceTable, Rate

__all__ = ["HOURS_PER_MONTH", "Budget", "CostEstimate", "CostInputs", "GpuNodes", "LineItem",
           "PriceTable", "Rate", "check_budget", "estimate", "gpu_node_counts"]
