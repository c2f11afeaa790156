"""AwsStack: the whole EKS spot-GPU training platform of the seed, composed from typed components.

network -> EKS cluster (system + spot GPU node groups) -> NVIDIA device plugin
        -> EFS storage (CSI add-on with IRSA, file system, mount targets, StorageClass, PVC)
registry -> training image;  snapshot bucket -> job IRSA role
image + PVC + role + device plugin -> training job
Every AWS resource uses one explicit AWS provider, every Kubernetes object the cluster's provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build
import pulumi_kubernetes as k8s

from infra import (
    NvidiaDevicePlugin,
    NvidiaDevicePluginArgs,
    TrainingImage,
    TrainingImageArgs,
    TrainingJob,
    TrainingJobArgs,
)
from infra.aws.cluster import GPU_NODE_LABELS, GPU_TOLERATIONS, EksCluster, EksClusterArgs
from infra.aws.config import NAMESPACE, AwsStackConfig
from infra.aws.efs_storage import EfsStorage, EfsStorageArgs
from infra.aws.irsa import IrsaRole, IrsaRoleArgs
from infra.aws.job_commands import job_commands
from infra.aws.network import Network, NetworkArgs
from infra.aws.registry import Registry, RegistryArgs
from infra.aws.snapshot_bucket import SnapshotBucket, SnapshotBucketArgs
from infra.training_job import chart_default_values


@dataclass(frozen=True)
class AwsStackArgs:
    config: AwsStackConfig


def job_storage_values(cfg: AwsStackConfig, bucket_name: pulumi.Input[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(train, extra_values): the prepared data set is copied from the snapshot bucket to the node-local
    cache before torchrun starts, unless trainstack:job.train.data points elsewhere."""
    cache_mount = chart_default_values()["storage"]["cache"]["mountPath"]
    train = {"data": cache_mount, **cfg.job.train}
    if train["data"] != cache_mount:
        return train, {}
    source = pulumi.Output.concat("s3://", bucket_name, f"/{cfg.job.data_prefix}/")
    return train, {"storage": {"cache": {"enabled": True, "sourceUri": source}}}


