"""AwsStack: the whole EKS spot-GPU training platform of the seed, composed from typed components.

network -> EKS cluster (system + spot GPU node groups, access entries, control-plane logs)
        -> cluster autoscaler (IRSA; grows the GPU group from 0 for pending pods, back to 0 after)
        -> EFS storage (CSI add-on with IRSA, file system, a mount target per zone, access point + volume)
registry -> training image + TensorBoard image;  snapshot bucket -> job IRSA role
all of them, as handles -> TrainingPlatform (namespace, claim, NVIDIA device plugin, training job)
Every AWS resource uses one explicit AWS provider, every Kubernetes object the cluster's provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from trainstack.infra import TrainingImage, TrainingImageArgs, tensorboard_image_args
from trainstack.infra.aws import preflight
from trainstack.infra.aws.capacity_block import capacity_block_outputs
from trainstack.infra.aws.cluster import EksCluster, EksClusterArgs
from trainstack.infra.aws.cluster_autoscaler import NAMESPACE as AUTOSCALER_NAMESPACE
from trainstack.infra.aws.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from trainstack.infra.aws.config import AwsStackConfig
from trainstack.infra.aws.cost import estimate_aws_cost
from trainstack.infra.aws.efa import NCCL_MIN_BUS_BANDWIDTH_GBPS
from trainstack.infra.aws.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from trainstack.infra.aws.efs_storage import EfsStorage, EfsStorageArgs
from trainstack.infra.aws.irsa import IrsaRole, IrsaRoleArgs
from trainstack.infra.aws.job_commands import job_commands
from trainstack.infra.aws.network import Network, NetworkArgs
from trainstack.infra.aws.registry import Registry, RegistryArgs
from trainstack.infra.aws.snapshot_bucket import SnapshotBucket, SnapshotBucketArgs
from trainstack.infra.aws.topology import provisioning_kueue_values, serves_provisioning_requests
from trainstack.infra.config import NAMESPACE
from trainstack.infra.core.contracts import ObjectStore, WorkloadIdentity
from trainstack.infra.kubernetes.job_service_account import JOB_SERVICE_ACCOUNT
from trainstack.infra.kubernetes.kueue import KUEUE_NAMESPACE
from trainstack.infra.kubernetes.nccl_check_command import nccl_check_command
from trainstack.infra.kubernetes.nvidia_device_plugin import DEFAULT_NAMESPACE as DEVICE_PLUGIN_NAMESPACE
from trainstack.infra.kubernetes.platform import TrainingPlatform, TrainingPlatformArgs, shared_claim_name
from trainstack.infra.kubernetes.training_job import chart_default_values, image_values


def release_namespaces(cfg: AwsStackConfig) -> list[str]:
    """Where this stack's Helm releases may keep their state (Secrets): what a preview must be able to read.

    Every namespace a release of this stack can use, whatever the config turns on: the access scope is
    immutable (terraform-provider-aws internal/service/eks/access_policy_association.go: access_scope
    ForceNew), and a replacement of an association keyed by the same cluster, principal and policy
    creates the new one, then deletes it as the old one. A stable scope is never replaced; reading a
    namespace's Secrets where no release runs grants nothing.
    """
    return [cfg.job.namespace, DEVICE_PLUGIN_NAMESPACE, AUTOSCALER_NAMESPACE, KUEUE_NAMESPACE]



def eks_cluster_args(cfg: AwsStackConfig, *, vpc_id: pulumi.Input[str], public_subnet_ids: Sequence[pulumi.Input[str]],
                     private_subnet_ids: Sequence[pulumi.Input[str]], tags: Mapping[str, str],
                     efa_subnet_id: pulumi.Input[str] | None = None,
                     kubeconfig_role_arn: pulumi.Input[str] | None = None) -> EksClusterArgs:
    """The cluster's Args from the parsed config, on the network given: the stack's and the hosted part's one recipe."""
    return EksClusterArgs(
        cluster_name=cfg.cluster_name,
        kubernetes_version=cfg.kubernetes_version,
        vpc_id=vpc_id,
        public_subnet_ids=public_subnet_ids,
        private_subnet_ids=private_subnet_ids,
        system_nodes=cfg.system_nodes,
        gpu_nodes=cfg.gpu_nodes,
        api_endpoint=cfg.api_endpoint,
        cluster_admin_arns=cfg.cluster_admin_arns,
        preview_role_arn=cfg.preview_role_arn,
        preview_secret_namespaces=release_namespaces(cfg),
        control_plane_logs=cfg.control_plane_logs,
        autoscaled=cfg.cluster_autoscaler,
        aws_profile=cfg.aws_profile,
        kubeconfig_role_arn=kubeconfig_role_arn,
        tags=tags,
        efa_subnet_id=efa_subnet_id,
    )


