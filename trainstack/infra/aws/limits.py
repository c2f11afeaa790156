"""What AWS documents as valid: the Regions accepted for aws:region, and the limits the config is checked against.

Regions: docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html (the commercial
`aws` partition). A Region AWS opens later is refused as unknown until it is added here. GovCloud and
China Regions are in other partitions (arn:aws-us-gov:, arn:aws-cn:), whose ARNs the stack does not
build (its policy ARNs are arn:aws:): they are refused by name, not as unknown.
"""

from __future__ import annotations

AWS_REGIONS = frozenset({
    "us-east-1", "us-east-2", "us-west-1", "us-west-2",
    "af-south-1",
    "ap-east-1", "ap-east-2", "ap-south-1", "ap-south-2",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6",
    "ap-southeast-7",
    "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
    "ca-central-1", "ca-west-1",
    "eu-central-1", "eu-central-2", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-1", "eu-south-2", "eu-north-1",
    "il-central-1", "me-south-1", "me-central-1", "mx-central-1", "sa-east-1",
})
# Region name prefix -> the partition it belongs to (docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html,
# "partition"): aws-us-gov for GovCloud (US), aws-cn for China, aws-iso* for the isolated Regions.
OTHER_PARTITIONS = {"us-gov-": "aws-us-gov", "cn-": "aws-cn", "us-iso-": "aws-iso", "us-isob-": "aws-iso-b",
                    "eu-isoe-": "aws-iso-e", "us-isof-": "aws-iso-f"}

# Limits the config is checked against, each with the page that states it.
# VPC IPv4 block sizes: "between a /16 netmask and /28 netmask"
# (docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html, "IPv4 VPC CIDR blocks").
VPC_LARGEST_PREFIX = 16
# Tags: 50 user tags per resource, keys up to 128 characters, values up to 256; only `aws:`-prefixed
# tags do not count (docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html, "Tag naming limits and
# requirements").
MAX_TAGS = 50
# Tags EKS puts on a managed node group's instances (and its Auto Scaling group, the cluster autoscaler's
# discovery tags) next to ours: eks:cluster-name, eks:nodegroup-name and kubernetes.io/cluster/<name>
# (docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html, "Managed node groups concepts"), and
# k8s.io/cluster-autoscaler/enabled, k8s.io/cluster-autoscaler/<name> (same page; cluster-autoscaler
# cloudprovider/aws/README.md, "Auto-Discovery Setup"). They count toward the 50.
EKS_NODE_TAGS = ("eks:cluster-name", "eks:nodegroup-name", "kubernetes.io/cluster/<cluster>",
                 "k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/<cluster>")
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
# Characters of a tag key or value: IAM's Tag (docs.aws.amazon.com/IAM/latest/APIReference/API_Tag.html,
# key pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]+, value the same set, may be empty) and EFS's
# (docs.aws.amazon.com/efs/latest/ug/API_Tag.html) take only Unicode letters (L*), separators (Z*: spaces),
# numbers (N*) and _ . : / = + - @, the set EKS's tag pages give as "generally allowed" across services
# (docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-eks-fargateprofile-tag.html).
# The stack tags its IAM roles and the EFS file system with the rest, so one other character fails `up`.
TAG_UNICODE_CATEGORIES = ("L", "Z", "N")  # first letter of unicodedata.category
TAG_SYMBOLS = "_.:/=+-@"
# EKS service quotas (docs.aws.amazon.com/eks/latest/userguide/service-quotas.html): "Public endpoint access
# CIDR ranges per cluster: 40" (not adjustable). "Nodes per managed node group" (450 by default) is
# adjustable, so a larger group is not refused here: an account with the raised quota may use it.
MAX_PUBLIC_ACCESS_CIDRS = 40
