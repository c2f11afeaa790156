"""EfsStorage, hosted: the AWS stack's shared filesystem (trainstack.infra.aws.efs_storage) for a cluster
given by its outputs (EksCluster's clusterName, oidcProviderArn, oidcIssuer, kubeconfig) in a VPC given by id.

EFS with one mount target per zone of the given subnets, the EFS CSI driver add-on with its IRSA role,
an access point and a PersistentVolume reserved for the training platform's claim of the job named here:
hand volumeName and size to TrainingPlatform's sharedStorage. Before anything of it is created, EKS is asked
whether it offers the pinned add-on build for the cluster's Kubernetes version (the AWS stack asks it of its
own version; a cluster you bring may run another).

It builds with the aws provider it is given (trainstack/components/providers.py), in that provider's region;
without one, it makes one from `region` (and `profile`). The VPC and subnets may be other resources' outputs
(your own aws.ec2.Vpc and Subnet): plain IDs are checked and looked up now (one mount target per zone);
IDs that are outputs get one mount target per subnet, and EFS itself refuses a subnet outside the VPC or
two in one zone.
"""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.components.aws_provider import aws_location
from trainstack.components.cluster_access import check_cluster_access, cluster_provider
from trainstack.components.providers import given_provider
from trainstack.components.stack_config import stack_errors_as_inputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.aws.config import PROVIDER_FIELDS, ExistingNetwork, resolve_aws
from trainstack.infra.aws.efs_storage import EfsStorage as InfraEfsStorage
from trainstack.infra.aws.efs_storage import EfsStorageArgs as InfraEfsStorageArgs
from trainstack.infra.aws.handles import EksClusterRef
from trainstack.infra.aws.network import Network, NetworkArgs
from trainstack.infra.aws.preflight import EFS_CSI_ADDON, addon_version_key
from trainstack.infra.aws.settings import AwsExistingNetwork, AwsStackArgs
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.errors import InputError
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.known_outputs import known_output
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.core import versions
from trainstack.infra.kubernetes.platform import shared_claim_name

# The stack file's keys -> this part's inputs.
RENAMES = {"job.name": "jobName", "job.namespace": "jobNamespace", "protectSharedFilesystem": "protect",
           "existingNetwork.vpcId": "vpcId", "existingNetwork.privateSubnetIds": "subnetIds"}


@dataclass(kw_only=True)
class EfsStorageArgs:
    """EFS for the training job's pods, on an existing EKS cluster and VPC."""

    region: str | None = None
    """The AWS region (default: the given aws provider's; needed without an aws provider, or with one whose settings are other resources' outputs)."""
    cluster_name: pulumi.Input[str]
    """The cluster's name (EksCluster's clusterName: it resolves once the add-on's nodes exist)."""
    oidc_provider_arn: pulumi.Input[str]
    """The cluster's IAM OIDC provider (EksCluster's oidcProviderArn): the CSI driver's role trusts it."""
    oidc_issuer: pulumi.Input[str]
    """The cluster's OIDC issuer without https:// (EksCluster's oidcIssuer)."""
    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text), where the PersistentVolume goes; every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    vpc_id: pulumi.Input[str]
    """The cluster's VPC: NFS is open to its CIDR block only."""
    subnet_ids: list[pulumi.Input[str]]
    """The nodes' private subnets: one mount target in each of their zones (outputs: one per subnet, so one subnet per zone)."""
    profile: str | None = None
    """A named AWS CLI profile for the provider the part makes when none is given."""
    job_name: str | None = None
    """The training job's name (TrainingPlatform's job.name, default train): the volume is reserved for its claim, <jobName>-shared."""
    job_namespace: str | None = None
    """The job's namespace (TrainingPlatform's job.namespace, default default)."""
    protect: bool | None = None
    """Refuse to destroy the file system, which holds the runs (default true)."""
    tags: dict[str, str] | None = None
    """Extra tags on every AWS resource (plus app and pulumi-stack)."""


