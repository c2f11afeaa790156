"""GcpStack, hosted: the whole GKE training stack from typed Args (the keys of `Pulumi.gcp.yaml`).

A façade over trainstack.infra.gcp.GcpStack. Its Args are the stack file's settings, typed; they become stack config
again and go through parse_gcp_config and the budget check exactly as `pulumi up` of this repository's
program does, so the same settings build the same resources (tests/library/test_facades.py compares the
graphs), as children of the infra component.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

import pulumi

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.job_args import Job
from trainstack.components.part_config import checkable_id
from trainstack.components.stack_config import FROM_ROOT, checked_stack_config, publish_stack_outputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.gcp import GcpStack as InfraGcpStack
from trainstack.infra.gcp import GcpStackArgs as InfraGcpStackArgs
from trainstack.infra.gcp import GcpStackConfig, parse_gcp_config
from trainstack.infra.gcp.cost import estimate_gcp_cost

# Settings that configure the Google provider rather than trainstack (gcp:project, gcp:region).
PROVIDER_KEYS = {"project": "gcp:project", "region": "gcp:region"}


@dataclass(kw_only=True)
class GkeNetwork:
    """The VPC the stack creates: the subnet and its secondary ranges."""

    subnet_cidr: str | None = None
    """The nodes' subnet (default 10.10.0.0/20)."""
    pods_cidr: str | None = None
    """The pods' secondary range (default 10.16.0.0/14)."""
    services_cidr: str | None = None
    """The services' secondary range (default 10.20.0.0/20)."""
    master_cidr: str | None = None
    """The control plane's private /28 (default 172.16.0.32/28)."""


@dataclass(kw_only=True)
class GcpExistingNetwork:
    """A VPC and subnet to use instead of creating them; the subnet must have both secondary ranges."""

    network: pulumi.Input[str]
    """The VPC's name or self link (your own gcp.compute.Network's name may go here)."""
    subnetwork: pulumi.Input[str]
    """The subnet's name or self link."""
    pods_range_name: str
    """The subnet's secondary range for pods."""
    services_range_name: str
    """The subnet's secondary range for services."""


@dataclass(kw_only=True)
class GkeSystemNodes:
    """The CPU node pool for system pods (Kueue, TensorBoard, DNS)."""

    machine_type: str | None = None
    """A general-purpose x86 machine type (default e2-standard-4)."""
    min: int | None = None
    """Nodes at least (default 1)."""
    max: int | None = None
    """Nodes at most (default 3)."""
    disk_size_gb: int | None = None
    """Boot disk size in GB (default 50)."""


@dataclass(kw_only=True)
class GkeGpuPool:
    """A GPU node pool: spot or on-demand, scaling to zero, GKE-managed driver."""

    machine_type: str | None = None
    """e.g. n1-standard-4 (T4s attached), g2-standard-8, a3-highgpu-8g (default n1-standard-4)."""
    accelerator_type: str | None = None
    """e.g. nvidia-tesla-t4; fixed by the machine type on A2/A3/G2 (the stack file's key; the platform's gpu.accelerator)."""
    accelerator_count: int | None = None
    """GPUs per node; fixed by the machine type on A2/A3/G2 (the stack file's key; the platform's gpu.gpusPerNode)."""
    disk_size_gb: int | None = None
    """Boot disk size in GB (default 100)."""
    disk_type: str | None = None
    """pd-ssd, pd-balanced, pd-standard or hyperdisk-balanced (default pd-ssd; A4, A3 Ultra: hyperdisk only)."""
    min: int | None = None
    """Nodes at least (default 0: no job, no GPU nodes)."""
    max: int | None = None
    """Nodes at most (default 2)."""
    capacity: str | None = None
    """SPOT, ON_DEMAND, RESERVATION or FLEX_START (default SPOT)."""
    reservation: str | None = None
    """The reservation's name, with capacity RESERVATION."""
    placement: str | None = None
    """COMPACT or ANY (default COMPACT with GPUDirect, else ANY)."""
    local_ssd_count: int | None = None
    """Local NVMe SSDs as the node's ephemeral storage (the data cache)."""
    gpu_direct: str | None = None
    """auto, tcpx, tcpxo, rdma or none: GPUDirect networking on A3, A3 Ultra and A4 (default auto)."""
    driver_version: str | None = None
    """The GKE-managed NVIDIA driver: DEFAULT or LATEST."""
    topology_aware: bool | None = None
    """Kueue places multi-node jobs by GKE's gce-topology labels (default on A4, A3 Ultra with capacity RESERVATION; needs GPUDirect)."""


@dataclass(kw_only=True)
class Filestore:
    """The Filestore share the job's pods share."""

    enabled: bool | None = None
    """Create it (default true; a job needs it)."""
    tier: str | None = None
    """BASIC_HDD, BASIC_SSD, ZONAL, REGIONAL or ENTERPRISE (default BASIC_HDD)."""
    capacity_gb: int | None = None
    """Size in GiB, within the tier's range (default: the tier's smallest)."""


