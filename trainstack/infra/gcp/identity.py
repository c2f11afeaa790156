"""Service accounts: one for the nodes (logs, metrics, image pulls), one for the job (its bucket only).

The job's Google service account is reached through GKE Workload Identity: the job's Kubernetes
service account may impersonate it, and nothing else may. No service-account key is ever created.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.core.contracts import WorkloadIdentity
from trainstack.infra.core.ordering import available_after
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.gcp.naming import service_account_id

# The role Google made for node service accounts: logging, monitoring, metadata. Image streaming adds
# Service Usage Consumer in the project that holds the images (ours) for nodes that do not run as the
# default account (cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements").
IMAGE_STREAMING_ROLE = "roles/serviceusage.serviceUsageConsumer"
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", IMAGE_STREAMING_ROLE)
JOB_BUCKET_ROLE = "roles/storage.objectUser"  # read, write and delete objects; not the bucket's settings
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GKE_SERVICE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"


def workload_identity_member(project: str, namespace: str, service_account: str) -> str:
    return f"serviceAccount:{project}.svc.id.goog[{namespace}/{service_account}]"


@dataclass(frozen=True, kw_only=True)
class NodeServiceAccountArgs:
    project: str
    cluster_name: str


class NodeServiceAccount(pulumi.ComponentResource):
    email: pulumi.Output[str]  # available once its roles are granted
    member: pulumi.Output[str]

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:NodeServiceAccount", name, None, opts)
        child = child_options(self, None, opts)
        account = gcp.serviceaccount.Account(
            name, project=args.project, account_id=service_account_id(args.cluster_name, "nodes"),
            display_name=f"trainstack nodes of {args.cluster_name}", opts=child)
        grants = [gcp.projects.IAMMember(f"{name}-{role.rsplit('/', 1)[1]}", project=args.project, role=role,
                                         member=account.member, opts=child) for role in NODE_ROLES]
        # Nodes that boot before their roles exist cannot write logs: hand out the email after them.
        self.email = available_after(account.email, *grants)
        self.member = account.member
        self.register_outputs({"email": self.email})


@dataclass(frozen=True, kw_only=True)
class JobIdentityArgs:
    project: str
    cluster_name: str
    namespace: str
    service_account: str  # the Kubernetes ServiceAccount every job runs as (trainstack/infra/kubernetes/job_service_account.py)
    # The account the stack job ran as before every job shared one (its name): still trusted, so jobs
    # started then keep their bucket access through the upgrade. It grants nothing new: whoever can run
    # a pod in the namespace can already run it as `service_account`.
    previous_service_account: str | None = None
    bucket_name: pulumi.Input[str]
    cluster: pulumi.Resource  # the identity pool <project>.svc.id.goog exists once the cluster does


class JobIdentity(pulumi.ComponentResource):
    identity: WorkloadIdentity  # the annotation the job's service account carries
    email: pulumi.Output[str]

    def __init__(self, name: str, args: JobIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:JobIdentity", name, None, opts)
        child = child_options(self, None, opts)
        account = gcp.serviceaccount.Account(
            name, project=args.project, account_id=service_account_id(args.cluster_name, "job"),
            display_name=f"trainstack job {args.namespace}/{args.service_account}", opts=child)
        bucket_access = gcp.storage.BucketIAMMember(
            f"{name}-bucket", bucket=args.bucket_name, role=JOB_BUCKET_ROLE, member=account.member, opts=child)
        # One binding per trusted account. The previous account keeps the resource name it had, so an
        # upgrade adds the new binding and deletes none: IAMMember is not authoritative, and deleting a
        # replaced binding would remove the same member granted by another resource.
        trusted = [args.service_account]
        if args.previous_service_account not in (None, args.service_account):
            trusted.insert(0, args.previous_service_account)
        bindings = [gcp.serviceaccount.IAMMember(
            f"{name}-workload-identity" if index == 0 else f"{name}-workload-identity-{account_name}",
            service_account_id=account.name,
            role=WORKLOAD_IDENTITY_USER,
            member=workload_identity_member(args.project, args.namespace, account_name),
            opts=child_options(self, None, opts, depends_on=[args.cluster]),
        ) for index, account_name in enumerate(trusted)]
        # A job started before both grants exist fails its first GCS call: the annotation waits for them.
        self.email = available_after(account.email, bucket_access, *bindings)
        self.identity = WorkloadIdentity(service_account_annotations={GKE_SERVICE_ACCOUNT_ANNOTATION: self.email})
        self.register_outputs({"email": self.email})
