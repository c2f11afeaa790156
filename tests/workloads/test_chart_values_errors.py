"""Bad values fail the render with a message that names the field: values.schema.json for types
and ranges, templates/_validate.tpl for rules that relate two fields."""

from __future__ import annotations

import helm_python as helm
import pytest

from training.model.build import PRESETS
from trainstack.infra.kubernetes.pod_requests import parse_quantity

from .chart import CHART_DIR, chart, deep_merge, load_values, render

GOOD = load_values("gpu-4x8-queue-pvc")

BAD_VALUES = {
    # id: (override deep-merged onto a good value set, text the error must contain)
    "pods below one": ({"job": {"pods": {"min": 0}}}, "/job/pods/min"),
    "pods as a string": ({"job": {"pods": {"max": "4"}}}, "/job/pods/max"),
    "min above max": ({"job": {"pods": {"min": 5, "max": 4}}}, "job.pods.min (5) must not exceed job.pods.max (4)"),
    "replicas above max": ({"job": {"pods": {"replicas": 6}}}, "job.pods.replicas (6)"),
    "replicas below min": ({"job": {"pods": {"replicas": 1}}}, "job.pods.replicas (1)"),
    "missing image": ({"image": {"repository": ""}}, "/image/repository"),
    "tag inside repository": ({"image": {"repository": "ecr.example/trainstack:latest"}}, "/image/repository"),
    "neither digest nor tag": ({"image": {"digest": "", "tag": ""}}, "image.digest or image.tag"),
    "short digest": ({"image": {"digest": "sha256:abc"}}, "/image/digest"),
    "negative gpus": ({"resources": {"gpusPerPod": -1}}, "/resources/gpusPerPod"),
    "fewer processes than gpus": ({"job": {"procsPerPod": 4}}, "job.procsPerPod (4) must equal resources.gpusPerPod (8)"),
    "typo in a key": ({"job": {"node": {"min": 1}}}, "'/job': additional properties 'node'"),
    "unknown preset": ({"train": {"preset": "gpt3"}}, "/train/preset"),
    "zero steps": ({"train": {"maxSteps": 0}}, "/train/maxSteps"),
    "float batch size": ({"train": {"batchSize": 2.5}}, "/train/batchSize"),
    "unknown rendezvous backend": ({"job": {"rdzvBackend": "static"}}, "/job/rdzvBackend"),
    "last call of zero seconds": ({"job": {"lastCallTimeoutSeconds": 0}}, "/job/lastCallTimeoutSeconds"),
    "last call as a duration": ({"job": {"lastCallTimeoutSeconds": "10s"}}, "/job/lastCallTimeoutSeconds"),
    "etcd backend without etcd": ({"job": {"rdzvBackend": "etcd"}}, "job.rdzvBackend \"etcd\" needs etcd.enabled"),
    "etcd without etcd backend": ({"etcd": {"enabled": True}}, "etcd.enabled is true but job.rdzvBackend is c10d"),
    "multi-node without a pvc": ({"storage": {"pvc": ""}}, "storage.pvc is required when job.pods.max > 1"),
    "tensorboard without a pvc": ({"job": {"pods": {"min": 1, "max": 1}}, "storage": {"pvc": ""},
                                   "tensorboard": {"enabled": True}}, "tensorboard.enabled needs storage.pvc"),
    "tensorboard image without digest or tag": ({"tensorboard": {"enabled": True, "image": {"repository": "r/tb"}}},
                                                "tensorboard.image.digest or tensorboard.image.tag is required"),
    "tensorboard image with a tag inside": ({"tensorboard": {"image": {"repository": "r/tb:2.20"}}},
                                            "/tensorboard/image/repository"),
    "cache from http": ({"storage": {"cache": {"enabled": True, "sourceUri": "https://x/y"}}},
                        "/storage/cache/sourceUri"),
    "cache without a source": ({"storage": {"cache": {"enabled": True}}}, "storage.cache.sourceUri is required"),
    "relative mount path": ({"storage": {"mountPath": "mnt/shared"}}, "/storage/mountPath"),
    "bad memory quantity": ({"resources": {"shmSize": "lots"}}, "/resources/shmSize"),
    "root user": ({"securityContext": {"runAsUser": 0}}, "/securityContext/runAsUser"),
    "secret without key": ({"secretEnv": [{"name": "WANDB_API_KEY", "secretName": "wandb"}]}, "/secretEnv/0"),
    "secret value inline": ({"env": [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {}}}]}, "/env/0"),
    "numeric env value": ({"env": [{"name": "RETRIES", "value": 3}]}, "/env/0/value"),
    "bad queue name": ({"kueue": {"queueName": "GPU Queue"}}, "/kueue/queueName"),
    "unknown gpu networking mode": ({"gpuNetworking": {"mode": "infiniband"}}, "/gpuNetworking/mode"),
    "gpu networking as a string": ({"gpuNetworking": "tcpx"}, "/gpuNetworking"),
    "typo in gpu networking": ({"gpuNetworking": {"mod": "tcpx"}}, "'/gpuNetworking': additional properties 'mod'"),
    "three tcpx networks": ({"gpuNetworking": {"tcpx": {"networks": ["vpc1", "vpc2", "vpc3"]}}},
                            "/gpuNetworking/tcpx/networks"),
    "four tcpxo networks": ({"gpuNetworking": {"tcpxo": {"networks": ["vpc1", "vpc2", "vpc3", "vpc4"]}}},
                            "/gpuNetworking/tcpxo/networks"),
    "network name with capitals": ({"gpuNetworking": {"tcpx": {"networks": ["VPC1", "vpc2", "vpc3", "vpc4"]}}},
                                   "/gpuNetworking/tcpx/networks/0"),
    "network used twice": ({"gpuNetworking": {"tcpx": {"networks": ["vpc1", "vpc1", "vpc3", "vpc4"]}}},
                           "/gpuNetworking/tcpx/networks"),
    "nccl env name": ({"gpuNetworking": {"tcpx": {"ncclEnv": {"NCCL-DEBUG": "INFO"}}}}, "/gpuNetworking/tcpx/ncclEnv"),
    "numeric nccl env value": ({"gpuNetworking": {"tcpx": {"ncclEnv": {"NCCL_BUFFSIZE": 4194304}}}},
                               "/gpuNetworking/tcpx/ncclEnv/NCCL_BUFFSIZE"),
    "rxdm without repository": ({"gpuNetworking": {"tcpxo": {"rxdm": {"repository": ""}}}},
                                "/gpuNetworking/tcpxo/rxdm/repository"),
    "tcpx on four gpus": ({"gpuNetworking": {"mode": "tcpx"}, "resources": {"gpusPerPod": 4}, "job": {"procsPerPod": 4}},
                          "gpuNetworking.mode tcpx needs resources.gpusPerPod 8 (got 4)"),
    "nccl check without gpu networking": ({"ncclCheck": {"enabled": True}}, "ncclCheck.enabled needs gpuNetworking.mode"),
    "nccl check on elastic pods": ({"ncclCheck": {"enabled": True}, "gpuNetworking": {"mode": "tcpx"}},
                                    "ncclCheck.enabled needs job.pods.min = job.pods.max >= 2 (got 2:4)"),
    "nccl check threshold zero": ({"ncclCheck": {"minBusBandwidthGBps": 0}}, "/ncclCheck/minBusBandwidthGBps"),
    "nccl check threshold text": ({"ncclCheck": {"minBusBandwidthGBps": "25GB/s"}}, "/ncclCheck/minBusBandwidthGBps"),
    "nccl check unknown benchmark": ({"ncclCheck": {"benchmark": "all_gather"}}, "/ncclCheck/benchmark"),
    "nccl check size": ({"ncclCheck": {"maxBytes": "512MB"}}, "/ncclCheck/maxBytes"),
    "pod label overriding a selector label": ({"podLabels": {"app.kubernetes.io/instance": "other"}},
                                              "podLabels.app.kubernetes.io/instance: the chart and the Job controller"),
    "pod label the Job controller sets": ({"podLabels": {"batch.kubernetes.io/job-name": "x"}},
                                          "podLabels.batch.kubernetes.io/job-name"),
    # What the API server would refuse, or the templates would turn into something else (issue 17, item 18).
    "queue name over 63 characters": ({"kueue": {"queueName": "q" * 64}}, "/kueue/queueName"),
    "negative shm size": ({"resources": {"shmSize": -1}}, "/resources/shmSize"),
    "zero shm size": ({"resources": {"shmSize": "0Gi"}}, "/resources/shmSize"),
    "negative request": ({"resources": {"requests": {"cpu": -4}}}, "/resources/requests/cpu"),
    "gpus given again in requests": ({"resources": {"requests": {"nvidia.com/gpu": 8}}}, "/resources/requests"),
    "gpus given again in limits": ({"resources": {"limits": {"nvidia.com/gpu": 8}}}, "/resources/limits"),
    "grace period of zero": ({"job": {"terminationGracePeriodSeconds": 0}}, "/job/terminationGracePeriodSeconds"),
    "grace period shorter than the shutdown timeout": ({"job": {"terminationGracePeriodSeconds": 30}},
                                                       "/job/terminationGracePeriodSeconds"),
    "zero tmp size": ({"resources": {"tmpSize": "0Gi"}}, "/resources/tmpSize"),
    "negative cache request": ({"storage": {"cache": {"request": "-1Gi"}}}, "/storage/cache/request"),
    "cache size as a number": ({"storage": {"cache": {"sizeLimit": 100}}}, "/storage/cache/sizeLimit"),
    "pod label value with a space": ({"podLabels": {"team": "ml infra"}}, "/podLabels/team"),
    "pod label value over 63 characters": ({"podLabels": {"team": "t" * 64}}, "/podLabels/team"),
    "service account name with capitals": ({"serviceAccount": {"name": "Trainer"}}, "/serviceAccount/name"),
    "secret name with capitals": ({"secretEnv": [{"name": "K", "secretName": "WandB", "key": "k"}]},
                                  "/secretEnv/0/secretName"),
    # re-check 7 (R): what Kubernetes' IsDNS1123Subdomain and IsConfigMapKey refuse
    "secret name with an empty label": ({"secretEnv": [{"name": "K", "secretName": "a..b", "key": "k"}]},
                                        "/secretEnv/0/secretName"),
    "secret name with a label ending in -": ({"secretEnv": [{"name": "K", "secretName": "a-.b", "key": "k"}]},
                                             "/secretEnv/0/secretName"),
    "secret key starting with ..": ({"secretEnv": [{"name": "K", "secretName": "s", "key": "..foo"}]},
                                    "/secretEnv/0/key"),
    "sidecar without an image": ({"sidecars": [{"name": "proxy"}]}, "/sidecars/0"),
    "sidecar named like the trainer": ({"sidecars": [{"name": "trainer", "image": "r/p:1"}]}, "/sidecars/0/name"),
    "sidecar that would not keep running": ({"sidecars": [{"name": "p", "image": "r/p:1", "restartPolicy": "Never"}]},
                                            "/sidecars/0/restartPolicy"),
    "two sidecars with one name": ({"sidecars": [{"name": "p", "image": "r/p:1"}, {"name": "p", "image": "r/q:1"}]},
                                   'the name "p" is given twice'),
    "pod label key with a space": ({"podLabels": {"my team": "ml"}}, "'/podLabels': additional properties 'my team'"),
    "secret key with a slash": ({"secretEnv": [{"name": "K", "secretName": "wandb", "key": "a/b"}]},
                                "/secretEnv/0/key"),
}