class EfsStorage(pulumi.ComponentResource):
    """An encrypted EFS file system, a mount target per zone, the EFS CSI driver add-on (IRSA), an access point and a PersistentVolume reserved for the training platform's claim."""

    file_system_id: pulumi.Output[str]
    """The EFS file system."""
    access_point_id: pulumi.Output[str]
    """The job's access point (its runs' directory)."""
    volume_name: pulumi.Output[str]
    """The PersistentVolume: TrainingPlatform's sharedStorage.volumeName (with storageClassName "")."""
    size: pulumi.Output[str]
    """The volume's nominal capacity (EFS grows as needed; TrainingPlatform's plain sharedStorage.size: this or less)."""
    claim_name: pulumi.Output[str]
    """The claim the volume is reserved for (the platform's)."""

    def __init__(self, name: str, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(EfsStorageArgs, args)
        given = given_provider(opts, "aws")
        region, settings_known = aws_location(given, args.region)
        with stack_errors_as_inputs(PROVIDER_FIELDS, RENAMES):
            # The AWS stack's rules for what a file system has (region, tags, the job's claim, the VPC's IDs: plain
            # ones checked here, outputs by EFS); a part without a cluster asks for no API endpoint: private.
            config = resolve_aws(from_inputs(AwsStackArgs, {
                "region": region, "profile": args.profile, "tags": args.tags, "protect_shared_filesystem": args.protect,
                "job": Job(enabled=False, name=args.job_name, namespace=args.job_namespace), "api_endpoint": "private",
                "existing_network": AwsExistingNetwork(vpc_id=args.vpc_id, private_subnet_ids=args.subnet_ids)},
                key=NAMESPACE), pulumi.get_stack())
        existing = ExistingNetwork(vpc_id=args.vpc_id, public_subnet_ids=(), private_subnet_ids=tuple(args.subnet_ids),
                                   subnets_key="subnetIds")
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("EfsStorage"), name, None, moved_from_index("EfsStorage", opts))

        tags = {"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **config.tags}
        provider = given or aws.Provider(f"{name}-aws", region=config.region, profile=config.aws_profile,
                                         opts=pulumi.ResourceOptions(parent=self))
        invoke = pulumi.InvokeOutputOptions(parent=self, provider=provider)
        # The cluster's version (it exists once its name resolves), then the add-on builds EKS offers for it;
        # asked at `up` when the provider's settings are not known yet (preflight.gate).
        ready = pulumi.Output.from_input([]) if not settings_known else aws.eks.get_cluster_output(
            name=args.cluster_name, opts=invoke).apply(
            lambda cluster: aws.eks.get_addon_version_output(
                addon_name=EFS_CSI_ADDON, kubernetes_version=cluster.version, most_recent=True, opts=invoke).apply(
                lambda offered: checked_addon_for(cluster.name, cluster.version, offered.version or ""))).apply(
            lambda _: [])
        child = pulumi.ResourceOptions(parent=self, providers={"aws": provider}, depends_on=ready)
        # The given VPC as the stack's Network sees an existing one: its CIDR and one subnet per zone, looked up.
        network = Network(f"{name}-network", NetworkArgs(
            region=config.region, availability_zones=(), tags=tags,
            existing=existing), opts=child)
        kubernetes = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        claim = shared_claim_name(config.job)
        storage = InfraEfsStorage(name, InfraEfsStorageArgs(
            cluster=EksClusterRef(cluster_name=args.cluster_name, oidc_provider_arn=args.oidc_provider_arn,
                                  oidc_issuer=args.oidc_issuer, provider=kubernetes),
            network=network, claim_namespace=config.job.namespace, claim_name=claim,
            protect=config.protect_shared_filesystem, tags=tags), opts=child)
        self.file_system_id = storage.file_system_id
        self.access_point_id = storage.access_point_id
        self.volume_name = storage.volume_name
        self.size = known_output(storage.shared_storage.size)  # known now: TrainingPlatform takes it plain
        self.claim_name = pulumi.Output.from_input(claim)
        self.register_outputs({"fileSystemId": self.file_system_id, "accessPointId": self.access_point_id,
                               "volumeName": self.volume_name, "size": self.size, "claimName": self.claim_name})


def checked_addon_for(cluster_name: str, kubernetes_version: str, newest: str) -> bool:
    """The pinned EFS CSI add-on build is one EKS offers for the cluster's Kubernetes version."""
    pinned = versions.EFS_CSI_ADDON_VERSION
    if not newest or addon_version_key(pinned) > addon_version_key(newest):
        raise InputError(f"clusterName: cluster {cluster_name} runs Kubernetes {kubernetes_version}, for which EKS offers "
                         f"the {EFS_CSI_ADDON} add-on up to {newest or 'no version'}, not the pinned {pinned}. Fix: "
                         f"use a cluster on Kubernetes {versions.EKS_KUBERNETES_VERSION} (EksCluster's "
                         "kubernetesVersion), or a trainstack release that pins an offered build")
    return True
