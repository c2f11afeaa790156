"""The clusters and registries themselves: Workload Identity, secrets encryption, deletion protection,
image scanning and tag immutability."""

from __future__ import annotations

from .common import Resource, Stack, get, is_false, truthy

GKE_CLUSTER = "gcp:container/cluster:Cluster"
FILESTORE = "gcp:filestore/instance:Instance"
# The stacks have no config key for deletion protection (the GCP program refuses unknown keys): a deliberate
# "off" is the rule itself set to "disabled" in the policy config (an enforcement level Pulumi accepts).
DISABLE_DELETION_PROTECTION = '--policy-pack-config with {"deletion-protection": "disabled"}'


def gke_workload_identity(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == GKE_CLUSTER and not get(resource.props, "workloadIdentityConfig.workloadPool"):
        return ["workloadIdentityConfig.workloadPool must be set (<project>.svc.id.goog): pods get Google "
                "credentials through their Kubernetes service account, never a key file"]
    return []


def kubernetes_secrets_encryption(resource: Resource, stack: Stack) -> list[str]:
    props, kind = resource.props, resource.type
    if kind == "eks:index:Cluster" and not get(props, "encryptionConfigKeyArn"):
        return ["Kubernetes Secrets are not envelope-encrypted with a KMS key (encryptionConfigKeyArn)"]
    if kind == "aws:eks/cluster:Cluster" and not get(props, "encryptionConfig.provider.keyArn"):
        return ["Kubernetes Secrets are not envelope-encrypted with a KMS key (encryptionConfig)"]
    if kind == GKE_CLUSTER and get(props, "databaseEncryption.state") != "ENCRYPTED":
        return ["Kubernetes Secrets are not encrypted with a Cloud KMS key (databaseEncryption)"]
    return []


def deletion_protection(resource: Resource, stack: Stack) -> list[str]:
    """Advisory: trainstack's stacks turn protection off so `pulumi destroy` removes what costs money."""
    if resource.type == GKE_CLUSTER and is_false(get(resource.props, "deletionProtection")):
        return ["deletionProtection is off; keep it on, or, for a disposable stack, run the pack with "
                f"{DISABLE_DELETION_PROTECTION}"]
    if resource.type == FILESTORE and not truthy(get(resource.props, "deletionProtectionEnabled")):
        return ["deletionProtectionEnabled must be true (checkpoints live here), or, for a disposable stack, run "
                f"the pack with {DISABLE_DELETION_PROTECTION}"]
    return []


def registry_scan_on_push(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == "aws:ecr/repository:Repository" and not truthy(get(resource.props, "imageScanningConfiguration.scanOnPush")):
        return ["imageScanningConfiguration.scanOnPush must be true"]
    return []


def registry_immutable_tags(resource: Resource, stack: Stack) -> list[str]:
    if resource.type == "aws:ecr/repository:Repository" and not str(get(resource.props, "imageTagMutability", "MUTABLE")).startswith("IMMUTABLE"):
        return ["tags are mutable: a re-push changes what a tag means (workloads should pull by digest)"]
    if resource.type == "gcp:artifactregistry/repository:Repository" and not truthy(get(resource.props, "dockerConfig.immutableTags")):
        return ["dockerConfig.immutableTags is off: a re-push changes what a tag means"]
    return []
