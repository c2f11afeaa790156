"""What AWS documents as valid: the Regions accepted for aws:region, and the limits the config is checked against.

Regions: docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html (commercial,
GovCloud and China partitions). A Region AWS opens later is refused as unknown until it is added here.
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
    "us-gov-east-1", "us-gov-west-1",
    "cn-north-1", "cn-northwest-1",
})

# Limits the config is checked against, each with the page that states it.
# VPC IPv4 block sizes: "between a /16 netmask and /28 netmask"
# (docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html, "IPv4 VPC CIDR blocks").
VPC_LARGEST_PREFIX = 16
# Tags: 50 user tags per resource, keys up to 128 characters, values up to 256
# (docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html, "Tag naming limits and requirements").
MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
# EKS service quotas (docs.aws.amazon.com/eks/latest/userguide/service-quotas.html): "Public endpoint access
# CIDR ranges per cluster: 40" (not adjustable), "Nodes per managed node group: 450" (the default quota).
MAX_PUBLIC_ACCESS_CIDRS = 40
MAX_NODES_PER_MANAGED_NODE_GROUP = 450
