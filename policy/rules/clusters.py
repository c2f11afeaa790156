"""The clusters and registries themselves: Workload Identity, secrets encryption, deletion protection,
image scanning and tag immutability."""

from __future__ import annotations

from .common import Resource, Stack, get, is_false, truthy

GKE_CLUSTER = "gcp:container/cluster:Cluster"
FILESTORE = "gcp:filestore/instance:Instance"
# The stack config key that documents a deliberate "off" (a disposable stack torn down often).
DELETION_PROTECTION_KEY = "trainstack:deletionProtection"


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
    """Off only where the stack's config says so: the documented two-step teardown of a disposable stack."""
    if stack.is_set_false(DELETION_PROTECTION_KEY):
        return []
    if resource.type == GKE_CLUSTER and is_false(get(resource.props, "deletionProtection")):
        return [f"deletionProtection is off; keep it on, or set {DELETION_PROTECTION_KEY} false in the stack's "
                "config to record that this stack is disposable"]
    if resource.type == FILESTORE and not truthy(get(resource.props, "deletionProtectionEnabled")):
        return [f"deletionProtectionEnabled must be true (checkpoints live here), or set {DELETION_PROTECTION_KEY} "
                "false in the stack's config"]
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
