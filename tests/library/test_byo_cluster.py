"""TrainingPlatform on a cluster you bring: nothing cluster-wide unless asked, an existing Kueue used by name.

Job.queue's documented default (false) is what happens: no Kueue CRDs and webhooks land on a cluster that
may already run its own. Asked for (queue), Kueue and the job's queue are installed; with installKueue
false the job goes to the LocalQueue the cluster already has.
"""

import pulumi
import pytest

from tests.library.test_cluster_parts import KUBECONFIG, run
from trainstack import components

IMAGE = "registry.example.com/trainstack@sha256:" + "ab" * 32


def platform(**job) -> None:
    platform = components.TrainingPlatform("platform", components.TrainingPlatformArgs(
        kubeconfig=KUBECONFIG, gpu=components.GpuNodes(gpus_per_node=1), bucket=components.Bucket(uri="s3://b"),
        image_ref=IMAGE, shared_storage=components.SharedStorage(size="1Ti", storage_class_name="efs"),
        install_kueue=job.pop("install_kueue", None), job=components.Job(enabled=True, **job)))
    pulumi.export("serviceAccount", platform.service_account_name)
    pulumi.export("namespace", platform.namespace)
    pulumi.export("queue", platform.local_queue_name)


@pytest.mark.parametrize(("job", "installs", "queue"), [
    ({}, False, None),
    ({"queue": True}, True, "training"),
    ({"queue": True, "queue_name": "team-a", "install_kueue": False}, False, "team-a"),
], ids=["default", "asked", "existing-kueue"])
def test_kueue_is_installed_only_when_asked_and_an_existing_one_is_used_by_name(job, installs, queue):
    result, stopped = run(lambda: platform(**job))
    assert not stopped, stopped
    kueue = [r for r in result.registrations if r.name.startswith("platform-kueue")]
    assert bool(kueue) is installs, [r.name for r in kueue]
    release = next(r for r in result.by_type("kubernetes:helm.sh/v3:Release") if r.name == "train")
    assert release.inputs["values"].get("kueue", {}).get("queueName") == queue
    # The identity a user's IRSA role or Workload Identity binding must trust, and where it lives.
    assert result.exports["serviceAccount"] == "trainstack-jobs" and result.exports["namespace"] == "default"
    assert result.exports.get("queue") == queue
