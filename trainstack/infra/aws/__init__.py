"""The AWS stack: typed components for the EKS spot-GPU training platform (see stack.py for the whole)."""

from trainstack.infra.aws.config import AwsStackConfig, parse_aws_config
from trainstack.infra.aws.stack import AwsStack, AwsStackArgs

__all__ = ["AwsStack", "AwsStackArgs", "AwsStackConfig", "parse_aws_config"]
