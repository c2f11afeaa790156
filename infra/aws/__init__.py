"""The AWS stack: typed components for the EKS spot-GPU training platform (see stack.py for the whole)."""

from infra.aws.config import AwsStackConfig, ConfigError, parse_aws_config, raw_config
from infra.aws.stack import AwsStack, AwsStackArgs

__all__ = ["AwsStack", "AwsStackArgs", "AwsStackConfig", "ConfigError", "parse_aws_config", "raw_config"]
