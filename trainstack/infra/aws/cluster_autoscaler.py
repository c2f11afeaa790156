"""ClusterAutoscaler: the Kubernetes cluster-autoscaler (pinned chart), so the spot GPU group grows from 0
when a job's pods are pending and returns to 0 once they are gone.

Why cluster-autoscaler and not Karpenter: the GPU group is an EKS managed node group, which the
autoscaler drives as it is (its Auto Scaling group carries the auto-discovery tags EKS adds,
`k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`). Scaling from 0: for a
managed node group the autoscaler reads the labels and taints with eks:DescribeNodegroup and cpu,
memory and GPUs from the instance type (cloudprovider/aws aws_manager.go buildNodeFromTemplate,
cluster-autoscaler-1.35.2); ephemeral-storage only from a node-template tag, which the GPU group
carries (trainstack/infra/aws/cluster.py, trainstack/infra/aws/node_disk.py): the trainer requests local disk. Karpenter would replace the node group with its own
NodePool/EC2NodeClass, an interruption queue and a wider IAM policy: more moving parts for one group.

Least privilege (IRSA, this one service account): it may change the size only of Auto Scaling groups
tagged as this cluster's, and describe only this cluster's node groups.

Timing, with the flags set below (the autoscaler's defaults, made explicit): a pending GPU pod
triggers a scale-up within seconds (scan interval 10 s); a GPU node whose GPUs no running pod
requests is removed after `scale-down-unneeded-time` (10 min), and never within
`scale-down-delay-after-add` (10 min) of a scale-up. A running trainer is never evicted for a
scale-down: its pods use emptyDir volumes (`skip-nodes-with-local-storage`).

ProvisioningRequests (only when a Kueue Topology needs them, `provisioning_requests`): Kueue asks the
autoscaler for a job's nodes before it places the pods on them, by ProvisioningRequest
(autoscaling.x-k8s.io). The autoscaler serves them with `--enable-provisioning-requests`
(cluster-autoscaler-1.35.2 config/flags/flags.go; both classes, check-capacity and
best-effort-atomic-scale-up, main.go). Chart 9.59.0's ClusterRole already grants it provisioningrequests
and their status, and the PodTemplates they name (templates/clusterrole.yaml), but the chart ships no
CRD: the stack creates it from the autoscaler's repository at the image's tag (crds/). Kueue enables
its provisioning controller only if the API is served when it starts (kueue v0.19.2
cmd/kueue/main.go, ServerSupportsProvisioningRequest), so the CRD is what the platform waits for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from trainstack.infra.aws.cluster import SYSTEM_NODE_LABELS, EksCluster
from trainstack.infra.aws.irsa import IrsaRole, IrsaRoleArgs
from trainstack.infra.core import namespaces
from trainstack.infra.core.versions import (
    CLUSTER_AUTOSCALER_CHART,
    CLUSTER_AUTOSCALER_IMAGE,
    CLUSTER_AUTOSCALER_IMAGE_TAGS,
)

NAMESPACE = namespaces.CLUSTER_AUTOSCALER
SERVICE_ACCOUNT = "cluster-autoscaler"
SCALE_DOWN_UNNEEDED_TIME = "10m"
SCALE_DOWN_DELAY_AFTER_ADD = "10m"
PROVISIONING_REQUEST_CRD = Path(__file__).parent / "crds" / "provisioningrequests.autoscaling.x-k8s.io.yaml"
# sha256 of the upstream file the CRD is vendored from (the vendored file from its `---` line on; the
# comment header above it is ours): a bump of the file must change this too, and its header.
PROVISIONING_REQUEST_CRD_SHA256 = "064b0c2c6156bdf39225a11a7d3e199107e1126c714f336e695a269395946782"

# Read-only calls the autoscaler makes to discover groups and build node templates. These actions
# take no resource-level permissions in IAM, hence "*".
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
SCALE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


@dataclass(frozen=True, kw_only=True)
class ClusterAutoscalerArgs:
    cluster: EksCluster  # its name, version, account, OIDC provider, Kubernetes provider and node groups
    region: str
    tags: Mapping[str, str] = field(default_factory=dict)
    # Serve Kueue's ProvisioningRequests (a GPU pool whose Kueue Topology scales from zero): the flag and the CRD.
    provisioning_requests: bool = False


def autoscaler_policy(cluster_name: str, partition: str, account_id: str, region: str) -> str:
    """Scale only this cluster's groups (by the tag EKS puts on them), describe only its node groups."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "Discover", "Effect": "Allow", "Action": list(DESCRIBE_ACTIONS), "Resource": "*"},
            {
                "Sid": "ScaleThisClustersGroups",
                "Effect": "Allow",
                "Action": list(SCALE_ACTIONS),
                "Resource": "*",
                "Condition": {"StringEquals": {
                    f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned",
                    "aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true",
                }},
            },
            {
                "Sid": "ReadThisClustersNodeGroups",
                "Effect": "Allow",
                "Action": "eks:DescribeNodegroup",
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*/*",
            },
        ],
    }, sort_keys=True)


def provisioning_request_crd() -> dict[str, Any]:
    """The ProvisioningRequest CustomResourceDefinition, as the autoscaler's repository has it (crds/)."""
    return yaml.safe_load(PROVISIONING_REQUEST_CRD.read_text())


def autoscaler_values(args: ClusterAutoscalerArgs, role_arn: pulumi.Input[str]) -> dict[str, Any]:
    provisioning = {"enable-provisioning-requests": "true"} if args.provisioning_requests else {}
    return {
        "cloudProvider": "aws",
        "awsRegion": args.region,
        "autoDiscovery": {"clusterName": args.cluster.cluster_name},
        "image": {"repository": CLUSTER_AUTOSCALER_IMAGE,
                  "tag": CLUSTER_AUTOSCALER_IMAGE_TAGS[args.cluster.kubernetes_version]},
        "rbac": {"serviceAccount": {"name": SERVICE_ACCOUNT,
                                    "annotations": {"eks.amazonaws.com/role-arn": role_arn}}},
        # On the system group, which never scales to zero.
        "nodeSelector": dict(SYSTEM_NODE_LABELS),
        "extraArgs": {
            "scale-down-unneeded-time": SCALE_DOWN_UNNEEDED_TIME,
            "scale-down-delay-after-add": SCALE_DOWN_DELAY_AFTER_ADD,
            "skip-nodes-with-local-storage": "true",
            "expander": "least-waste",
            **provisioning,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "600Mi"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                     "capabilities": {"drop": ["ALL"]}},
    }


class ClusterAutoscaler(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]
    namespace: pulumi.Output[str]
    # What Kueue must find served when it starts (the ProvisioningRequest CRD); empty without provisioning_requests.
    provisioning_request_api: list[pulumi.Resource]

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:aws:ClusterAutoscaler", name, None, opts)
        cluster = args.cluster
        role = IrsaRole(f"{name}-role", IrsaRoleArgs(
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            inline_policy=pulumi.Output.all(cluster.cluster_name, cluster.partition, cluster.account_id).apply(
                lambda values: autoscaler_policy(values[0], values[1], values[2], args.region)),
            tags=args.tags,
        ), opts=pulumi.ResourceOptions(parent=self))
        self.provisioning_request_api = []
        if args.provisioning_requests:
            crd = provisioning_request_crd()
            self.provisioning_request_api.append(k8s.apiextensions.v1.CustomResourceDefinition(
                f"{name}-provisioning-request-crd", metadata=crd["metadata"], spec=crd["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider)))
        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="cluster-autoscaler",
                namespace=NAMESPACE,
                create_namespace=True,
                chart=CLUSTER_AUTOSCALER_CHART.chart,
                version=CLUSTER_AUTOSCALER_CHART.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CLUSTER_AUTOSCALER_CHART.repo),
                values=autoscaler_values(args, role.role_arn),
            ),
            # A node to run on first; on destroy it goes before the groups it scales.
            # The autoscaler watches ProvisioningRequests from its start once the flag is on: the CRD first.
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider,
                                        depends_on=[cluster.system_node_group, cluster.gpu_node_group,
                                                    *self.provisioning_request_api]),
        )
        self.role_arn = role.role_arn
        self.namespace = release.namespace
        self.register_outputs({"roleArn": self.role_arn, "namespace": self.namespace})
