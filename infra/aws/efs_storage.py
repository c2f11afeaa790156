"""Shared storage for the training pods: an encrypted EFS file system, the EFS CSI driver as an EKS
add-on with its own IRSA role, and a StorageClass that provisions access points. The ReadWriteMany
claim is the platform's (infra.platform), made from the `shared_storage` handle.

Order matters both ways: the add-on waits for a node group (it stays DEGRADED with no node to run
on), the claim waits for the add-on and every mount target (`shared_storage.ready`); `pulumi destroy`
therefore deletes the claim (the driver removes its access point) before the driver, the mount
targets and the file system.
The seed's teardown left the file system, its security group and mount targets behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra import versions
from infra.aws.cluster import EksCluster
from infra.aws.irsa import IrsaRole, IrsaRoleArgs
from infra.aws.network import Network
from infra.contracts import SharedStorage

EFS_CSI_CONTROLLER_NAMESPACE = "kube-system"
EFS_CSI_CONTROLLER_SERVICE_ACCOUNT = "efs-csi-controller-sa"  # what the add-on's controller runs as
EFS_CSI_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
NFS_PORT = 2049


@dataclass(frozen=True, kw_only=True)
class EfsStorageArgs:
    cluster: EksCluster  # its OIDC provider, its Kubernetes provider, and a node group for the add-on
    network: Network  # one mount target per private subnet; NFS open to the VPC's CIDR only
    tags: Mapping[str, str] = field(default_factory=dict)


# EFS grows as needed; a claim wants a number all the same.
CLAIM_SIZE = "100Gi"


class EfsStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    storage_class_name: pulumi.Output[str]
    csi_role_arn: pulumi.Output[str]
    shared_storage: SharedStorage

    def __init__(self, name: str, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:EfsStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        cluster, network = args.cluster, args.network

        csi_role = IrsaRole(f"{name}-csi-driver", IrsaRoleArgs(
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            namespace=EFS_CSI_CONTROLLER_NAMESPACE,
            service_account=EFS_CSI_CONTROLLER_SERVICE_ACCOUNT,
            managed_policy_arns=(EFS_CSI_POLICY_ARN,),
            tags=tags,
        ), opts=child)
        addon = aws.eks.Addon(
            f"{name}-csi-driver",
            cluster_name=cluster.cluster_name,
            addon_name="aws-efs-csi-driver",
            addon_version=versions.EFS_CSI_ADDON_VERSION,
            service_account_role_arn=csi_role.role_arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.system_node_group]),
        )

        security_group = aws.ec2.SecurityGroup(
            f"{name}-mount-targets",
            vpc_id=network.vpc_id,
            description="NFS to the trainstack EFS mount targets, from inside the VPC only",
            tags={**tags, "Name": f"{name}-mount-targets"},
            opts=child,
        )
        nfs_rule = aws.vpc.SecurityGroupIngressRule(
            f"{name}-nfs-from-vpc",
            security_group_id=security_group.id,
            description="NFS from the VPC",
            ip_protocol="tcp",
            from_port=NFS_PORT,
            to_port=NFS_PORT,
            cidr_ipv4=network.vpc_cidr,
            tags=tags,
            opts=child,
        )
        file_system = aws.efs.FileSystem(
            f"{name}-fs",
            encrypted=True,  # at rest, with the AWS-managed EFS key
            performance_mode="generalPurpose",
            # Bursting: no per-GB transfer charge; checkpoints and TensorBoard events are small next to
            # the burst credits a new file system starts with.
            throughput_mode="bursting",
            tags={**tags, "Name": name},
            opts=child,
        )
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mount-{index}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[security_group.id],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[nfs_rule]),
            )
            for index, subnet_id in enumerate(network.private_subnet_ids)
        ]

        k8s_child = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-class",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="efs"),
            provisioner="efs.csi.aws.com",
            parameters={
                "provisioningMode": "efs-ap",  # one EFS access point per claim
                "fileSystemId": file_system.id,
                "directoryPerms": "700",
                "basePath": "/trainstack",
                # The same claim gets the same directory back if it is re-created (runs resume).
                "subPathPattern": "${.PVC.namespace}/${.PVC.name}",
                "ensureUniqueDirectory": "false",
            },
            reclaim_policy="Delete",
            # Immediate: `pulumi up` waits for the claim to bind, proving the driver works.
            volume_binding_mode="Immediate",
            opts=pulumi.ResourceOptions.merge(k8s_child, pulumi.ResourceOptions(depends_on=[addon])),
        )
        self.file_system_id = file_system.id
        self.storage_class_name = storage_class.metadata.name
        self.shared_storage = SharedStorage(storage_class_name=self.storage_class_name, size=CLAIM_SIZE,
                                            ready=[addon, *mount_targets])
        self.csi_role_arn = csi_role.role_arn
        self.register_outputs({
            "fileSystemId": self.file_system_id,
            "storageClassName": self.storage_class_name,
            "csiRoleArn": self.csi_role_arn,
        })
