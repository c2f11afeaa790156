"""The S3 bucket for snapshots and exports: private, encrypted, versioned, and kept by `pulumi destroy`.

It holds the results a run is worth, so destroying the cluster must not take it along unless asked to
(`trainstack:deleteBucketOnDestroy: true`). When it is kept, its guard rails (public access block,
encryption, versioning, TLS-only policy) are kept with it: deleting them would leave the kept bucket
less protected than it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

# Least privilege for the training job: list the bucket, read and write its objects, nothing else
# (no bucket policy, ACL, versioning or deletion of the bucket itself).
OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                  "s3:ListMultipartUploadParts")
BUCKET_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation")


@dataclass(frozen=True, kw_only=True)
class SnapshotBucketArgs:
    delete_on_destroy: bool = False
    noncurrent_version_days: int = 30  # old versions of overwritten files cost money; keep a month
    tags: Mapping[str, str] = field(default_factory=dict)


def read_write_policy(bucket_arn: str) -> str:
    """An IAM policy document that grants OBJECT_ACTIONS and BUCKET_ACTIONS on this bucket only."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ListTheBucket", "Effect": "Allow", "Action": list(BUCKET_ACTIONS), "Resource": bucket_arn},
            {"Sid": "ReadWriteObjects", "Effect": "Allow", "Action": list(OBJECT_ACTIONS),
             "Resource": f"{bucket_arn}/*"},
        ],
    }, sort_keys=True)


def tls_only_policy(bucket_arn: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    }, sort_keys=True)


class SnapshotBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    read_write_policy: pulumi.Output[str]  # for the training job's IRSA role

    def __init__(self, name: str, args: SnapshotBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:SnapshotBucket", name, None, opts)
        keep = not args.delete_on_destroy
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=keep)
        bucket = aws.s3.Bucket(
            name,
            # Only when the user asked for deletion: then its objects (and versions) go with it.
            force_destroy=args.delete_on_destroy,
            tags=dict(args.tags),
            opts=child,
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            # ACLs off: access is decided by IAM and the bucket policy alone.
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            # SSE-S3: encrypted at rest at no cost and without a KMS key to manage.
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=aws.s3
                .BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256"),
            )],
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=[aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="expire-old-versions-and-abandoned-uploads",
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                    noncurrent_days=args.noncurrent_version_days),
                abort_incomplete_multipart_upload=aws.s3
                .BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(days_after_initiation=7),
            )],
            # S3 rejects lifecycle rules on versions until versioning is on.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[versioning])),
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(tls_only_policy),
            # S3 answers OperationAborted to a policy written while the public access block changes.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[public_access])),
        )
        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.read_write_policy = bucket.arn.apply(read_write_policy)
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn})
