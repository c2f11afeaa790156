"""FilestoreShare, hosted: the GKE stack's shared filesystem (trainstack.infra.gcp.filestore_storage) on a
VPC given by name, with its PersistentVolume in a cluster given by kubeconfig.

The volume is reserved for the training platform's claim of the job named here (<jobName>-shared in
<jobNamespace>): hand volumeName and size to TrainingPlatform's sharedStorage.
"""

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.cluster_access import check_cluster_access, cluster_provider
from trainstack.components.gcp_part_config import part_config
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.errors import InputError
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.known_outputs import known_output
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp.filestore_storage import SHARE_NAME
from trainstack.infra.gcp.filestore_storage import FilestoreStorage as InfraFilestoreStorage
from trainstack.infra.gcp.filestore_storage import FilestoreStorageArgs as InfraFilestoreStorageArgs
from trainstack.infra.gcp.handles import ClusterRef, NetworkRef
from trainstack.infra.gcp.settings import Filestore
from trainstack.infra.kubernetes.platform import shared_claim_name

PROVIDER_KEYS = {"project": "gcp:project"}
# The stack file's keys -> this part's inputs.
RENAMES = {"sharedFilesystem.tier": "tier", "sharedFilesystem.capacityGb": "capacityGb", "job.name": "jobName",
           "job.namespace": "jobNamespace", "protectSharedFilesystem": "protect"}
REGIONAL_TIERS = ("REGIONAL", "ENTERPRISE")  # the instance's location is a region; every other tier's a zone
ZONE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")  # us-central1-a
REGION = re.compile(r"[a-z]+-[a-z]+\d+")  # us-central1


@dataclass(kw_only=True)
class FilestoreShareArgs:
    """A Filestore share for the training job's pods; unset inputs keep the GKE stack's defaults."""

    project: str | None = None
    """The Google Cloud project (default: the given gcp provider's; needed when no gcp provider is given)."""
    location: pulumi.Input[str]
    """Where the instance goes: the nodes' zone (GkeCluster's nodeZone) for BASIC_HDD, BASIC_SSD and ZONAL; the region for REGIONAL and ENTERPRISE."""
    network: pulumi.Input[str]
    """The VPC the cluster's nodes are on (name), which the instance peers with."""
    kubeconfig: pulumi.Input[str] | None = None
    """The cluster's kubeconfig (text), where the PersistentVolume goes; every object goes to this cluster, never to an ambient one. Unset: the kubernetes provider given in the resource options (or inherited) is used."""
    cluster_name: pulumi.Input[str] | None = None
    """The cluster's name: the Kubernetes provider is replaced only when it changes."""
    tier: str | None = None
    """BASIC_HDD, BASIC_SSD, ZONAL, REGIONAL or ENTERPRISE (default BASIC_HDD)."""
    capacity_gb: int | None = None
    """Size in GiB, within the tier's range (default: the tier's smallest)."""
    job_name: str | None = None
    """The training job's name (TrainingPlatform's job.name, default train): the volume is reserved for its claim, <jobName>-shared."""
    job_namespace: str | None = None
    """The job's namespace (TrainingPlatform's job.namespace, default default)."""
    protect: bool | None = None
    """Refuse to destroy the instance, which holds the runs (default true)."""


class FilestoreShare(pulumi.ComponentResource):
    """A Filestore instance with one share, and a PersistentVolume (reclaim policy Retain) reserved for the training platform's claim."""

    instance_name: pulumi.Output[str]
    """The Filestore instance."""
    ip_address: pulumi.Output[str]
    """The instance's IP address in the VPC."""
    share_name: pulumi.Output[str]
    """The share's name on the instance (NFS export /<shareName>)."""
    volume_name: pulumi.Output[str]
    """The PersistentVolume: TrainingPlatform's sharedStorage.volumeName (with storageClassName "")."""
    size: pulumi.Output[str]
    """The volume's capacity, capacityGb as a Kubernetes quantity, e.g. 1024Gi (TrainingPlatform's plain sharedStorage.size: this or less)."""
    claim_name: pulumi.Output[str]
    """The claim the volume is reserved for (the platform's)."""

    def __init__(self, name: str, args: FilestoreShareArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(FilestoreShareArgs, args)
        given, project, _, _ = gcp_settings(opts, args.project, None, None, takes_region=False)
        config = part_config(PROVIDER_KEYS, RENAMES, project=project,
                             job=Job(enabled=False, name=args.job_name, namespace=args.job_namespace),
                             shared_filesystem=Filestore(tier=args.tier, capacity_gb=args.capacity_gb),
                             protect_shared_filesystem=args.protect)
        tier = config.filestore.tier
        # A plain location is checked now, before anything is registered; an output once it resolves, before the
        # instance (Filestore refuses the mismatch only at create time).
        location = checked_location(tier, args.location) if isinstance(args.location, str) else \
            pulumi.Output.from_input(args.location).apply(lambda given: checked_location(tier, given))
        check_cluster_access(opts, args.kubeconfig)
        super().__init__(token("FilestoreShare"), name, None, moved_from_index("FilestoreShare", opts))

        google = given or gcp.Provider(f"{name}-gcp", project=config.project, default_labels=dict(config.labels),
                              opts=pulumi.ResourceOptions(parent=self))
        provider = cluster_provider(name, args.kubeconfig, args.cluster_name, self)
        claim = shared_claim_name(config.job)
        storage = InfraFilestoreStorage(name, InfraFilestoreStorageArgs(
            project=config.project, config=config.filestore,
            cluster=ClusterRef(cluster_name=args.cluster_name or "", location=location, node_zone=location,
                               provider=provider),
            network=NetworkRef(network_name=args.network, subnetwork_name=""),
            claim_namespace=config.job.namespace, claim_name=claim, protect=config.protect_shared_filesystem,
        ), opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}))
        self.instance_name = storage.instance_name
        self.ip_address = storage.ip_address
        self.share_name = pulumi.Output.from_input(SHARE_NAME)
        self.volume_name = pulumi.Output.from_input(storage.shared_storage.volume_name)
        self.size = known_output(storage.shared_storage.size)  # known now: TrainingPlatform takes it plain
        self.claim_name = pulumi.Output.from_input(claim)
        self.register_outputs({"instanceName": self.instance_name, "ipAddress": self.ip_address,
                               "shareName": self.share_name, "volumeName": self.volume_name, "size": self.size,
                               "claimName": self.claim_name})


def checked_location(tier: str, location: str) -> str:
    """`location` if it is what `tier` needs: a region for REGIONAL and ENTERPRISE, a zone for the others (the
    rule by which the stack's FilestoreStorage picks the node zone or the cluster's location)."""
    if tier in REGIONAL_TIERS and not REGION.fullmatch(location):
        raise InputError(f"location: {tier} needs a region, got {location!r}. Fix: set location to the cluster's "
                         f"region (e.g. {location.rpartition('-')[0] if ZONE.fullmatch(location) else 'us-central1'}), "
                         "or choose a zonal tier (BASIC_HDD, BASIC_SSD, ZONAL)")
    if tier not in REGIONAL_TIERS and not ZONE.fullmatch(location):
        raise InputError(f"location: {tier} needs a zone, got {location!r}. Fix: set location to the nodes' zone "
                         "(GkeCluster's nodeZone), or choose REGIONAL or ENTERPRISE")
    return location
