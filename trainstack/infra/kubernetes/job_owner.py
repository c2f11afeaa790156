"""The job owner: one ConfigMap every training job names as its owner, so `pulumi destroy` removes them all.

Jobs that `trainstack submit` installs are Helm releases outside Pulumi's state, and they hold what
Pulumi deletes: the shared claim (kubernetes.io/pvc-protection keeps a claim while a pod uses it),
the queues (a ClusterQueue keeps its kueue.x-k8s.io/resource-in-use finalizer while a Workload holds
its quota, kubernetes-sigs/kueue v0.19.2 pkg/controller/core/clusterqueue_controller.go:193-200) and
Kueue itself (a Workload keeps that finalizer until Kueue's job reconciler removes it once its Job is
gone, pkg/controller/jobframework/reconciler.go finalize, and the Kueue release's uninstall deletes
its CRDs and controller). pulumi-kubernetes waits for each delete until the object is gone, 10
minutes unless customTimeouts says otherwise, then fails the destroy ("finalizers might be
preventing deletion"; pulumi/pulumi-kubernetes provider/pkg/await/await.go Deletion,
await/condition/deleted.go): the GPU pools and the cluster, deleted after them, would keep running.

So every job's Job and TensorBoard Deployment carry an ownerReference to this ConfigMap (the chart's
`owner` value, `blockOwnerDeletion: true`, not a controller reference: Kueue looks only at a
controller owner, pkg/controller/jobframework/integrationmanager.go IsOwnerManagedByKueueForObject).
pulumi-kubernetes deletes with foreground propagation unless told otherwise
(provider/pkg/metadata/overrides.go DeletionPropagation), so the ConfigMap stays until the garbage
collector has deleted every Job that names it, each Job's pods (after their grace period: the final
checkpoint reaches the bucket) and Kueue's Workloads
(kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion). The ConfigMap
depends on the namespace, the claim, the ServiceAccount, Kueue and the GPU pools: Pulumi deletes it
first and those only after it, while Kueue still runs to clear its finalizers.

The pulumi-kubernetes lines cited here were read at commit 94977969 (27 commits after v4.32.0), not at
the pinned 4.34.2, which is newer than the snapshot read.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Fixed, like the ServiceAccount: the stack job and every `trainstack submit` job name the same owner.
JOB_OWNER = "trainstack-jobs"
# Time for the garbage collector to delete every job: the pods' grace period (the chart's
# job.terminationGracePeriodSeconds, for the final checkpoint) plus Kueue's and the Job controller's work.
# pulumi-kubernetes hands customTimeouts.delete to its delete await (provider/pkg/provider/provider.go
# Delete, Timeout: req.Timeout; metadata/overrides.go TimeoutDuration), 10 minutes without it.
DELETE_TIMEOUT = "30m"
PURPOSE = ("owner of every training job: pulumi destroy deletes this ConfigMap in the foreground, and Kubernetes "
           "then deletes every Job and TensorBoard Deployment whose ownerReferences name it (docs/jobs.md)")
# The ConfigMap fields whose change replaces it (see job_owner): kept out of every diff.
NEVER_DIFFED = ["data", "binaryData", "immutable"]


def job_owner(name: str, *, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions) -> k8s.core.v1.ConfigMap:
    """The ConfigMap every job names as its owner; `opts` depend on what the jobs use, so it is created
    after it and deleted before it.

    A replace of this ConfigMap deletes every job: pulumi-kubernetes deletes a named object before it
    creates it again, with the same foreground delete destroy relies on, and the stack job's values get
    a new uid. So nothing here may ever be replaced. The explanation lives in an annotation (metadata is
    updated in place; only name and namespace force a replace, provider/pkg/provider/diff.go
    metadataForceNewProperties). A ConfigMap's data, binaryData and `immutable` are replace-on-change
    (diff.go, enableConfigMapMutable off by default): stacks brought up before this held a README in
    data and `immutable: true`, which ignore_changes keeps out of every diff. Its URN
    (`<platform>-job-owner`, parented to the TrainingPlatform) is part of this too: a rename or a new
    parent needs an alias, or Pulumi deletes the old owner.
    """
    return k8s.core.v1.ConfigMap(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=JOB_OWNER, namespace=namespace,
            annotations={"trainstack.dev/purpose": PURPOSE}),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            ignore_changes=NEVER_DIFFED, custom_timeouts=pulumi.CustomTimeouts(delete=DELETE_TIMEOUT))),
    )


def owner_reference(uid: pulumi.Input[str]) -> dict[str, Any]:
    """The chart's `owner` value: the ownerReference its Job and TensorBoard Deployment carry."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": JOB_OWNER, "uid": uid}


def owner_values(owner: k8s.core.v1.ConfigMap) -> dict[str, Any]:
    return {"owner": owner_reference(owner.metadata.uid)}
