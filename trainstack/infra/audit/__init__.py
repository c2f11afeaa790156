"""Orphan audit: billable resources labelled with a stack's name that the stack's state does not hold.

`python -m trainstack.infra.audit --stack aws|gcp` lists what a failed or partial `pulumi destroy` left behind
(file systems and their access points, load balancers, detached disks and network interfaces, NAT
gateways, addresses, clusters, node groups, buckets...), each with the command that deletes it. It only
reads: every call is a List/Describe/Get.
"""

from trainstack.infra.audit.report import Orphan

# What the stacks put on every resource they can label (trainstack/infra/aws/stack.py; the GCP stack likewise).
APP_LABEL = ("app", "trainstack")
STACK_LABEL_KEY = "pulumi-stack"

__all__ = ["APP_LABEL", "STACK_LABEL_KEY", "Orphan"]
