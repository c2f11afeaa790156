"""GcsSnapshotBucket, hosted: the GKE stack's bucket for the data set, checkpoints and exports
(trainstack.infra.gcp.snapshot_bucket): uniform access, public access prevented, versioned, kept by
`pulumi destroy` unless asked.
"""

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.components.gcp_part_config import part_config
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp.settings import PROVIDER_FIELDS
from trainstack.infra.gcp.snapshot_bucket import SnapshotBucket as InfraSnapshotBucket
from trainstack.infra.gcp.snapshot_bucket import SnapshotBucketArgs as InfraSnapshotBucketArgs

PROVIDER_KEYS = PROVIDER_FIELDS


@dataclass(kw_only=True)
class GcsSnapshotBucketArgs:
    """The snapshot bucket's settings; unset inputs keep the GKE stack's defaults."""

    project: str | None = None
    """The Google Cloud project (default: the given gcp provider's; needed when no gcp provider is given)."""
    region: str | None = None
    """The bucket's location, the cluster's region (default: the given gcp provider's region, else us-central1)."""
    delete_on_destroy: bool | None = None
    """Delete the bucket and its contents on destroy (default false: destroy leaves it)."""
    labels: dict[str, str] | None = None
    """Extra labels (plus app and pulumi-stack)."""


class GcsSnapshotBucket(pulumi.ComponentResource):
    """A private, versioned GCS bucket for the data set, checkpoints and exports."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    uri: pulumi.Output[str]
    """gs://<bucket>: TrainingPlatform's bucket.uri."""

    def __init__(self, name: str, args: GcsSnapshotBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(GcsSnapshotBucketArgs, args)
        given, project, region, _ = gcp_settings(opts, args.project, args.region, args.labels)
        # A bucket has no zone, but the stack's resolver asks one of the region: any will do.
        zone = f"{region}-a" if region is not None else None
        config = part_config(PROVIDER_KEYS, {"deleteBucketOnDestroy": "deleteOnDestroy"}, project=project, region=region,
                             zone=zone, labels=args.labels, delete_bucket_on_destroy=args.delete_on_destroy)
        super().__init__(token("GcsSnapshotBucket"), name, None, moved_from_index("GcsSnapshotBucket", opts))

        google = given or gcp.Provider(f"{name}-gcp", project=config.project, region=config.region,
                              default_labels=dict(config.labels), opts=pulumi.ResourceOptions(parent=self))
        bucket = InfraSnapshotBucket(name, InfraSnapshotBucketArgs(
            project=config.project, region=config.region, delete_on_destroy=config.delete_bucket_on_destroy),
            opts=pulumi.ResourceOptions(parent=self, providers={"gcp": google}))
        self.bucket_name = bucket.bucket_name
        self.uri = bucket.uri
        self.register_outputs({"bucketName": self.bucket_name, "uri": self.uri})
