"""`pulumi destroy` with CLI-submitted jobs running: what the mocked graph and the rendered chart show.

Pulumi deletes a resource before everything it depends on, so "A is deleted before B" is "A depends
on B", directly or through others. Every job names the job owner (trainstack/infra/kubernetes/job_owner.py) as its owner;
destroy deletes that ConfigMap in the foreground first, which makes Kubernetes delete every job and
wait for its pods, and only then what the jobs used (claim, ServiceAccount, queues, Kueue, the
namespace, the GPU pools). The bucket is kept. What a mock cannot show (the API server's garbage
collector, Kueue's finalizers) is in docs/jobs.md with the upstream code it follows.
"""

from __future__ import annotations

import json
import uuid

import kubernetes_validate
import pytest

from tests.aws import stack_runs as aws_runs
from tests.gcp import stack_runs as gcp_runs
from tests.gcp import test_a3
from tests.workloads.chart import KUBERNETES_VERSION, VALUE_SETS, load_values, render
from trainstack.infra.core.versions import KUEUE_CHART
from trainstack.infra.kubernetes.job_owner import DELETE_TIMEOUT, JOB_OWNER

RUNS = {
    "aws": lambda: aws_runs.run_main(aws_runs.config_with({"trainstack:job": {"queue": True}})),
    "gcp": lambda: gcp_runs.run_main(),
    "gcp-a3": lambda: test_a3.run(),
}
DELETED_ON_DESTROY = ("eks:index:Cluster", "eks:index:ManagedNodeGroup", "gcp:container/cluster:Cluster",
                      "gcp:container/nodePool:NodePool")
