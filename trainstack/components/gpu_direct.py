"""GPUDirect networking on GKE A3 nodes, hosted in its two halves (trainstack.infra.gcp.gpu_networks, trainstack.infra.gcp.gpu_direct).

GpuDirectNetworks makes the extra VPCs (one per GPU NIC) a GPU node pool attaches to; GpuDirect makes the
in-cluster half on a cluster given by kubeconfig (GKE Network objects, the NCCL plugin installer, the NRI
device injector). The VPCs' names are outputs of the first and inputs of the second.
"""

import dataclasses
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.cluster_access import check_cluster_access, cluster_provider, stand_in_provider
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.stack_config import InputError
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.core import validation
from trainstack.infra.gcp.gpu_direct import GpuDirect as InfraGpuDirect
from trainstack.infra.gcp.gpu_direct import GpuDirectArgs as InfraGpuDirectArgs
from trainstack.infra.gcp.gpu_networks import GpuNetworks as InfraGpuNetworks
from trainstack.infra.gcp.gpu_networks import GpuNetworksArgs as InfraGpuNetworksArgs
from trainstack.infra.gcp.machine_types import FIXED_GPU_MACHINES, GPU_DIRECT, GpuDirectProfile


def gpu_direct_profile(component: str, machine_type: str) -> GpuDirectProfile:
    """The machine type's GPUDirect networking (TCPX on a3-highgpu-8g, TCPXO on a3-megagpu-8g).

    RDMA machines (a3-ultragpu-8g, a4-highgpu-8g) need the RoCE VPC and gVNIC networks these parts do not
    build; the GKE stack (Pulumi.gcp-a4.yaml) does."""
    profile = GPU_DIRECT.get(machine_type)
    if profile is None or profile.rdma:
        machines = ", ".join(f"{m} ({p.mode})" for m, p in GPU_DIRECT.items() if not p.rdma)
        validation.fail(component, f"machine_type {machine_type!r} has no GPUDirect NICs; use one of {machines}")
    return profile


def per_network(names: pulumi.Input[list[str]], gpu_nics: int) -> list[pulumi.Input[str]]:
    """One input per GPU NIC, from a list that may be another component's output as a whole."""
    if isinstance(names, list):
        return names
    return [pulumi.Output.from_input(names).apply(lambda values, i=i: values[i]) for i in range(gpu_nics)]


@dataclass(kw_only=True)
class GpuDirectNetworksArgs:
    """The extra VPCs of a GPUDirect machine type, one per GPU NIC."""

    project: str | None = None
    """The Google Cloud project (default: the given gcp provider's; needed when no gcp provider is given)."""
    region: str | None = None
    """The region of the GPU node pool (default: the given gcp provider's)."""
    machine_type: str
    """a3-highgpu-8g (TCPX, 4 networks) or a3-megagpu-8g (TCPXO, 8 networks)."""
    name_prefix: str
    """Prefix of the VPCs' names, e.g. the cluster's name and the mode (GCE network names are per project)."""
    labels: dict[str, str] | None = None
    """Default labels of the Google provider these resources are created with."""


class GpuDirectNetworks(pulumi.ComponentResource):
    """The VPCs a GPUDirect (A3) node pool attaches its GPU NICs to: one subnet each, MTU 8244, internal traffic
    only."""

    network_names: pulumi.Output[list[str]]
    """The VPCs, in NIC order (a node pool's additional networks; GpuDirect's vpcNames)."""
    subnetwork_names: pulumi.Output[list[str]]
    """Their subnets, in the same order (GpuDirect's subnetNames)."""

    def __init__(self, name: str, args: GpuDirectNetworksArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = args_from_inputs(GpuDirectNetworksArgs, args)
        profile = gpu_direct_profile(f"GpuDirectNetworks {name!r}", args.machine_type)
        given, project, region, _ = gcp_settings(opts, args.project, args.region, args.labels)
        if region is None:
            raise InputError("region: not set, and the given gcp provider has no region. Fix: set the input region")
        super().__init__(token("GpuDirectNetworks"), name, None, moved_from_index("GpuDirectNetworks", opts))
        google = given or gcp.Provider(f"{name}-gcp", project=project, region=region,
                              default_labels=dict(args.labels or {}), opts=pulumi.ResourceOptions(parent=self))
        networks = InfraGpuNetworks(name, InfraGpuNetworksArgs(
            region=region, name_prefix=args.name_prefix, gpu_nics=profile.gpu_nics),
            opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}))
        self.network_names = pulumi.Output.all(*networks.network_names)
        self.subnetwork_names = pulumi.Output.all(*networks.subnetwork_names)
        self.register_outputs({"networkNames": self.network_names, "subnetworkNames": self.subnetwork_names})


@dataclass(kw_only=True)
class GpuDirectArgs:
    """The in-cluster half of GPUDirect on a GKE cluster given by kubeconfig."""

    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text); every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    machine_type: str
    """The GPU pool's machine type: a3-highgpu-8g (TCPX) or a3-megagpu-8g (TCPXO)."""
    vpc_names: pulumi.Input[list[str]]
    """The GPU VPCs in NIC order (GpuDirectNetworks' networkNames, as a whole)."""
    subnet_names: pulumi.Input[list[str]]
    """Their subnets in the same order (GpuDirectNetworks' subnetworkNames)."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes."""
    accelerator: str | None = None
    """The pool's accelerator label (default: the machine type's, e.g. nvidia-h100-80gb)."""


class GpuDirect(pulumi.ComponentResource):
    """GKE multi-networking objects for the GPU NICs, the NCCL plugin installer and the NRI device injector (the
    training-job chart's gpuNetworking uses them)."""

    network_names: pulumi.Output[list[str]]
    """The GKE Network objects, for the chart's gpuNetworking.<mode>.networks."""
    mode: pulumi.Output[str]
    """tcpx or tcpxo: the chart's gpuNetworking.mode."""

    def __init__(self, name: str, args: GpuDirectArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = args_from_inputs(GpuDirectArgs, args)
        component = f"GpuDirect {name!r}"
        profile = gpu_direct_profile(component, args.machine_type)
        names = {}
        for field in ("vpc_names", "subnet_names"):
            value = getattr(args, field)
            if isinstance(value, list) and len(value) != profile.gpu_nics:  # known now: checked now
                validation.fail(component, f"{field} must list one name per GPU NIC of {args.machine_type} "
                                f"({profile.gpu_nics}), got {len(value)}")
            names[field] = per_network(value, profile.gpu_nics)
        accelerator = args.accelerator or FIXED_GPU_MACHINES[args.machine_type].accelerator
        direct_args = InfraGpuDirectArgs(provider=stand_in_provider(), profile=profile, accelerator=accelerator,
                                         **names)
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("GpuDirect"), name, None, moved_from_index("GpuDirect", opts))
        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        direct = InfraGpuDirect(name, dataclasses.replace(direct_args, provider=provider),
                                opts=pulumi.ResourceOptions(parent=self))
        self.network_names = pulumi.Output.from_input(direct.network_names)
        self.mode = pulumi.Output.from_input(profile.mode)
        self.register_outputs({"networkNames": self.network_names, "mode": self.mode})
