"""S3SnapshotBucket, hosted: the AWS stack's bucket for the data set, checkpoints and exports
(trainstack.infra.aws.snapshot_bucket): private, encrypted, versioned, TLS only, kept by `pulumi destroy`
unless asked. Its readWritePolicy is the IAM policy the job's role needs for it, and nothing more.

It builds with the aws provider it is given (trainstack/components/providers.py), in that provider's region;
without one, it makes one from `region` (and `profile`). A bucket has no zones: any Region works.
"""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.components.aws_provider import aws_region
from trainstack.components.providers import given_provider
from trainstack.components.stack_config import stack_errors_as_inputs
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.aws.config import PROVIDER_FIELDS, check_region, check_tags
from trainstack.infra.aws.settings import AwsStackArgs
from trainstack.infra.aws.snapshot_bucket import SnapshotBucket as InfraSnapshotBucket
from trainstack.infra.aws.snapshot_bucket import SnapshotBucketArgs as InfraSnapshotBucketArgs
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.loader import from_inputs


@dataclass(kw_only=True)
class S3SnapshotBucketArgs:
    """The snapshot bucket's settings; unset inputs keep the AWS stack's defaults."""

    region: str | None = None
    """The AWS region, next to the cluster (no cross-region transfer charge); default: the given aws provider's.
    Needed without an aws provider, or with one whose settings are other resources' outputs."""
    profile: str | None = None
    """A named AWS CLI profile for the provider the part makes when none is given."""
    delete_on_destroy: bool | None = None
    """Delete the bucket and its contents on destroy (default false: destroy leaves it, and its guard rails, in place)."""
    tags: dict[str, str] | None = None
    """Extra tags (plus app and pulumi-stack)."""


class S3SnapshotBucket(pulumi.ComponentResource):
    """A private, encrypted, versioned S3 bucket (TLS only) for the data set, checkpoints and exports."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    bucket_arn: pulumi.Output[str]
    """The bucket's ARN."""
    uri: pulumi.Output[str]
    """s3://<bucket>: TrainingPlatform's bucket.uri."""
    read_write_policy: pulumi.Output[str]
    """An IAM policy document that lists the bucket and reads and writes its objects, for the job's role."""

    def __init__(self, name: str, args: S3SnapshotBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args = from_inputs(S3SnapshotBucketArgs, args)
        given = given_provider(opts, "aws")
        region = aws_region(given, args.region)
        # Only the settings a bucket has: the AWS stack's region and tag rules, not its network or cluster.
        with stack_errors_as_inputs(PROVIDER_FIELDS, {"deleteBucketOnDestroy": "deleteOnDestroy"}):
            settings = from_inputs(AwsStackArgs, {"region": region, "tags": args.tags,
                                                  "delete_bucket_on_destroy": args.delete_on_destroy}, key=NAMESPACE)
            region, tags = check_region(settings.region), check_tags(settings.tags)
        delete_on_destroy = bool(settings.delete_bucket_on_destroy)
        super().__init__(token("S3SnapshotBucket"), name, None, moved_from_index("S3SnapshotBucket", opts))

        provider = given or aws.Provider(f"{name}-aws", region=region, profile=args.profile,
                                         opts=pulumi.ResourceOptions(parent=self))
        bucket = InfraSnapshotBucket(name, InfraSnapshotBucketArgs(
            delete_on_destroy=delete_on_destroy,
            tags={"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **tags},
        ), opts=pulumi.ResourceOptions(parent=self, providers={"aws": provider}))
        self.bucket_name = bucket.bucket_name
        self.bucket_arn = bucket.bucket_arn
        self.uri = pulumi.Output.concat("s3://", bucket.bucket_name)
        self.read_write_policy = bucket.read_write_policy
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn, "uri": self.uri,
                               "readWritePolicy": self.read_write_policy})