@dataclass(kw_only=True)
class GcpStackArgs:
    """The GKE stack's settings: the keys of Pulumi.gcp.yaml (trainstack:* and gcp:project, gcp:region)."""

    project: str | None = None
    """The Google Cloud project that holds the cluster and pays for it (gcp:project; default: the given gcp provider's, needed when no gcp provider is given)."""
    region: str | None = None
    """The region (gcp:region; default: the given gcp provider's, else us-central1)."""
    zone: str | None = None
    """The zone of the nodes (default us-central1-a in us-central1; other regions must name theirs)."""
    regional: bool | None = None
    """Replicate the control plane across the region's zones (default false)."""
    cluster_name: str | None = None
    """The GKE cluster's name (default trainstack-<stack>)."""
    release_channel: str | None = None
    """REGULAR, STABLE or RAPID (default REGULAR)."""
    kubernetes_version: str | None = None
    """The minimum minor version, e.g. 1.34; the newest patch GKE offers is used."""
    network: GkeNetwork | None = None
    """The VPC the stack creates."""
    existing_network: GcpExistingNetwork | None = None
    """A VPC and subnet to use instead of creating one."""
    api_authorized_networks: list[str] | None = None
    """CIDR blocks that may reach the cluster's endpoint (default: any, still authenticated by IAM)."""
    system_nodes: GkeSystemNodes | None = None
    """The CPU node pool."""
    gpu_pools: dict[str, GkeGpuPool] | None = None
    """GPU node pools by name (default one pool t4)."""
    job_pool: str | None = None
    """The GPU pool the job runs on (default: the only pool)."""
    job: Job | None = None
    """The training job."""
    shared_filesystem: Filestore | None = None
    """The Filestore share."""
    max_hourly_usd: float | None = None
    """Refuse to deploy when the estimate at the pools' maximum exceeds this many USD an hour."""
    max_run_usd: float | None = None
    """Refuse to deploy when the job's estimated run exceeds this many USD."""
    delete_bucket_on_destroy: bool | None = None
    """Delete the snapshot bucket and its contents on destroy (default false)."""
    protect_shared_filesystem: bool | None = None
    """Refuse to destroy the Filestore share, which holds the runs (default true)."""
    labels: dict[str, str] | None = None
    """Extra labels on every resource (plus app and pulumi-stack)."""


class GcpStack(pulumi.ComponentResource):
    """The GKE GPU training stack: network, cluster, GPU pools, [GPUDirect], Filestore, bucket, registry, image, identity and the training platform."""

    cluster_name: pulumi.Output[str]
    """The GKE cluster's name."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret; tokens from gke-gcloud-auth-plugin)."""
    image_ref: pulumi.Output[str]
    """The training image by digest."""
    bucket_name: pulumi.Output[str]
    """The snapshot bucket: data set, checkpoints and exports."""
    stack_outputs: pulumi.Output[dict[str, Any]]
    """Every output this repository's gcp stack exports, by the same camelCase names, except the kubeconfig (its own output)."""

    def __init__(self, name: str, args: GcpStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # The stack file's program (__main__.py) hands over the config it parsed and checked, in the stack
        # file's terms; its infra stack sat at the stack's root before this façade existed (FROM_ROOT).
        from_stack_file = isinstance(args, GcpStackConfig)
        if from_stack_file:
            given, config = None, args
        else:
            args = args_from_inputs(GcpStackArgs, args)
            given, project, region = gcp_settings(opts, args.project, args.region, args.labels)
            config = checked_config(name, dataclasses.replace(args, project=project, region=region))
        super().__init__(token("GcpStack"), name, None, moved_from_index("GcpStack", opts))

        stack = InfraGcpStack(name, InfraGcpStackArgs(config=config, provider=given), opts=pulumi.ResourceOptions(
            parent=self, aliases=FROM_ROOT if from_stack_file else None))
        self.outputs = stack.outputs  # Python: the stack file's exports, kubeconfig included
        publish_stack_outputs(self, stack.outputs)


def checked_config(name: str, args: GcpStackArgs) -> GcpStackConfig:
    """`args` through the stack's parser and budget check, in the caller's terms. Names that are outputs (your
    own Network and Subnetwork) are checked by GCP: the parser sees stand-ins, the stack gets the names."""
    existing = args.existing_network
    checkable = dataclasses.replace(args, existing_network=existing and dataclasses.replace(
        existing, network=checkable_id(existing.network, "network"),
        subnetwork=checkable_id(existing.subnetwork, "subnetwork")))
    config = checked_stack_config(f"GcpStack {name!r}", checkable, PROVIDER_KEYS, parse_gcp_config, estimate_gcp_cost)
    if existing is None:
        return config
    return dataclasses.replace(config, network=dataclasses.replace(config.network, existing=dataclasses.replace(
        config.network.existing, network=existing.network, subnetwork=existing.subnetwork)))