@dataclass(frozen=True, kw_only=True)
class AwsStackArgs:
    config: AwsStackConfig
    # The caller's provider (AwsStack given opts.providers): used instead of one made from cfg.region/aws_profile.
    provider: aws.Provider | None = None
    # False for a caller's provider whose settings are not known yet (preview): the account checks wait for up.
    provider_settings_known: bool = True
    # The IAM role the kubeconfig (and the cluster's Kubernetes provider) assumes: the caller's assume-role ARN.
    kubeconfig_role_arn: pulumi.Input[str] | None = None


class AwsStack(pulumi.ComponentResource):
    outputs: dict[str, pulumi.Input[Any]]  # the stack outputs, exported by __main__.py

    def __init__(self, name: str, args: AwsStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:AwsStack", name, None, opts)
        cfg = args.config
        tags = {"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **cfg.tags}

        aws_provider = args.provider or aws.Provider(f"{name}-aws", region=cfg.region, profile=cfg.aws_profile,
                                                     opts=pulumi.ResourceOptions(parent=self))
        # Nothing is created before the account confirms what only it knows (preflight.py).
        child = pulumi.ResourceOptions(parent=self, providers={"aws": aws_provider},
                                       depends_on=preflight.gate(
            cfg, aws_provider, parent=self, settings_known=args.provider_settings_known))

        network = Network(f"{name}-network", NetworkArgs(
            region=cfg.region,
            availability_zones=cfg.network.availability_zones,
            vpc_cidr=cfg.network.vpc_cidr,
            nat_gateway_per_zone=cfg.network.nat_gateway_per_zone,
            existing=cfg.network.existing,
            tags=tags,
        ), opts=child)
        cluster = EksCluster(f"{name}-eks", eks_cluster_args(
            cfg, vpc_id=network.vpc_id, public_subnet_ids=network.public_subnet_ids,
            private_subnet_ids=network.private_subnet_ids, tags=tags,
            efa_subnet_id=network.mount_subnet_ids[cfg.gpu_nodes.efa.zone] if cfg.gpu_nodes.efa else None,
            kubeconfig_role_arn=args.kubeconfig_role_arn,
        ), opts=child)
        # Kueue asks the autoscaler for a topology pool's nodes by ProvisioningRequest (topology.py).
        provisioning = serves_provisioning_requests(cluster.gpu_placement.topology, autoscaler=cfg.cluster_autoscaler,
                                                    queued=cfg.job.queue)
        provisioning_api: list[pulumi.Resource] = []
        if cfg.cluster_autoscaler:
            autoscaler = ClusterAutoscaler(f"{name}-autoscaler", ClusterAutoscalerArgs(
                cluster=cluster, region=cfg.region, tags=tags, provisioning_requests=provisioning), opts=child)
            provisioning_api = autoscaler.provisioning_request_api
        storage = EfsStorage(f"{name}-efs", EfsStorageArgs(
            cluster=cluster, network=network, claim_namespace=cfg.job.namespace,
            claim_name=shared_claim_name(cfg.job), protect=cfg.protect_shared_filesystem, tags=tags), opts=child)

        registry = Registry(f"{name}-registry", RegistryArgs(tags=tags), opts=child)
        # Builds with the local Docker/BuildKit of whoever runs `pulumi up`.
        builder = docker_build.Provider(f"{name}-docker-build", opts=pulumi.ResourceOptions(parent=self))
        push = {"repository_url": registry.repository_url, "registry_server": registry.server,
                "registry_username": registry.username, "registry_password": registry.password, "provider": builder}
        # An EFA stack's image carries libfabric and aws-ofi-nccl (images/Dockerfile's efa-installer stage),
        # at the installer version the chart records next to its NCCL pairing.
        efa_build = ({"EFA_INSTALLER_VERSION": chart_default_values()["gpuNetworking"]["efa"]["efaInstaller"]}
                     if cfg.gpu_nodes.efa is not None else {})
        image_args = TrainingImageArgs(**push, build_args=efa_build)
        image = TrainingImage(f"{name}-image", image_args, opts=child)
        job_values = {}
        if cfg.job.tensorboard:
            tensorboard_image = TrainingImage(f"{name}-tensorboard-image", tensorboard_image_args(image_args),
                                              opts=child)
            job_values = {"tensorboard": {"image": tensorboard_image.ref.apply(image_values)}}

        bucket = SnapshotBucket(f"{name}-snapshots", SnapshotBucketArgs(
            delete_on_destroy=cfg.delete_bucket_on_destroy, tags=tags), opts=child)
        # Trusts the one ServiceAccount every job runs as, the stack's own and the CLI's alike.
        job_role = IrsaRole(f"{name}-job", IrsaRoleArgs(
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            namespace=cfg.job.namespace,
            service_account=JOB_SERVICE_ACCOUNT,
            # The stack job's own account before every job shared one (trainstack/infra/kubernetes/job_service_account.py):
            # jobs started then keep their bucket access through the upgrade. It grants nothing new:
            # whoever can run a pod in the namespace can already run it as JOB_SERVICE_ACCOUNT.
            also_trusted=[cfg.job.name],
            inline_policy=bucket.read_write_policy,
            tags=tags,
        ), opts=child)

        # Kueue enables its provisioning controller only if the ProvisioningRequest API is served when it
        # starts: the platform (Kueue with it) waits for the CRD, and on destroy goes before it.
        job_ready: list[pulumi.Resource] = [cluster.system_node_group, *provisioning_api]
        efa = cfg.gpu_nodes.efa
        if efa is not None:
            job_ready.append(EfaDevicePlugin(f"{name}-efa-device-plugin", EfaDevicePluginArgs(
                provider=cluster.provider, tolerations=cluster.gpu_placement.tolerations,
                node_selector=cluster.gpu_placement.node_selector), opts=pulumi.ResourceOptions(parent=self)))
            # The chart's efa mode: every EFA of the node for the one pod there, and GPUDirect RDMA
            # where the type has it (trainstack/infra/aws/efa.py). Kueue's quota counts the EFAs from these values.
            job_values["gpuNetworking"] = {"mode": "efa", "efa": {
                "interfaces": efa.instance.efa_interfaces,
                "ncclEnv": {"FI_EFA_USE_DEVICE_RDMA": "1" if efa.instance.gpudirect_rdma else "0"}}}

        platform = TrainingPlatform(name, TrainingPlatformArgs(
            provider=cluster.provider,
            job=cfg.job,
            gpu=cluster.gpu_placement,
            storage=storage.shared_storage,
            bucket=ObjectStore(uri=pulumi.Output.concat("s3://", bucket.bucket_name), name=bucket.bucket_name),
            identity=WorkloadIdentity(service_account_annotations={"eks.amazonaws.com/role-arn": job_role.role_arn}),
            image_ref=image.ref,
            install_device_plugin=True,
            job_values=job_values,
            gpu_local_disk=cluster.gpu_local_disk,
            kueue_values=provisioning_kueue_values() if provisioning else {},
        # Kueue's controller (and its webhook) runs on the system nodes: the platform waits for them, as on GKE.
        ), opts=pulumi.ResourceOptions(parent=self, depends_on=job_ready))

        self.outputs = {
            "clusterName": cluster.cluster_name,
            "kubeconfig": cluster.kubeconfig_json,
            "registryUrl": registry.repository_url,
            "imageRef": image.ref,
            "bucketName": bucket.bucket_name,
            **job_commands(region=cfg.region, cluster_name=cfg.cluster_name, aws_profile=cfg.aws_profile,
                           job=cfg.job, bucket_name=bucket.bucket_name),
            **platform.outputs,
            **estimate_aws_cost(cfg).outputs(),  # estimatedHourlyUsd, estimatedRunUsd
            **capacity_block_outputs(cfg, aws_provider, self),  # capacityBlockEndDate
        }
        if efa is not None:
            # `eval "$(pulumi stack output ncclCheckCommand)"`: the all-reduce in the training image
            # across two EFA nodes, failing below the bar (the chart's profiles/eks-efa.yaml).
            self.outputs["ncclCheckCommand"] = nccl_check_command(
                machine_profile="eks-efa.yaml", namespace=cfg.job.namespace,
                min_bus_bandwidth_gbps=NCCL_MIN_BUS_BANDWIDTH_GBPS, job=cfg.job, image_ref=image.ref,
                claim_name=platform.claim_name, service_account=platform.service_account_name,
                owner_uid=platform.owner_uid,
                extra_sets=[f"--set gpuNetworking.efa.interfaces={efa.instance.efa_interfaces}",
                            "--set-string gpuNetworking.efa.ncclEnv.FI_EFA_USE_DEVICE_RDMA="
                            f"{1 if efa.instance.gpudirect_rdma else 0}"])
        if not cfg.job.enabled:
            self.outputs["enableJobCommand"] = f"pulumi config set --path {NAMESPACE}:job.enabled true && pulumi up"
        self.register_outputs(self.outputs)
