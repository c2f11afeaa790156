"""`trainstack submit`: what reaches the cluster is the chart rendered with valid, per-job values."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from tests.jobs.conftest import without_queue
from tests.workloads.chart import KUBERNETES_VERSION, one, render, trainer

from .kueue_schema import validate_workload, workload_for

STACKS = ("aws", "gcp", "gcp-a3")


# What submit reads before it installs: helm's version, the names in use, pods of an earlier job of the
# name, the namespace's LimitRanges, the job owner's uid.
READS_BEFORE_INSTALL = ["helm version", "helm list", "kubectl get", "kubectl get", "kubectl get"]

def _installs(cluster):
    return [c for c in cluster.calls if c["tool"] == "helm" and c["argv"][0] == "install"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_objects_sent_validate_strictly(stack, cluster, cli, outputs_file, stack_exports):
    code, out, err = cli("submit", "exp-a", "--outputs", outputs_file(stack), "--pods", "1:2",
                         "--", "--max-steps", "50", "--lr", "3e-4")
    assert (code, err) == (0, ""), err
    [install] = _installs(cluster)
    argv = install["argv"]
    assert argv[1] == "exp-a" and argv[argv.index("--values") + 1] == "-"
    values = json.loads(install["stdin"])
    submission = stack_exports(stack)["jobSubmission"]
    namespace = submission["namespace"]
    assert argv[argv.index("--namespace") + 1] == namespace
    objects = render(values, release="exp-a", namespace=namespace)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    job = one(objects, "Job")
    if submission["queueName"]:  # what Kueue makes of the Job passes Kueue's own CRD schema
        validate_workload(workload_for(job))
    args = trainer(objects)["args"]
    # Its own bucket prefix, its own run directory, its own flags.
    assert args[args.index("--snapshot-uri") + 1] == f"{submission['bucketUri']}/runs/exp-a"
    assert args[args.index("--out") + 1].endswith("/runs/exp-a")
    assert args[args.index("--max-steps") + 1] == "50" and args[args.index("--lr") + 1] == "3e-4"
    labels = job["metadata"].get("labels", {})
    assert labels.get("kueue.x-k8s.io/queue-name") == submission["queueName"]
    # The stack's own ServiceAccount, the one its cloud identity trusts: the release creates none.
    assert not [obj for obj in objects if obj["kind"] == "ServiceAccount"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == submission["serviceAccount"]
    assert "submitted exp-a" in out


def test_a_sweep_submits_one_job_per_point(cluster, cli, outputs_file):
    code, out, err = cli("submit", "lrs", "--outputs", outputs_file("aws"), "--sweep", "lr=3e-4,6e-4,1e-3",
                         "--", "--max-steps", "50")
    assert code == 0, err
    installs = _installs(cluster)
    assert [c["argv"][1] for c in installs] == ["lrs-lr-3e-4", "lrs-lr-6e-4", "lrs-lr-1e-3"]
    for install, lr in zip(installs, ("3e-4", "6e-4", "1e-3"), strict=True):
        values = json.loads(install["stdin"])
        args = trainer(render(values, release=install["argv"][1]))["args"]
        assert args[args.index("--lr") + 1] == lr
        assert values["podLabels"] == {"trainstack.dev/sweep": "lrs"}


def test_a_grid_multiplies_and_names_stay_dns_labels(cluster, cli, outputs_file):
    code, _, err = cli("submit", "g", "--outputs", outputs_file("aws"), "--sweep", "lr=1.5e-3,3E-4",
                       "--sweep", "warmup-steps=10,20")
    assert code == 0, err
    assert [c["argv"][1] for c in _installs(cluster)] == [
        "g-lr-1-5e-3-warmup-steps-10", "g-lr-1-5e-3-warmup-steps-20", "g-lr-3e-4-warmup-steps-10",
        "g-lr-3e-4-warmup-steps-20"]


def test_any_torchrun_target_with_another_image(cluster, cli, outputs_file):
    code, _, err = cli("submit", "bench", "--outputs", outputs_file("gcp"), "--module", "training.bench",
                       "--image", "ghcr.io/me/img:1.0", "--", "--steps", "3")
    assert code == 0, err
    values = json.loads(_installs(cluster)[0]["stdin"])
    assert values["command"] == {"module": "training.bench", "script": "", "args": ["--steps", "3"]}
    assert values["image"] == {"repository": "ghcr.io/me/img", "digest": "", "tag": "1.0"}
    for obj in render(values, release="bench"):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_same_name_twice_never_replaces_the_job(cluster, cli, outputs_file):
    path = outputs_file("aws")
    assert cli("submit", "exp", "--outputs", path)[0] == 0
    code, _, err = cli("submit", "exp", "--outputs", path)
    assert code == 2
    assert err.count("\n") == 1 and "a job named exp already exists" in err and "pick another NAME" in err
    # The first: helm's version, the names, earlier pods of the name, the LimitRanges, the job owner's uid, the
    # install. The second: no second install, no upgrade.
    assert cluster.verbs() == [*READS_BEFORE_INSTALL, "helm install", "helm version", "helm list"]


def test_a_sweep_point_that_clashes_stops_the_whole_sweep(cluster, cli, outputs_file):
    path = outputs_file("aws")
    assert cli("submit", "s-lr-1e-3", "--outputs", path)[0] == 0
    code, _, err = cli("submit", "s", "--outputs", path, "--sweep", "lr=3e-4,1e-3")
    assert code == 2 and "s-lr-1e-3 already exists" in err
    assert [c["argv"][1] for c in _installs(cluster)] == ["s-lr-1e-3"]


def test_the_stacks_own_job_name_is_taken(cluster, cli, outputs_file):
    def with_stack_job(exports):
        exports["jobSubmission"]["stackJob"] = "train"

    code, _, err = cli("submit", "train", "--outputs", outputs_file("aws", with_stack_job))
    assert code == 2 and "a job named train already exists" in err
    assert "helm install" not in cluster.verbs()


def test_the_workload_schema_is_strict(cluster, cli, outputs_file):
    assert cli("submit", "exp", "--outputs", outputs_file("aws"))[0] == 0
    job = one(render(json.loads(_installs(cluster)[0]["stdin"]), release="exp"), "Job")
    workload = workload_for(job)
    workload["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["bogus"] = 1
    with pytest.raises(AssertionError, match="bogus"):
        validate_workload(workload)


def test_a_cluster_that_refuses_exits_1_with_helms_line(cluster, cli, outputs_file):
    cluster.set_state({"install_error": "Error: INSTALLATION FAILED: admission webhook denied the request"})
    code, _, err = cli("submit", "s", "--outputs", outputs_file("aws"), "--sweep", "lr=3e-4,1e-3")
    assert code == 1
    assert err == ("trainstack submit: helm install failed: Error: INSTALLATION FAILED: admission webhook denied "
                   "the request (submitted before it: none)\n")
    assert len(_installs(cluster)) == 1  # the sweep stops at the first refusal


@pytest.mark.parametrize("stack", STACKS)
def test_outputs_of_an_older_stack_share_the_identity_the_stacks_job_holds(stack, cluster, cli, outputs_file):
    def older_with_stack_job(exports):
        del exports["jobSubmission"]["serviceAccount"]
        exports["jobSubmission"]["identityServiceAccount"] = exports["jobSubmission"]["stackJob"] = "train"

    assert cli("submit", "exp", "--outputs", outputs_file(stack, older_with_stack_job))[0] == 0
    objects = render(json.loads(_installs(cluster)[0]["stdin"]), release="exp")
    assert not [obj for obj in objects if obj["kind"] == "ServiceAccount"]  # the stack job's release owns it
    assert one(objects, "Job")["spec"]["template"]["spec"]["serviceAccountName"] == "train"


def test_tensorboard_is_opt_in(cluster, cli, outputs_file):
    path = outputs_file("gcp-a3")
    assert cli("submit", "plain", "--outputs", path)[0] == 0
    assert cli("submit", "watched", "--outputs", path, "--tensorboard")[0] == 0
    kinds = {c["argv"][1]: {o["kind"] for o in render(json.loads(c["stdin"]), release=c["argv"][1])}
             for c in _installs(cluster)}
    assert "Deployment" not in kinds["plain"] and "Deployment" in kinds["watched"]


def test_a_module_job_is_not_promised_the_trainers_results(cluster, cli, outputs_file):
    code, out, err = cli("submit", "probe", "--outputs", outputs_file("aws"), "--module", "mypkg.probe", "--", "-x")
    assert code == 0, err
    assert "results in" not in out and "no --snapshot-uri" in out


def test_a_multi_node_job_without_a_queue_is_warned(cluster, cli, outputs_file):
    code, _, err = cli("submit", "big", "--outputs", outputs_file("gcp", without_queue), "--pods", "2")
    assert code == 0 and "warning: no queue on this stack" in err
    assert [c["argv"][0] for c in _installs(cluster)] == ["install"]


def test_two_submits_that_race_fail_with_helms_own_line(cluster, cli, outputs_file):
    # The name was free when submit listed the releases, taken when helm stored the release.
    cluster.set_state({"install_race": "exp"})
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"))
    assert code == 1 and out == ""
    assert err == ("trainstack submit: helm install failed: Error: INSTALLATION FAILED: release: already exists "
                   "(submitted before it: none)\n")


@pytest.mark.parametrize("cluster_owner", [None, "0f0e0d0c-0000-4000-8000-000000000000"])
def test_outputs_naming_another_job_owner_are_refused_before_install(cluster, cli, outputs_file, cluster_owner):
    # The stack destroyed and brought up again since the outputs were saved: Kubernetes' garbage collector
    # would delete a Job whose owner is gone as soon as it is created.
    cluster.set_state({"configmaps": {} if cluster_owner is None else {"trainstack-jobs": cluster_owner}})
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("gcp"))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "they are from an earlier pulumi up" in err and "save the outputs again" in err
    assert (cluster_owner or "has none") in err
    assert cluster.verbs() == READS_BEFORE_INSTALL


def _without_owner(exports):
    """Outputs saved before the job owner existed: no `owner` in the job's values or any pool's."""
    submission = exports["jobSubmission"]
    for values in [submission["values"], *(pool["values"] for pool in submission.get("pools", {}).values())]:
        values.pop("owner", None)


def test_outputs_from_before_the_owner_are_refused_on_a_cluster_that_has_it(cluster, cli, outputs_file):
    # Saved before the first pulumi up that made the owner: the job would go out with no ownerReference,
    # and pulumi destroy would wait on it (the claim's pvc-protection, the ClusterQueue's finalizer).
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("gcp", _without_owner))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "from before the job owner existed" in err and "save the outputs again" in err
    assert cluster.verbs() == READS_BEFORE_INSTALL


def test_outputs_and_a_cluster_from_before_the_owner_submit_an_unowned_job(cluster, cli, outputs_file):
    cluster.set_state({"configmaps": {}})
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("gcp", _without_owner))
    assert code == 0, err
    assert cluster.verbs() == [*READS_BEFORE_INSTALL, "helm install"]
    [install] = _installs(cluster)
    assert "owner" not in json.loads(install["stdin"])


def test_a_submitter_who_cannot_update_the_owners_finalizers_is_told_the_permission(cluster, cli, outputs_file):
    # Where the API server runs OwnerReferencesPermissionEnforcement (OpenShift does), a blocking
    # ownerReference needs update on the owner's finalizers; the aggregated edit role lacks it.
    cluster.set_state({"install_error": 'Error: INSTALLATION FAILED: jobs.batch "exp" is forbidden: cannot set '
                       "blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , "
                       "<nil>"})
    code, out, err = cli("submit", "exp", "--outputs", outputs_file("aws"))
    assert (code, out) == (1, "")
    helm_line, fix = err.splitlines()
    assert "is forbidden" in helm_line
    assert fix == ("trainstack submit: fix: your identity needs update on configmaps/finalizers (trainstack-jobs) "
                   "in namespace default to name the job owner; see docs/jobs.md, pulumi destroy")


def test_the_old_nodes_flag_submits_the_same_job_with_one_deprecation_line(cluster, cli, outputs_file):
    code, _, err = cli("submit", "exp-new", "--outputs", outputs_file("aws"), "--pods", "1:2")
    assert (code, err) == (0, ""), err
    code, _, err = cli("submit", "exp-old", "--outputs", outputs_file("aws"), "--nodes", "1:2")
    assert code == 0, err
    assert err.splitlines() == ["trainstack submit: warning: --nodes is deprecated: use --pods (the same pods of the job)"]
    new, old = (json.loads(c["stdin"]) for c in _installs(cluster))
    new["job"].pop("submissionId"), old["job"].pop("submissionId")  # one per install
    assert new["job"] == old["job"] and new["job"]["pods"] == {"min": 1, "max": 2}


def test_both_pods_and_nodes_is_refused_in_one_line(cluster, cli, outputs_file):
    code, _, err = cli("submit", "exp", "--outputs", outputs_file("aws"), "--pods", "1:2", "--nodes", "1:2")
    assert code == 2 and err.strip().splitlines() == [err.strip()] and "both --pods and --nodes" in err
    assert _installs(cluster) == []


def exported_before_the_pod_rename(exports):
    """The outputs of a stack last deployed before the pod/node rename: its shared values, and each pool's,
    carry the GPU count per pod under the old chart name resources.gpusPerNode."""
    submission = exports["jobSubmission"]
    for values, gpus in [(submission["values"], submission["gpusPerNode"]),
                         *((pool["values"], pool["gpusPerNode"]) for pool in submission["pools"].values())]:
        values.setdefault("resources", {})["gpusPerNode"] = gpus


@pytest.mark.parametrize("stack", STACKS)
def test_outputs_of_a_stack_deployed_before_the_pod_rename_still_submit(stack, cluster, cli, outputs_file,
                                                                        stack_exports):
    code, _, err = cli("submit", "exp", "--outputs", outputs_file(stack, exported_before_the_pod_rename),
                       "--pods", "1:2", "--", "--max-steps", "50")
    assert (code, err) == (0, ""), err
    [install] = _installs(cluster)
    values = json.loads(install["stdin"])
    gpus = stack_exports(stack)["jobSubmission"]["gpusPerNode"]
    assert "gpusPerNode" not in values["resources"] and values["resources"]["gpusPerPod"] == gpus
    [trainer_container] = [c for c in one(render(values, release="exp"), "Job")["spec"]["template"]["spec"]["containers"]
                           if c["name"] == "trainer"]
    assert trainer_container["resources"]["limits"]["nvidia.com/gpu"] == gpus


def test_the_stack_exports_no_gpu_count_per_pod(stack_exports):
    # The CLI sets it for each job; shared, it would meet the CLI's own under another name after a rename
    # (an older CLI's chart knows only resources.gpusPerNode and refuses any other key under resources).
    for stack in STACKS:
        submission = stack_exports(stack)["jobSubmission"]
        for values in [submission["values"], *(pool["values"] for pool in submission["pools"].values())]:
            assert not {"gpusPerPod", "gpusPerNode"} & set(values.get("resources", {})), stack
