"""What the GCP stack runs, priced: its CostInputs for trainstack.infra.cost.estimate, from the parsed config."""

from __future__ import annotations

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
from trainstack.infra.gcp.config import GcpStackConfig, GpuPoolConfig

# GKE accelerator types -> GPU names as trainstack/contract/shapes.py PEAK_FLOPS has them.
GPU_OF_ACCELERATOR = {"nvidia-tesla-t4": "T4", "nvidia-l4": "L4", "nvidia-tesla-a100": "A100",
                      "nvidia-a100-80gb": "A100", "nvidia-h100-80gb": "H100", "nvidia-h100-mega-80gb": "H100",
                      "nvidia-h200-141gb": "H200", "nvidia-b200": "B200"}


def pool_node_type(pool: GpuPoolConfig) -> str:
    return f"{pool.machine_type} + {pool.gpus_per_node} x {pool.accelerator_type}"


def _pool_rate(pool: GpuPoolConfig, prices: PriceTable) -> tuple[Rate | None, tuple[str, ...]]:
    """One node of `pool`: host + its GPUs + boot disk, spot where the pool is spot."""
    host, gpu = prices.instance(pool.machine_type), prices.accelerator(pool.accelerator_type)
    if host is None or gpu is None:
        return None, ()
    rate = host + gpu * pool.gpus_per_node
    missing = []
    disk = prices.monthly_per_gib("disk_per_gib_month", pool.disk_type)
    if disk is None:
        missing.append(f"{pool.name} boot disks ({pool.disk_type}: no price in trainstack/infra/cost/prices.yaml)")
    else:
        rate = rate + Rate(disk * pool.disk_size_gb, disk * pool.disk_size_gb)
    if pool.local_ssd_count:
        missing.append(f"{pool.name} local SSDs ({pool.local_ssd_count} per node: no price in trainstack/infra/cost/prices.yaml)")
    return rate, tuple(missing)


def gcp_cost_inputs(cfg: GcpStackConfig) -> CostInputs:
    prices = PriceTable("gcp", cfg.region)
    system = prices.instance(cfg.system_pool.machine_type)
    nat_vm, nat_ip = prices.hourly("nat_per_vm_hour"), prices.hourly("public_ipv4_per_hour")
    nodes_min = cfg.system_pool.min_nodes
    platform = [
        LineItem("controlPlane", prices.hourly("control_plane_per_hour")),
        LineItem("systemNodes", None if system is None else nodes_min * system.on_demand),
    ]
    if cfg.network.existing is None:
        platform.append(LineItem("cloudNat", None if nat_vm is None or nat_ip is None else nodes_min * nat_vm + nat_ip))
    if cfg.filestore is not None:
        per_gib = prices.monthly_per_gib("shared_filesystem_per_gib_month", cfg.filestore.tier)
        platform.append(LineItem(f"filestore{cfg.filestore.tier.title().replace('_', '')}",
                                 None if per_gib is None else per_gib * cfg.filestore.capacity_gb))
    not_included = ["system boot disks (pd-balanced: no price in trainstack/infra/cost/prices.yaml)",
                    "Cloud Storage and Artifact Registry storage ($/GB-month stored)", "Cloud NAT data ($/GiB)"]
    for pool in cfg.gpu_pools:
        if pool is not cfg.job_pool and pool.min_nodes:
            rate, _ = _pool_rate(pool, prices)
            price = None if rate is None else (rate.spot if pool.spot and rate.spot is not None else rate.on_demand)
            platform.append(LineItem(f"pool {pool.name} at min ({pool.min_nodes})",
                                     None if price is None else pool.min_nodes * price))
    job_pool = cfg.job_pool
    rate, missing = _pool_rate(job_pool, prices)
    nodes = gpu_node_counts(cfg.job, job_pool.gpus_per_node, job_pool.min_nodes, job_pool.max_nodes)
    return CostInputs(
        region=cfg.region,
        platform=tuple(platform),
        gpu=GpuNodes(node_type=pool_node_type(job_pool), capacity=job_pool.capacity,
                     gpu=GPU_OF_ACCELERATOR.get(job_pool.accelerator_type), gpus_per_node=job_pool.gpus_per_node,
                     rate=rate, per_node_platform=(nat_vm or 0.0) if cfg.network.existing is None else 0.0,
                     not_included=missing, **nodes),
        job=cfg.job,
        not_included=tuple(not_included),
    )


def estimate_gcp_cost(cfg: GcpStackConfig) -> CostEstimate:
    return estimate(gcp_cost_inputs(cfg))
