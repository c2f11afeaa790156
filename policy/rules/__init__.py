"""The policy pack's rules: name, enforcement level, the one-line reason, and the plain function that checks.

`mandatory` fails `pulumi preview`/`up`; `advisory` prints a warning. Override a level for one stack
with `--policy-pack-config` (see docs/GUARDRAILS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from . import clusters, cost, identity, kubernetes, network, nodes, storage

MANDATORY, ADVISORY = "mandatory", "advisory"


@dataclass(frozen=True)
class Rule:
    name: str
    level: Literal["mandatory", "advisory"]
    reason: str  # one line: why the rule exists
    check: Callable
    scope: Literal["resource", "stack"] = "resource"  # stack rules get every resource at once
    # A rule that reads policy config takes it as keyword arguments; this maps config key -> argument.
    config: tuple[tuple[str, str], ...] = ()


RULES: tuple[Rule, ...] = (
    # --- security: storage -------------------------------------------------------------------------
    Rule("bucket-not-public", MANDATORY, "Snapshots, data sets and exports must never be readable by the internet.",
         storage.bucket_not_public),
    Rule("bucket-public-access-block", MANDATORY,
         "An S3 bucket without a public access block is one ACL or policy away from public.",
         storage.buckets_have_public_access_block, scope="stack"),
    Rule("encryption-at-rest", MANDATORY, "Checkpoints and node disks hold model weights and data: encrypt them at rest.",
         storage.encryption_at_rest),
    Rule("kubernetes-secrets-encryption", ADVISORY,
         "Envelope encryption with a KMS key protects Secrets in etcd beyond the provider's default encryption.",
         clusters.kubernetes_secrets_encryption),
    # --- security: nodes and network ---------------------------------------------------------------
    Rule("imdsv2-required", MANDATORY, "IMDSv1 lets any request a pod can forge read the node's credentials.",
         nodes.imdsv2_required),
    Rule("imds-hop-limit-one", MANDATORY,
         "A hop limit of 1 keeps pods away from the node role entirely; IRSA gives pods their own.",
         nodes.imds_hop_limit_one),
    Rule("node-group-launch-template", MANDATORY,
         "Our launch template is what sets IMDSv2 and disk encryption on EKS nodes.", nodes.node_group_launch_template),
    Rule("launch-template-interfaces-private", MANDATORY,
         "Network interfaces a launch template lists (EFA's) carry our security groups and no public IP.",
         nodes.launch_template_interfaces_private),
    Rule("gke-metadata-server", MANDATORY, "The GKE metadata server keeps the node's service account from pods.",
         nodes.gke_metadata_server),
    Rule("gke-shielded-nodes", MANDATORY, "Shielded nodes verify the boot chain and node identity.",
         nodes.gke_shielded_nodes),
    Rule("gke-node-service-account", MANDATORY,
         "The Compute Engine default service account is project Editor: nodes get a dedicated one.",
         nodes.gke_node_service_account),
    Rule("gke-private-nodes", MANDATORY, "Nodes without public IPs cannot be reached from the internet.",
         network.gke_private_nodes),
    Rule("no-open-ssh-or-nfs", MANDATORY, "SSH and NFS open to 0.0.0.0/0 are probed from the whole internet.",
         network.no_open_ssh_or_nfs),
    Rule("all-traffic-only-within-a-group", MANDATORY,
         "An all-protocol ingress rule (EFA's) admits the security group's own members, never an address range.",
         network.all_traffic_only_within_a_group),
    Rule("no-load-balancer-services", MANDATORY,
         "A LoadBalancer Service exposes the cluster, costs per hour, and blocks VPC teardown when left behind.",
         network.no_load_balancer_services),
    Rule("api-endpoint-restricted", ADVISORY, "A Kubernetes API open to the whole internet invites credential attacks.",
         network.api_endpoint_restricted),
    # --- security: identity ------------------------------------------------------------------------
    Rule("no-service-account-keys", MANDATORY, "Service-account keys are long-lived secrets; Workload Identity needs none.",
         identity.no_service_account_keys),
    Rule("iam-least-privilege", MANDATORY, "Wildcard actions and project-wide Owner/Editor grant far more than a job needs.",
         identity.iam_least_privilege),
    Rule("gke-workload-identity", MANDATORY, "Pods get Google credentials through Workload Identity, never key files.",
         clusters.gke_workload_identity),
    Rule("no-cluster-wide-rbac-for-workloads", MANDATORY,
         "A workload bound cluster-wide can read every namespace's Secrets.",
         kubernetes.no_cluster_wide_rbac_for_workloads,
         config=(("controllerNamespaces", "controller_namespaces"),)),
    # --- reproducibility ----------------------------------------------------------------------------
    Rule("chart-versions-pinned", MANDATORY, "An unpinned chart or add-on changes what is deployed under an unchanged program.",
         kubernetes.chart_versions_pinned),
    Rule("images-pinned-by-digest", MANDATORY, "A tag can be re-pushed; a digest always names the same image.",
         kubernetes.images_pinned_by_digest),
    Rule("registry-scan-on-push", MANDATORY, "Every pushed image is scanned for known vulnerabilities.",
         clusters.registry_scan_on_push),
    Rule("registry-immutable-tags", ADVISORY, "Immutable tags stop a re-push from changing what a tag means.",
         clusters.registry_immutable_tags),
    # --- data safety --------------------------------------------------------------------------------
    Rule("bucket-retained", MANDATORY, "`pulumi destroy` must not take the snapshots and exports with it.",
         storage.bucket_retained),
    Rule("deletion-protection", ADVISORY,
         "Protected clusters and file systems survive a mistaken destroy; trainstack's stacks leave it off so "
         "`pulumi destroy` removes what costs money, and keep results in the retained bucket.",
         clusters.deletion_protection),
    # --- cost ---------------------------------------------------------------------------------------
    Rule("gpu-pool-scales-to-zero", MANDATORY, "Idle GPU nodes cost dollars per hour each; pools scale to zero without a job.",
         cost.gpu_pool_scales_to_zero),
    Rule("gpu-pool-spot-or-reservation", MANDATORY,
         "On-demand GPUs cost several times their spot or reserved price; a pool says so when it means it.",
         cost.gpu_pool_spot_or_reservation),
    Rule("job-ttl", MANDATORY, "Finished Jobs must clean up their pods instead of holding nodes and volumes.",
         kubernetes.job_ttl),
    Rule("budget-present", MANDATORY, "Every stack caps its estimated cost per hour (trainstack:maxHourlyUsd).",
         cost.budget_present, scope="stack"),
    Rule("billing-labels", MANDATORY,
         "Billable resources carry app=trainstack and pulumi-stack=<stack>: cost reports and the orphan audit need them.",
         cost.billing_labels),
)
