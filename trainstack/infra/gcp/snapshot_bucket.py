"""The GCS bucket for the data set, snapshots and exports: private, versioned, kept by `pulumi destroy`."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.resource_options import child_options

NONCURRENT_VERSIONS_KEPT = 5  # a checkpoint or data shard overwritten more often loses its oldest copies


@dataclass(frozen=True, kw_only=True)
class SnapshotBucketArgs:
    project: str
    region: str
    delete_on_destroy: bool = False  # trainstack:deleteBucketOnDestroy


class SnapshotBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    uri: pulumi.Output[str]  # gs://<bucket>

    def __init__(self, name: str, args: SnapshotBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:SnapshotBucket", name, None, opts)
        bucket = gcp.storage.Bucket(
            name,
            project=args.project,
            location=args.region,  # next to the cluster: no cross-region transfer charge
            uniform_bucket_level_access=True,  # IAM only, no object ACLs
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    num_newer_versions=NONCURRENT_VERSIONS_KEPT, with_state="ARCHIVED"),
            )],
            # Only when asked may destroy delete it, objects and all.
            force_destroy=args.delete_on_destroy,
            opts=child_options(self, None, opts, retain_on_delete=not args.delete_on_destroy),
        )
        self.bucket_name = bucket.name
        self.uri = pulumi.Output.concat("gs://", bucket.name)
        self.register_outputs({"bucketName": self.bucket_name})
