"""S3SnapshotBucket, hosted: the AWS stack's bucket for the data set, checkpoints and exports
(trainstack.infra.aws.snapshot_bucket): private, encrypted, versioned, TLS only, kept by `pulumi destroy`
unless asked. Its readWritePolicy is the IAM policy the job's role needs for it, and nothing more.
"""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.part_config import NO_CLUSTER, parsed_as_inputs, raw_config
from trainstack.infra.aws.config import parse_aws_config
from trainstack.infra.aws.snapshot_bucket import SnapshotBucket as InfraSnapshotBucket
from trainstack.infra.aws.snapshot_bucket import SnapshotBucketArgs as InfraSnapshotBucketArgs

PROVIDER_KEYS = {"region": "aws:region", "profile": "aws:profile"}


@dataclass(kw_only=True)
class S3SnapshotBucketArgs:
    """The snapshot bucket's settings; unset inputs keep the AWS stack's defaults."""

    region: str
    """The AWS region (next to the cluster: no cross-region transfer charge)."""
    profile: str | None = None
    """A named AWS CLI profile for the provider."""
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
        args = args_from_inputs(S3SnapshotBucketArgs, args)
        raw = raw_config({"aws:region": args.region, "aws:profile": args.profile}, tags=args.tags,
                         deleteBucketOnDestroy=args.delete_on_destroy, **NO_CLUSTER)
        config = parsed_as_inputs(parse_aws_config, raw, PROVIDER_KEYS, {"deleteBucketOnDestroy": "deleteOnDestroy"})
        super().__init__("trainstack:index:S3SnapshotBucket", name, None, opts)

        provider = aws.Provider(f"{name}-aws", region=config.region, profile=config.aws_profile,
                                opts=pulumi.ResourceOptions(parent=self))
        bucket = InfraSnapshotBucket(name, InfraSnapshotBucketArgs(
            delete_on_destroy=config.delete_bucket_on_destroy,
            tags={"app": "trainstack", "pulumi-stack": pulumi.get_stack(), **config.tags},
        ), opts=pulumi.ResourceOptions(parent=self, providers={"aws": provider}))
        self.bucket_name = bucket.bucket_name
        self.bucket_arn = bucket.bucket_arn
        self.uri = pulumi.Output.concat("s3://", bucket.bucket_name)
        self.read_write_policy = bucket.read_write_policy
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn, "uri": self.uri,
                               "readWritePolicy": self.read_write_policy})
