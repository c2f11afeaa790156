"""Preflight: is each GPU pool's machine type offered in the node zone, asked during `pulumi preview`.

compute.machineTypes.list (gcp.compute.get_machine_types) answers for the project and zone, and for
A2/A3/A4/G2 machines also which GPUs come with them. pulumi-gcp has no data source for accelerator
types, so the GPU an N1 pool attaches (nvidia-tesla-t4) is not checked here: GKE refuses a zone
without it when it creates the node pool. The zone and the GKE version are checked in cluster.py.

Like cluster.py's checks, each answer is an Output whose apply raises a one-line pulumi.RunError;
`gate()` combines them for the stack's resources to depend on. They need credentials; under mocks
the tests answer them.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import NAMESPACE
from infra.gcp.config import GcpStackConfig, GpuPoolConfig


def checked_machine_type(result: gcp.compute.GetMachineTypesResult, pool: GpuPoolConfig, zone: str) -> bool:
    key = f"{NAMESPACE}:gpuPools.{pool.name}.machineType"
    machines = [m for m in result.machine_types or () if m.name == pool.machine_type]
    if not machines:
        raise pulumi.RunError(f"{key}: {pool.machine_type} is not offered in {zone} for this project. Fix: pulumi "
                              f"config set {NAMESPACE}:zone <a zone that offers it> (gcloud compute machine-types "
                              f"list --filter=name={pool.machine_type}), or choose another machine type")
    if not pool.attach_accelerator:
        gpus = {(a.guest_accelerator_type, a.guest_accelerator_count) for a in machines[0].accelerators or ()}
        if (pool.accelerator_type, pool.accelerator_count) not in gpus:
            offered = ", ".join(f"{n} x {t}" for t, n in sorted(gpus)) or "no GPUs"
            raise pulumi.RunError(f"{key}: {pool.machine_type} in {zone} comes with {offered}, not "
                                  f"{pool.accelerator_count} x {pool.accelerator_type}. Fix: choose the machine type "
                                  "of the GPUs you want")
    return True


def gate(cfg: GcpStackConfig, provider: gcp.Provider, parent: pulumi.Resource) -> pulumi.Output[list]:
    """An Output that resolves to [] once every pool's machine type is offered: give it as depends_on."""
    invoke = pulumi.InvokeOutputOptions(parent=parent, provider=provider)
    checks = [
        gcp.compute.get_machine_types_output(project=cfg.project, zone=cfg.zone, filter=f"name = {pool.machine_type}",
                                             opts=invoke).apply(
            lambda result, pool=pool: checked_machine_type(result, pool, cfg.zone))
        for pool in cfg.gpu_pools
    ]
    return pulumi.Output.all(*checks).apply(lambda _: [])
