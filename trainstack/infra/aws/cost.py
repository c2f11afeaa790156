"""What the AWS stack runs, priced: its CostInputs for trainstack.infra.cost.estimate, from the parsed config."""

from __future__ import annotations

from trainstack.infra.aws.config import AwsStackConfig
from trainstack.infra.cost import (
    CostEstimate,
    CostInputs,
    GpuNodes,
    LineItem,
    PriceTable,
    Rate,
    estimate,
    gpu_node_counts,
)

# The NVIDIA GPU of each family in config.GPU_INSTANCE_FAMILIES (names as trainstack/contract/shapes.py PEAK_FLOPS has them).
GPU_OF_FAMILY = {"g4dn": "T4", "g5": "A10G", "g6": "L4", "g6e": "L40S", "gr6": "L4", "p3": "V100", "p3dn": "V100",
                 "p4d": "A100", "p4de": "A100", "p5": "H100", "p5e": "H200", "p5en": "H200", "p6-b200": "B200"}


def _gpu_node_rate(cfg: AwsStackConfig, prices: PriceTable) -> tuple[str, Rate | None, tuple[str, ...]]:
    """The dearest priced type of the GPU group (it may launch any of them), plus its root volume."""
    gpu = cfg.gpu_nodes
    priced = {t: rate for t in gpu.instance_types if (rate := prices.instance(t)) is not None}
    missing = tuple(f"{t} (no {cfg.region} price in trainstack/infra/cost/prices.yaml)" for t in gpu.instance_types
                    if t not in priced and priced)
    if not priced:
        return gpu.instance_types[0], None, ()
    node_type, rate = max(priced.items(), key=lambda item: item[1].on_demand)
    disk = prices.monthly_per_gib("disk_per_gib_month", "gp3")
    if disk is None:
        return node_type, rate, (*missing, "GPU node root volumes (gp3)")
    return node_type, rate + Rate(disk * gpu.disk_size_gb, disk * gpu.disk_size_gb), missing


def aws_cost_inputs(cfg: AwsStackConfig) -> CostInputs:
    prices = PriceTable("aws", cfg.region)
    system = cfg.system_nodes
    system_rate = prices.instance(system.instance_types[0])
    disk = prices.monthly_per_gib("disk_per_gib_month", "gp3")
    platform = [
        LineItem("controlPlane", prices.hourly("control_plane_per_hour")),
        LineItem("systemNodes", None if system_rate is None else system.desired_size * system_rate.on_demand),
        LineItem("systemDisks", None if disk is None else system.desired_size * system.disk_size_gb * disk),
    ]
    if cfg.network.existing is None:
        gateways = len(cfg.network.availability_zones) if cfg.network.nat_gateway_per_zone else 1
        nat, ipv4 = prices.hourly("nat_gateway_per_hour"), prices.hourly("public_ipv4_per_hour")
        platform.append(LineItem("natGateways", None if nat is None or ipv4 is None else gateways * (nat + ipv4)))
    node_type, rate, missing = _gpu_node_rate(cfg, prices)
    gpu = cfg.gpu_nodes
    family = node_type.partition(".")[0]
    nodes = gpu_node_counts(cfg.job, gpu.gpus_per_node, gpu.min_size, gpu.max_size)
    return CostInputs(
        region=cfg.region,
        platform=tuple(platform),
        gpu=GpuNodes(node_type=node_type, capacity=gpu.capacity_type, gpu=GPU_OF_FAMILY.get(family),
                     gpus_per_node=gpu.gpus_per_node, rate=rate, not_included=missing, **nodes),
        job=cfg.job,
        not_included=("EFS storage ($/GB-month stored)", "S3 and ECR storage ($/GB-month stored)",
                      "NAT gateway data processing ($/GB)", "cross-zone traffic ($/GB)"),
    )


def estimate_aws_cost(cfg: AwsStackConfig) -> CostEstimate:
    return estimate(aws_cost_inputs(cfg))