class AwsStack(pulumi.ComponentResource):
    outputs: dict[str, pulumi.Input[Any]]  # the stack outputs, exported by __main__.py

    def __init__(self, name: str, args: AwsStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:AwsStack", name, None, opts)
        cfg = args.config
        tags = {"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **cfg.tags}

        aws_provider = aws.Provider(f"{name}-aws", region=cfg.region, profile=cfg.aws_profile,
                                    opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, providers={"aws": aws_provider})

        network = Network(f"{name}-network", NetworkArgs(
            region=cfg.region,
            availability_zones=cfg.network.availability_zones,
            vpc_cidr=cfg.network.vpc_cidr,
            nat_gateway_per_zone=cfg.network.nat_gateway_per_zone,
            existing=cfg.network.existing,
            tags=tags,
        ), opts=child)
        cluster = EksCluster(f"{name}-eks", EksClusterArgs(
            cluster_name=cfg.cluster_name,
            kubernetes_version=cfg.kubernetes_version,
            vpc_id=network.vpc_id,
            public_subnet_ids=network.public_subnet_ids,
            private_subnet_ids=network.private_subnet_ids,
            system_nodes=cfg.system_nodes,
            gpu_nodes=cfg.gpu_nodes,
            cluster_admin_arns=cfg.cluster_admin_arns,
            api_public_access_cidrs=cfg.api_public_access_cidrs,
            aws_profile=cfg.aws_profile,
            tags=tags,
        ), opts=child)
        k8s_provider = cluster.provider

        device_plugin = NvidiaDevicePlugin(f"{name}-nvidia-device-plugin", NvidiaDevicePluginArgs(
            provider=k8s_provider, tolerations=GPU_TOLERATIONS, node_selector=GPU_NODE_LABELS), opts=child)

        namespace: pulumi.Input[str] = cfg.job.namespace
        namespace_objects: list[pulumi.Resource] = []
        if cfg.job.namespace != "default":
            job_namespace = k8s.core.v1.Namespace(
                f"{name}-job-namespace", metadata=k8s.meta.v1.ObjectMetaArgs(name=cfg.job.namespace),
                opts=pulumi.ResourceOptions(parent=self, provider=k8s_provider))
            namespace = job_namespace.metadata.name
            namespace_objects.append(job_namespace)

        storage = EfsStorage(f"{name}-efs", EfsStorageArgs(
            provider=k8s_provider,
            cluster_name=cluster.cluster_name,
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            vpc_id=network.vpc_id,
            vpc_cidr=network.vpc_cidr,
            private_subnet_ids=network.private_subnet_ids,
            node_group=cluster.system_node_group,
            claim_name=f"{cfg.job.name}-shared",
            claim_namespace=namespace,
            claim_depends_on=namespace_objects,
            tags=tags,
        ), opts=child)

        registry = Registry(f"{name}-registry", RegistryArgs(tags=tags), opts=child)
        image = TrainingImage(f"{name}-image", TrainingImageArgs(
            repository_url=registry.repository_url,
            registry_server=registry.server,
            registry_username=registry.username,
            registry_password=registry.password,
            # Builds with the local Docker/BuildKit of whoever runs `pulumi up`.
            provider=docker_build.Provider(f"{name}-docker-build", opts=pulumi.ResourceOptions(parent=self)),
        ), opts=child)

        bucket = SnapshotBucket(f"{name}-snapshots", SnapshotBucketArgs(
            delete_on_destroy=cfg.delete_bucket_on_destroy, tags=tags), opts=child)
        # The chart names the job's ServiceAccount after the release, i.e. the job's name.
        job_role = IrsaRole(f"{name}-job", IrsaRoleArgs(
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            namespace=cfg.job.namespace,
            service_account=cfg.job.name,
            inline_policy=bucket.read_write_policy,
            tags=tags,
        ), opts=child)

        self.outputs = {
            "clusterName": cluster.cluster_name,
            "kubeconfig": cluster.kubeconfig_json,
            "registryUrl": registry.repository_url,
            "imageRef": image.ref,
            "bucketName": bucket.bucket_name,
            **job_commands(region=cfg.region, cluster_name=cfg.cluster_name, aws_profile=cfg.aws_profile,
                           namespace=cfg.job.namespace, job_name=cfg.job.name, nodes_max=cfg.job.nodes_max,
                           tensorboard=cfg.job.tensorboard, bucket_name=bucket.bucket_name,
                           data_prefix=cfg.job.data_prefix),
        }
        if cfg.job.enabled:
            train, extra_values = job_storage_values(cfg, bucket.bucket_name)
            job = TrainingJob(cfg.job.name, TrainingJobArgs(
                provider=k8s_provider,
                image_ref=image.ref,
                namespace=namespace,
                nodes_min=cfg.job.nodes_min,
                nodes_max=cfg.job.nodes_max,
                procs_per_node=cfg.job.procs_per_node,
                gpus_per_node=cfg.job.gpus_per_node,
                pvc_name=storage.claim_name,
                service_account_annotations={"eks.amazonaws.com/role-arn": job_role.role_arn},
                node_selector=GPU_NODE_LABELS,
                tolerations=GPU_TOLERATIONS,
                train=train,
                tensorboard=cfg.job.tensorboard,
                extra_values=extra_values,
            ), opts=pulumi.ResourceOptions(parent=self, depends_on=[device_plugin]))
            self.outputs["jobName"] = job.job_name
            self.outputs["jobNamespace"] = job.namespace
        else:
            self.outputs["enableJobCommand"] = (f"pulumi config set --path {NAMESPACE}:job.enabled true && "
                                                "pulumi up")
        self.register_outputs(self.outputs)
