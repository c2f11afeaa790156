"""Shared storage for the training pods: an encrypted EFS file system with one mount target per zone,
the EFS CSI driver as an EKS add-on with its own IRSA role, and, made here rather than by the driver,
the job's EFS access point and a static PersistentVolume reserved for the platform's claim
(trainstack.infra.kubernetes.platform.shared_claim_name), handed over as the `shared_storage` handle.

Static, not dynamic provisioning: an access point the driver creates for a claim is deleted by the
driver, so a `pulumi destroy` that removes the driver first (or a driver that is down) leaves the
access point behind and the file system cannot be deleted. Owned by Pulumi, destroy runs in order:
the claim, the volume, the access point, then the driver, the mount targets and the file system.
The seed's teardown left the file system, its security group and mount targets behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainstack.infra.aws.cluster import EksCluster
from trainstack.infra.aws.handles import EksClusterRef
from trainstack.infra.aws.irsa import IrsaRole, IrsaRoleArgs
from trainstack.infra.aws.network import Network
from trainstack.infra.core import versions
from trainstack.infra.core.contracts import SharedStorage
from trainstack.infra.kubernetes.static_volume import static_volume
from trainstack.infra.kubernetes.training_job import chart_default_values

EFS_CSI_CONTROLLER_NAMESPACE = "kube-system"
# The add-on's controller (efs-csi-controller-sa) and node plugin (efs-csi-node-sa) both assume the role:
# AWS's add-on page rewrites eksctl's trust policy to StringLike `efs-csi-*`
# (docs.aws.amazon.com/eks/latest/userguide/add-ons-aws-efs-csi-driver.html, "Required IAM permissions").
EFS_CSI_SERVICE_ACCOUNTS = "efs-csi-*"
EFS_CSI_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
NFS_PORT = 2049


@dataclass(frozen=True, kw_only=True)
class EfsStorageArgs:
    cluster: EksCluster | EksClusterRef  # its OIDC provider, its Kubernetes provider, and a node group for the add-on
    network: Network  # one mount target per zone; NFS open to the VPC's CIDR only
    claim_namespace: str  # the volume is reserved for this claim (the platform's)
    claim_name: str
    protect: bool = True  # trainstack:protectSharedFilesystem: destroy refuses while the runs live here
    # The POSIX identity every client of the access point acts as, and the owner of its directory:
    # the training chart's non-root user (securityContext.runAsUser / fsGroup).
    uid: int = field(default_factory=lambda: chart_default_values()["securityContext"]["runAsUser"])
    gid: int = field(default_factory=lambda: chart_default_values()["securityContext"]["fsGroup"])
    tags: Mapping[str, str] = field(default_factory=dict)


# EFS grows as needed; a volume and its claim want a number all the same.
CLAIM_SIZE = "100Gi"
EFS_CSI_DRIVER = "efs.csi.aws.com"
# The run directories live under /trainstack/<namespace>/<claim> on the file system.
ROOT_DIRECTORY = "/trainstack"


class EfsStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    access_point_id: pulumi.Output[str]
    volume_name: pulumi.Output[str]
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
            service_account=EFS_CSI_SERVICE_ACCOUNTS,
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
            opts=pulumi.ResourceOptions(parent=self, depends_on=[group for group in (cluster.system_node_group,)
                                                                 if group is not None]),
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
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=args.protect)),
        )
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mount-{zone}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[security_group.id],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[nfs_rule]),
            )
            for zone, subnet_id in network.mount_subnet_ids.items()
        ]
        access_point = aws.efs.AccessPoint(
            f"{name}-access-point",
            file_system_id=file_system.id,
            # Every NFS client of this access point is this user, whatever the pod runs as.
            posix_user=aws.efs.AccessPointPosixUserArgs(uid=args.uid, gid=args.gid),
            root_directory=aws.efs.AccessPointRootDirectoryArgs(
                path=f"{ROOT_DIRECTORY}/{args.claim_namespace}/{args.claim_name}",
                # Created on first mount, owned by the trainer, closed to everyone else.
                creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                    owner_uid=args.uid, owner_gid=args.gid, permissions="750"),
            ),
            tags={**tags, "Name": f"{name}-{args.claim_namespace}-{args.claim_name}"},
            opts=child,
        )
        # Deleting the claim never deletes the files; destroy removes the access point and, with the
        # file system, the data (copy the results to the bucket first). Access point mounts always use
        # TLS (encryption in transit), which the driver requires.
        volume, self.shared_storage = static_volume(
            f"{name}-volume", claim_namespace=args.claim_namespace, claim_name=args.claim_name,
            capacity=CLAIM_SIZE, driver=EFS_CSI_DRIVER, mount_options=["tls"],
            volume_handle=pulumi.Output.concat(file_system.id, "::", access_point.id),
            ready=[addon, *mount_targets],
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[addon]))
        self.file_system_id = file_system.id
        self.access_point_id = access_point.id
        self.volume_name = volume.metadata.name
        self.csi_role_arn = csi_role.role_arn
        self.register_outputs({
            "fileSystemId": self.file_system_id,
            "accessPointId": self.access_point_id,
            "volumeName": self.volume_name,
            "csiRoleArn": self.csi_role_arn,
        })