GPU_POOLS = ("eks:index:ManagedNodeGroup", "gcp:container/nodePool:NodePool")
KEPT = ("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket")
# What a running job uses, and Pulumi must delete only once the jobs are gone.
USED_BY_JOBS = ("kubernetes:core/v1:PersistentVolumeClaim", "kubernetes:core/v1:ServiceAccount",
                "kubernetes:core/v1:Namespace", "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
                "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
# Annotation pulumi-kubernetes reads for a delete's propagation (provider/pkg/metadata/overrides.go
# DeletionPropagation: foreground unless it says orphan or background).
DELETION_PROPAGATION = "pulumi.com/deletionPropagation"


def _type(registration) -> str:
    return registration.urn.split("::")[-2].rsplit("$", 1)[-1]


def _depends_on(result, urn: str) -> set[str]:
    """Every URN `urn` depends on, directly or through others: what Pulumi deletes only after it."""
    seen: set[str] = set()
    frontier = [urn]
    while frontier:
        for dependency in result.by_urn(frontier.pop()).dependencies:
            if dependency not in seen:
                seen.add(dependency)
                frontier.append(dependency)
    return seen


@pytest.fixture(scope="module", params=list(RUNS))
def run(request):
    return request.param, RUNS[request.param]()


def _owner(result):
    [owner] = [r for r in result.by_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"] == JOB_OWNER]
    return owner


def test_destroy_removes_the_nodes_cli_jobs_run_on_and_keeps_the_bucket(run):
    _, result = run
    compute = [r for r in result.registrations if _type(r) in DELETED_ON_DESTROY]
    assert {_type(r) for r in compute} & set(GPU_POOLS)
    for registration in compute:
        assert not registration.retain_on_delete and not registration.protect, registration.urn
    [bucket] = [r for r in result.registrations if _type(r) in KEPT]
    assert bucket.retain_on_delete
    # CLI jobs land only on the stack's GPU pools: the same placement as the stack's own job.
    values = result.exports["jobSubmission"]["values"]
    assert values["nodeSelector"] and values["tolerations"]


def test_destroy_deletes_every_job_first_and_what_they_use_after(run):
    stack, result = run
    owner = _owner(result)
    after_owner = _depends_on(result, owner.urn)
    used = [r for r in result.registrations if _type(r) in USED_BY_JOBS]
    kueue = [r for r in result.by_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart") == KUEUE_CHART.chart]
    # The GPU pools (GKE) and node group (EKS) are in the placement's `ready`: deleted only after the jobs,
    # so the pods stop on live nodes and get their grace period.
    pools = [r for r in result.registrations if _type(r) in GPU_POOLS and "gpu" in r.name]
    assert kueue and pools and {"kubernetes:core/v1:PersistentVolumeClaim",
                                "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"} <= {_type(r) for r in used}
    # Deleted only after the owner, so only after every job is gone: the claim is free (pvc-protection),
    # no Workload holds a ClusterQueue's quota (resource-in-use), and Kueue still runs to clear the
    # Workloads' finalizers and answer its Job webhook while the garbage collector deletes the Jobs.
    for registration in [*used, *kueue, *pools]:
        assert registration.urn in after_owner, f"{stack}: {registration.urn} may be deleted before the jobs"
    # Each queue object after the queue it names, the flavor after its ClusterQueue, Kueue after all of them.
    for queue in result.by_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"):
        assert any(_type(result.by_urn(u)) == "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
                   for u in _depends_on(result, queue.urn))
    for registration in result.registrations:
        if _type(registration).startswith("kubernetes:kueue.x-k8s.io/"):
            assert kueue[0].urn in _depends_on(result, registration.urn)
    # The stack's own job goes before the owner (its values name it); nothing else waits on the owner.
    dependents = {r.urn for r in result.registrations if owner.urn in r.dependencies}
    assert dependents == {r.urn for r in result.by_type("kubernetes:helm.sh/v3:Release")
                          if "owner" in r.inputs.get("values", {})}
    # Foreground (the default), and long enough for the pods' grace period and the final checkpoint.
    assert DELETION_PROPAGATION not in (owner.inputs["metadata"].get("annotations") or {})
    assert owner.delete_timeout == DELETE_TIMEOUT


def test_no_change_to_the_owners_data_ever_replaces_it(run):
    # A replace of the job owner deletes every job: pulumi-kubernetes deletes a named object before it
    # creates it again (foreground, like destroy), and a ConfigMap's data, binaryData and `immutable`
    # are replace-on-change (provider/pkg/provider/diff.go forceNewProperties). Stacks brought up before
    # held a README in data and immutable: true; ignore_changes keeps both out of every diff.
    _, result = run
    owner = _owner(result)
    assert {"data", "binaryData", "immutable"} <= set(owner.ignore_changes)
    # Its explanation is metadata, updated in place; nothing in the fields a change would replace.
    assert "docs/jobs.md" in owner.inputs["metadata"]["annotations"]["trainstack.dev/purpose"]
    assert not {"data", "binaryData", "immutable"} & set(owner.inputs)


def test_every_job_names_the_owner_destroy_deletes(run, stack_exports):
    stack, result = run
    owner = _owner(result)
    # The uid the mocked API server gave the ConfigMap (tests/pulumi_harness.py).
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{owner.type}::{owner.name}"))
    expected = {"apiVersion": "v1", "kind": "ConfigMap", "name": JOB_OWNER, "uid": uid}
    assert result.exports["jobSubmission"]["values"]["owner"] == expected
    assert stack_exports(stack)["jobSubmission"]["values"]["owner"] == expected
    jobs = [release for release in result.by_type("kubernetes:helm.sh/v3:Release")
            if release.inputs.get("chart") != KUEUE_CHART.chart and "job" in release.inputs.get("values", {})]
    # A stack with its own job renders it (gcp-a3 here), so the loop below checks something there.
    assert bool(jobs) == ("enableJobCommand" not in result.exports), stack
    for release in jobs:
        assert release.inputs["values"]["owner"] == expected, release.urn


@pytest.mark.parametrize("stack", list(RUNS))
def test_a_cli_jobs_objects_that_cost_or_hold_the_claim_are_owned(stack, cluster, cli, outputs_file, stack_exports):
    code, _, err = cli("submit", "exp-a", "--outputs", outputs_file(stack), "--pods", "1", "--tensorboard",
                       "--", "--max-steps", "50")
    assert code == 0, err
    [install] = [c for c in cluster.calls if c["tool"] == "helm" and c["argv"][0] == "install"]
    submission = stack_exports(stack)["jobSubmission"]
    objects = render(json.loads(install["stdin"]), release="exp-a", namespace=submission["namespace"])
    owned = {obj["kind"]: obj["metadata"].get("ownerReferences") for obj in objects
             if obj["kind"] in ("Job", "Deployment")}
    assert set(owned) == {"Job", "Deployment"}
    for kind, references in owned.items():
        # Blocking (a foreground delete of the owner waits for it), not a controller (Kueue would
        # then take the owner for a parent job and leave the Job to it).
        assert references == [{**submission["values"]["owner"], "blockOwnerDeletion": True}], kind
    # Every pod that mounts a volume is the Job's or the Deployment's: nothing else holds the claim.
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert obj["kind"] not in ("Pod", "StatefulSet", "DaemonSet", "ReplicaSet"), obj["kind"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_a_chart_without_an_owner_renders_no_owner_reference(value_set):
    objects = render(load_values(value_set))
    assert all("ownerReferences" not in obj["metadata"] for obj in objects)