@pytest.mark.parametrize(("override", "expected"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_bad_values_are_rejected_naming_the_field(override, expected):
    with pytest.raises(helm.HelmError) as caught:
        render(deep_merge(GOOD, override))
    assert expected in str(caught.value)


def test_local_disk_sizes_take_any_kubernetes_quantity_and_add_up():
    values = deep_merge(GOOD, {"resources": {"tmpSize": "100G"},
                               "storage": {"cache": {"enabled": True, "sourceUri": "gs://b/p",
                                                     "sizeLimit": "1.5Ti", "request": "512000Ki"}}})
    job = next(o for o in render(values) if o["kind"] == "Job")
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    assert parse_quantity(trainer["resources"]["requests"]["ephemeral-storage"]) == 100 * 10**9 + 512000 * 1024


def test_an_ephemeral_storage_limit_without_a_request_is_the_request():
    # The API server would refuse a request (tmpSize, 32Gi) above the limit.
    job = next(o for o in render(deep_merge(GOOD, {"resources": {"limits": {"ephemeral-storage": "10Gi"}}}))
               if o["kind"] == "Job")
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    assert trainer["resources"]["requests"]["ephemeral-storage"] == "10Gi"


def test_release_names_that_cannot_name_a_service_are_rejected():
    with pytest.raises(helm.HelmError, match="release name \"9lives\""):
        render(load_values("cpu-single-node"), release="9lives")


def test_the_good_value_sets_pass_the_schema():
    # The counterpart of the cases above: they fail because of their one change.
    chart().validate_schema(chart().merge_values(GOOD))


def test_chart_defaults_plus_an_image_are_enough():
    assert render({"image": {"repository": "registry.example.com/trainstack", "tag": "0.1.0"}})


def test_schema_presets_are_the_training_packages_presets():
    assert sorted(chart().schema["properties"]["train"]["properties"]["preset"]["enum"]) == sorted(PRESETS)


def test_bare_lint_asks_for_the_image():
    # There is deliberately no default image: `helm lint` needs a values file (see the README).
    report = helm.lint(CHART_DIR)
    assert any("/image/repository" in error for error in report["errors"])
