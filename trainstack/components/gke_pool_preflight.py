"""GkeGpuNodePool's preflight: the GKE stack's checks of a GPU pool, asked of the zone and cluster the part is given.

The stack asks them before it creates anything (trainstack/infra/gcp/preflight.py); a pool part is built on a
cluster that exists by the time its name resolves, so here they are asked before the node pool only:
- is the machine type offered in the nodes' zone (compute.machineTypes.list), with the GPUs the pool says?
- for a GPUDirect machine: is the cluster's GKE version at least the one GPUDirect needs for its minor
  (GpuDirectProfile.min_versions), and is multi-networking on, which attaching the GPU VPCs needs?
  (container getCluster: gcp.container.get_cluster_output, only for such pools)
Each answer is an Output whose apply raises a one-line InputError naming the part's inputs. Nothing is asked of a
given provider whose settings are other resources' outputs, not known at preview (every answer empty): `up` asks.
"""

from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from trainstack.components.part_config import checked_as_inputs
from trainstack.components.stack_config import InputError
from trainstack.infra.gcp.config import GpuPoolConfig
from trainstack.infra.gcp.machine_types import GpuDirectProfile, meets_gpu_direct_minimum
from trainstack.infra.gcp.preflight import checked_machine_type


def checked_cluster(result: gcp.container.GetClusterResult, profile: GpuDirectProfile, machine_type: str) -> bool:
    """The cluster a GPUDirect pool joins: new enough for GPUDirect, multi-networking on."""
    version = result.master_version or ""
    minimum = meets_gpu_direct_minimum(profile, version) if version else None
    if minimum is not None:
        raise InputError(f"clusterName: GKE {version} of cluster {result.name} is older than GPUDirect-"
                         f"{profile.mode.upper()} needs ({minimum} or newer). Fix: upgrade the cluster to a newer minor "
                         "(GkeCluster's kubernetesVersion), or set pool.gpuDirect to none")
    if not result.enable_multi_networking:
        raise InputError(f"clusterName: cluster {result.name} has multi-networking off, and {machine_type} attaches "
                         f"{profile.gpu_nics} GPU NICs (GPUDirect-{profile.mode.upper()}). Fix: set the cluster's "
                         "multiNetworking to true, or set pool.gpuDirect to none")
    return True


def pool_checks(pool: GpuPoolConfig, project: str, cluster_name: pulumi.Input[str], location: pulumi.Input[str],
                node_zone: pulumi.Input[str], renames: Mapping[str, str],
                invoke: pulumi.InvokeOutputOptions, settings_known: bool = True) -> pulumi.Output[list]:
    """[] once every answer passed: the node pool depends on it. `renames` maps the stack's config paths to the
    part's inputs (gpuPools.<name>: pool, zone: nodeZone). `settings_known` False: nothing asked (see above)."""
    if not settings_known:
        return pulumi.Output.from_input([])
    machine = checked_as_inputs(checked_machine_type, {"project": "gcp:project"}, renames)
    checks = [gcp.compute.get_machine_types_output(
        project=project, zone=node_zone, filter=f"name = {pool.machine_type}", opts=invoke).apply(
        lambda result: machine(result, pool, result.zone))]
    if pool.gpu_direct is not None:
        checks.append(gcp.container.get_cluster_output(
            name=cluster_name, location=location, project=project, opts=invoke).apply(
            lambda result: checked_cluster(result, pool.gpu_direct, pool.machine_type)))
    return pulumi.Output.all(*checks).apply(lambda _: [])
