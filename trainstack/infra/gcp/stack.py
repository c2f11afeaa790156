"""GcpStack: the GKE GPU training platform of seeds 001 and 003, composed from typed components.

APIs -> network -> GKE cluster -> system pool + GPU pools (spot, scale to 0, managed driver)
node service account -> Artifact Registry -> training image
snapshot bucket -> job identity (Workload Identity, that bucket only)
[A3] GPU VPCs (one per GPU NIC) -> GPUDirect objects in the cluster (networks, NCCL plugin, injector)
[A3 Ultra, A4] RDMA VPC (RoCE profile, a subnet per NIC) + extra gVNIC VPC -> RDMA networks, gIB installer
Filestore + its PersistentVolume
all of them, as handles -> TrainingPlatform (namespace, claim, [Kueue], training job)
Every GCP resource uses one explicit Google provider, every Kubernetes object the cluster's provider.
GKE runs its own NVIDIA device plugin on GPU nodes, so the platform installs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from trainstack.infra import TrainingImage, TrainingImageArgs, tensorboard_image_args
from trainstack.infra.config import NAMESPACE
from trainstack.infra.core import versions
from trainstack.infra.core.contracts import ObjectStore
from trainstack.infra.core.release_chart import release_chart_path
from trainstack.infra.gcp import preflight
from trainstack.infra.gcp.artifact_registry import ArtifactRegistry, ArtifactRegistryArgs
from trainstack.infra.gcp.cluster import GkeCluster, GkeClusterArgs
from trainstack.infra.gcp.config import GcpStackConfig
from trainstack.infra.gcp.control_plane_firewall import (
    ControlPlaneFirewall,
    ControlPlaneFirewallArgs,
    control_plane_ports,
)
from trainstack.infra.gcp.cost import estimate_gcp_cost
from trainstack.infra.gcp.filestore_storage import FilestoreStorage, FilestoreStorageArgs
from trainstack.infra.gcp.gpu_direct import GpuDirect, GpuDirectArgs
from trainstack.infra.gcp.gpu_networks import GpuNetworks, GpuNetworksArgs, roce_network_profile
from trainstack.infra.gcp.identity import (
    JobIdentity,
    JobIdentityArgs,
    NodeServiceAccount,
    NodeServiceAccountArgs,
)
from trainstack.infra.gcp.job_commands import job_commands, nccl_check_command
from trainstack.infra.gcp.network import GkeNetwork, GkeNetworkArgs
from trainstack.infra.gcp.node_disk import gke_allocatable_ephemeral_storage
from trainstack.infra.gcp.node_pools import GpuNodePool, GpuNodePoolArgs, NodePoolArgs, SystemNodePool
from trainstack.infra.gcp.project_services import ProjectServices, ProjectServicesArgs
from trainstack.infra.gcp.snapshot_bucket import SnapshotBucket, SnapshotBucketArgs
from trainstack.infra.kubernetes.job_service_account import JOB_SERVICE_ACCOUNT
from trainstack.infra.kubernetes.platform import TrainingPlatform, TrainingPlatformArgs, shared_claim_name
from trainstack.infra.kubernetes.training_job import image_values


@dataclass(frozen=True, kw_only=True)
class GcpStackArgs:
    config: GcpStackConfig
    # The caller's provider (GcpStack given opts.providers): used instead of one made from the config; its
    # default labels are the caller's.
    provider: gcp.Provider | None = None
    # False when that provider's settings are other resources' outputs, not known at preview: the preflight asks
    # nothing then (preflight.gate).
    provider_settings_known: bool = True


class GcpStack(pulumi.ComponentResource):
    outputs: dict[str, pulumi.Input[Any]]  # the stack outputs, exported by __main__.py

    def __init__(self, name: str, args: GcpStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GcpStack", name, None, opts)
        cfg = args.config

        google = args.provider or gcp.Provider(f"{name}-gcp", project=cfg.project, region=cfg.region,
                                               default_labels=dict(cfg.labels),
                                               opts=pulumi.ResourceOptions(parent=self))
        # Nothing is created before the account confirms what only it knows (preflight.py).
        checks = preflight.gate(cfg, google, parent=self, settings_known=args.provider_settings_known)
        child = pulumi.ResourceOptions(parent=self, providers={"gcp": google}, depends_on=checks.ready)

        services = ProjectServices(f"{name}-apis", ProjectServicesArgs(
            project=cfg.project, services=versions.GCP_SERVICES), opts=child)
        # Everything else needs the APIs first; on destroy they stay enabled.
        after_apis = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=services.enabled))

        network = GkeNetwork(f"{name}-network", GkeNetworkArgs(region=cfg.region, config=cfg.network),
                             opts=after_apis)
        cluster = GkeCluster(f"{name}-gke", GkeClusterArgs(config=cfg, network=network, services=services.enabled,
                                                            control_plane_version=checks.control_plane_version),
                             opts=child)
        node_account = NodeServiceAccount(f"{name}-nodes", NodeServiceAccountArgs(
            project=cfg.project, cluster_name=cfg.cluster_name), opts=after_apis)
        pool_args = NodePoolArgs(cluster=cluster, service_account_email=node_account.email, labels=cfg.labels)
        system_pool = SystemNodePool(f"{name}-system", pool_args, cfg.system_pool, opts=child)

        # GPUDirect machines (A3, A3 Ultra, A4): their extra VPCs, once per networking mode, shared by the pools.
        gpu_networks = {
            profile.mode: GpuNetworks(f"{name}-{profile.mode}-networks", GpuNetworksArgs(
                region=cfg.region, name_prefix=f"{cfg.cluster_name}-{profile.mode}", gpu_nics=profile.gpu_nics,
                rdma_network_profile=roce_network_profile(cfg.project, cfg.zone) if profile.rdma else None,
                extra_gvnics=profile.extra_gvnics),
                opts=after_apis)
            for profile in {pool.gpu_direct.mode: pool.gpu_direct for pool in cfg.gpu_pools if pool.gpu_direct}.values()
        }
        gpu_pools = {}
        for pool in cfg.gpu_pools:
            networks = gpu_networks[pool.gpu_direct.mode] if pool.gpu_direct else None
            gpu_pools[pool.name] = GpuNodePool(f"{name}-gpu-{pool.name}", GpuNodePoolArgs(
                cluster=cluster, service_account_email=node_account.email, labels=cfg.labels, config=pool,
                # The extra gVNICs first, then the GPU NICs (cluster-toolkit's order).
                gpu_networks=[*zip(networks.gvnic_network_names, networks.gvnic_subnetwork_names, strict=True),
                              *zip(networks.network_names, networks.subnetwork_names, strict=True)]
                if networks else ()), opts=child)

        registry = ArtifactRegistry(f"{name}-registry", ArtifactRegistryArgs(
            project=cfg.project, region=cfg.region, repository_id=cfg.cluster_name,
            reader_member=node_account.member), opts=after_apis)
        image_args = TrainingImageArgs(
            repository_url=registry.repository_url,
            registry_server=registry.server,
            registry_username=registry.username,
            registry_password=registry.password,
            # Builds with the local Docker/BuildKit of whoever runs `pulumi up`.
            provider=docker_build.Provider(f"{name}-docker-build", opts=pulumi.ResourceOptions(parent=self)),
        )
        image = TrainingImage(f"{name}-image", image_args, opts=child)
        job_values: dict[str, Any] = {}
        if cfg.job.tensorboard:
            tensorboard_image = TrainingImage(f"{name}-tensorboard-image", tensorboard_image_args(image_args),
                                              opts=child)
            job_values["tensorboard"] = {"image": tensorboard_image.ref.apply(image_values)}

        bucket = SnapshotBucket(f"{name}-snapshots", SnapshotBucketArgs(
            project=cfg.project, region=cfg.region, delete_on_destroy=cfg.delete_bucket_on_destroy), opts=after_apis)
        # Trusts the one Kubernetes ServiceAccount every job runs as, the stack's own and the CLI's alike.
        job_identity = JobIdentity(f"{name}-job", JobIdentityArgs(
            project=cfg.project, cluster_name=cfg.cluster_name, namespace=cfg.job.namespace,
            service_account=JOB_SERVICE_ACCOUNT, previous_service_account=cfg.job.name,
            bucket_name=bucket.bucket_name, cluster=cluster.cluster), opts=child)

        storage = None
        if cfg.filestore is not None:
            storage = FilestoreStorage(f"{name}-filestore", FilestoreStorageArgs(
                project=cfg.project, config=cfg.filestore, cluster=cluster, network=network,
                claim_namespace=cfg.job.namespace, claim_name=shared_claim_name(cfg.job),
                protect=cfg.protect_shared_filesystem), opts=after_apis)

        # The private control plane must reach the webhooks of what the platform installs (Kueue) first.
        installed_charts = [release_chart_path()] + ([versions.KUEUE_CHART.chart]
                                                                          if cfg.job.queue else [])
        job_ready: list[pulumi.Resource] = [system_pool.pool]
        if control_plane_ports(installed_charts):
            job_ready.append(ControlPlaneFirewall(f"{name}-control-plane-calls", ControlPlaneFirewallArgs(
                network_name=network.network_name, master_cidr=cfg.network.master_cidr, charts=installed_charts,
                node_service_account=node_account.email),
                opts=after_apis))

        job_pool = cfg.job_pool
        if job_pool.gpu_direct is not None:
            profile = job_pool.gpu_direct
            networks = gpu_networks[profile.mode]
            gpu_direct = GpuDirect(f"{name}-{profile.mode}", GpuDirectArgs(
                provider=cluster.provider, profile=profile, accelerator=job_pool.accelerator_type,
                vpc_names=networks.network_names, subnet_names=networks.subnetwork_names,
                gvnic_vpc_names=networks.gvnic_network_names, gvnic_subnet_names=networks.gvnic_subnetwork_names),
                opts=child)
            job_values["gpuNetworking"] = {"mode": profile.mode, profile.mode: {
                "networks": gpu_direct.network_names, **({"ncclEnv": dict(profile.nccl_env)} if profile.nccl_env else {})}}
            job_ready.extend(gpu_direct.ready)

        platform = TrainingPlatform(name, TrainingPlatformArgs(
            provider=cluster.provider,
            job=cfg.job,
            gpu=gpu_pools[cfg.job_pool.name].placement,
            gpu_pool_name=cfg.job_pool.name,
            storage=storage.shared_storage if storage is not None else None,
            bucket=ObjectStore(uri=bucket.uri, name=bucket.bucket_name),
            identity=job_identity.identity,
            image_ref=image.ref,
            install_device_plugin=False,  # GKE's own runs on every GPU node
            job_values=job_values,
            other_gpu_pools={pool: gpu_pools[pool].placement for pool in gpu_pools if pool != cfg.job_pool.name},
            # A GPUDirect pool's queue counts the RxDM sidecar its jobs get (the mode is all the quota needs).
            other_pool_values={pool.name: {"gpuNetworking": {"mode": pool.gpu_direct.mode}}
                               for pool in cfg.gpu_pools if pool.gpu_direct and pool.name != cfg.job_pool.name},
            gpu_local_disk=gke_allocatable_ephemeral_storage(cfg.job_pool.disk_size_gb, cfg.job_pool.local_ssd_count),
        ), opts=pulumi.ResourceOptions(parent=self, depends_on=job_ready))

        self.outputs = {
            "clusterName": cluster.cluster_name,
            "kubeconfig": cluster.kubeconfig_json,
            "registryUrl": registry.repository_url,
            "imageRef": image.ref,
            "bucketName": bucket.bucket_name,
            "jobServiceAccount": job_identity.email,
            **job_commands(project=cfg.project, location=cfg.location, cluster_name=cfg.cluster_name, job=cfg.job,
                           bucket_name=bucket.bucket_name),
            **platform.outputs,
            **estimate_gcp_cost(cfg).outputs(),  # estimatedHourlyUsd, estimatedRunUsd
        }
        if storage is not None:
            self.outputs["filestoreInstance"] = storage.instance_name
        if job_pool.gpu_direct is not None:
            check = {"machine_type": job_pool.machine_type, "namespace": cfg.job.namespace, "job": cfg.job,
                     "min_bus_bandwidth_gbps": job_pool.gpu_direct.nccl_min_bus_bandwidth_gbps,
                     "image_ref": image.ref, "claim_name": platform.claim_name,
                     "service_account": platform.service_account_name, "owner_uid": platform.owner_uid}
            # The all-reduce in the training image; nccl-tests' all_gather_perf stays available where the
            # plugin image carries it (TCPX/TCPXO; the gIB installer image does not).
            self.outputs["ncclCheckCommand"] = nccl_check_command(**check)
            if not job_pool.gpu_direct.rdma:
                self.outputs["ncclTestsCommand"] = nccl_check_command(**check, runner="nccl-tests")
        if not cfg.job.enabled:
            self.outputs["enableJobCommand"] = f"pulumi config set --path {NAMESPACE}:job.enabled true && pulumi up"
        self.register_outputs(self.outputs)
