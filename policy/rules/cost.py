"""Cost: GPU pools that scale to zero and run on spot or reserved capacity, a budget in the stack's
config, and the labels that let the orphan audit (python -m trainstack.infra.audit) find what a destroy left."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .common import APP_LABEL, STACK_LABEL_KEY, Resource, Stack, as_int, as_list, get, labels_of, truthy

EKS_NODE_GROUPS = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
# EC2 accelerated families (p*, g*, gr*, trn*, inf*, dl*) and GPU AMI types.
_EC2_GPU_TYPE = re.compile(r"^(p\d|g\d|gr\d|trn\d|inf\d|dl\d)")
_GPU_AMI = re.compile(r"NVIDIA|GPU|NEURON", re.IGNORECASE)
# GCE machine families that always carry GPUs.
_GCE_GPU_MACHINE = re.compile(r"^(a2|a3|a4|a4x|g2|g4)-")
# A tag (AWS) or label (GCP) on one pool that records a deliberate on-demand choice.
ON_DEMAND_OVERRIDE = ("trainstack-capacity", "on-demand")
BUDGET_KEY = "trainstack:maxHourlyUsd"
RUN_BUDGET_KEY = "trainstack:maxRunUsd"

# Where each billable type keeps its tags/labels (the orphan audit lists these kinds of leftovers).
LABEL_PATHS = {
    "aws:ec2/vpc:Vpc": "tags",
    "aws:ec2/subnet:Subnet": "tags",
    "aws:ec2/natGateway:NatGateway": "tags",
    "aws:ec2/eip:Eip": "tags",
    "aws:ec2/securityGroup:SecurityGroup": "tags",
    "aws:ec2/launchTemplate:LaunchTemplate": "tags",
    "aws:ec2/instance:Instance": "tags",
    "aws:ebs/volume:Volume": "tags",
    "aws:efs/fileSystem:FileSystem": "tags",
    "aws:s3/bucket:Bucket": "tags",
    "aws:s3/bucketV2:BucketV2": "tags",
    "aws:ecr/repository:Repository": "tags",
    "aws:lb/loadBalancer:LoadBalancer": "tags",
    "aws:eks/addon:Addon": "tags",
    "eks:index:Cluster": "tags",
    "eks:index:ManagedNodeGroup": "tags",
    "gcp:storage/bucket:Bucket": "labels",
    "gcp:container/cluster:Cluster": "resourceLabels",
    "gcp:container/nodePool:NodePool": "nodeConfig.resourceLabels",
    "gcp:filestore/instance:Instance": "labels",
    "gcp:compute/disk:Disk": "labels",
    "gcp:compute/address:Address": "labels",
    "gcp:artifactregistry/repository:Repository": "labels",
}


def is_gpu_pool(resource: Resource) -> bool:
    props = resource.props
    if resource.type in EKS_NODE_GROUPS:
        return bool(_GPU_AMI.search(str(get(props, "amiType", "")))) or any(
            _EC2_GPU_TYPE.match(str(t)) for t in as_list(get(props, "instanceTypes")))
    if resource.type == GKE_NODE_POOL:
        return bool(as_list(get(props, "nodeConfig.guestAccelerators"))) or bool(
            _GCE_GPU_MACHINE.match(str(get(props, "nodeConfig.machineType", ""))))
    return False


def gpu_pool_scales_to_zero(resource: Resource, stack: Stack) -> list[str]:
    if not is_gpu_pool(resource):
        return []
    if resource.type in EKS_NODE_GROUPS:
        minimum = as_int(get(resource.props, "scalingConfig.minSize"))
        return [] if minimum == 0 else [f"scalingConfig.minSize is {minimum}; 0 stops paying for idle GPUs"]
    autoscaling = get(resource.props, "autoscaling")
    if autoscaling is None:
        return ["no autoscaling: the pool keeps its GPU nodes with no job; autoscale from minNodeCount 0"]
    minimums = [as_int(get(autoscaling, key)) for key in ("minNodeCount", "totalMinNodeCount")
                if get(autoscaling, key) is not None]
    return [] if 0 in minimums or not minimums else [f"autoscaling minimum is {min(minimums)}; 0 stops paying for idle GPUs"]


def gpu_pool_spot_or_reservation(resource: Resource, stack: Stack) -> list[str]:
    if not is_gpu_pool(resource):
        return []
    props = resource.props
    key, value = ON_DEMAND_OVERRIDE
    if resource.type in EKS_NODE_GROUPS:
        if get(props, "capacityType") in ("SPOT", "CAPACITY_BLOCK") or get(props, f"tags.{key}") == value:
            return []
        return [f"capacityType is {get(props, 'capacityType', 'ON_DEMAND')}: use SPOT or a capacity block, or tag "
                f"the group {key}={value} to mean it"]
    node = get(props, "nodeConfig", {})
    if (truthy(get(node, "spot")) or truthy(get(node, "preemptible")) or truthy(get(node, "flexStart"))
            or truthy(get(props, "queuedProvisioning.enabled"))
            or get(node, "reservationAffinity.consumeReservationType") == "SPECIFIC_RESERVATION"
            or get(node, f"resourceLabels.{key}") == value):
        return []
    return [f"on-demand GPUs: set nodeConfig.spot, a SPECIFIC_RESERVATION, flex-start or queued provisioning, "
            f"or label the pool {key}={value} to mean it"]


def budget_present(resources: Sequence[Resource], stack: Stack) -> list[tuple[Resource | None, str]]:
    """Stack rule: the stack's config caps its hourly cost (the program refuses estimates above it)."""
    problems = []
    for key, required in ((BUDGET_KEY, True), (RUN_BUDGET_KEY, False)):
        raw = stack.config.get(key)
        if raw is None:
            if required:
                problems.append((None, f"{key} is not set: `pulumi config set {key} <USD per hour>`"))
            continue
        try:
            ok = float(raw) > 0
        except ValueError:
            ok = False
        if not ok:
            problems.append((None, f"{key} must be a positive number of USD, got {raw!r}"))
    return problems


def billing_labels(resource: Resource, stack: Stack) -> list[str]:
    path = LABEL_PATHS.get(resource.type)
    if path is None:
        return []
    wanted = {APP_LABEL[0]: APP_LABEL[1], STACK_LABEL_KEY: stack.name}
    problems = [f"{path} must include {k}={v} (cost allocation; the orphan audit finds leftovers by it)"
                for k, v in wanted.items() if labels_of(resource, path).get(k) != v]
    if resource.type == "aws:ec2/launchTemplate:LaunchTemplate":
        # Instances and volumes started from the template carry only its tagSpecifications.
        tagged = {get(spec, "resourceType") for spec in as_list(get(resource.props, "tagSpecifications"))
                  if all(get(spec, f"tags.{k}") == v for k, v in wanted.items())}
        problems += [f"tagSpecifications must tag every {kind} with {wanted}"
                     for kind in ("instance", "volume") if kind not in tagged]
    return problems
