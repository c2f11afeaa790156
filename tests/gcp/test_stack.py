"""Every step of the GKE seeds (001, 003) is present and wired, checked on the real __main__.py under mocks.

Config: Pulumi.gcp.yaml plus gcp:project, with the job switched on unless a test says otherwise. What
cannot be checked here (the provider's own validation, GCP's answers, quotas, spot capacity) is
listed in docs/gcp.md ("How this is tested").
"""

from __future__ import annotations

import json

import pytest

from tests.gcp.stack_runs import (
    ACCESS_TOKEN,
    BUCKET,
    BUCKET_IAM_MEMBER,
    CA_CERTIFICATE,
    CLUSTER,
    DIGEST,
    ENDPOINT,
    FILESTORE,
    FILESTORE_IP,
    GCP_PROVIDER,
    IMAGE,
    JOB_ENABLED,
    K8S_PROVIDER,
    NETWORK,
    NODE_POOL,
    PROJECT,
    PROJECT_IAM_MEMBER,
    PV,
    PVC,
    RELEASE,
    REPOSITORY,
    REPOSITORY_IAM_MEMBER,
    ROUTER_NAT,
    SA_IAM_MEMBER,
    SERVICE,
    SERVICE_ACCOUNT,
    SERVICE_ACCOUNT_KEY,
    SUBNETWORK,
    TENSORBOARD_DIGEST,
    config_with,
    run_main,
)
from tests.stack_runs import assert_tensorboard_runs_its_own_image
from trainstack.infra.core import versions
from trainstack.infra.gcp.identity import GKE_SERVICE_ACCOUNT_ANNOTATION


@pytest.fixture(scope="module")
def up():
    return run_main(config_with(JOB_ENABLED))


def _gpu_pool(result):
    return result.one(NODE_POOL, "trainstack-gpu-t4")


def test_required_apis_are_enabled_and_never_disabled_on_destroy(up):
    services = up.by_type(SERVICE)
    assert sorted(s.inputs["service"] for s in services) == sorted(versions.GCP_SERVICES)
    assert all(s.inputs["disableOnDestroy"] is False for s in services)
    assert all(s.inputs["project"] == PROJECT for s in services)
    # Everything else waits for them.
    cluster = up.one(CLUSTER)
    assert {s.urn for s in services} <= set(cluster.dependencies)
    assert {s.urn for s in services} <= set(up.one(NETWORK).dependencies)


def test_network_has_pod_and_service_ranges_and_nat_for_private_nodes(up):
    subnet = up.one(SUBNETWORK)
    ranges = {r["rangeName"]: r["ipCidrRange"] for r in subnet.inputs["secondaryIpRanges"]}
    assert set(ranges) == {"pods", "services"}
    assert subnet.inputs["privateIpGoogleAccess"] is True
    assert up.one(NETWORK).inputs["autoCreateSubnetworks"] is False
    nat = up.one(ROUTER_NAT)
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"


def test_cluster_is_zonal_private_shielded_with_workload_identity_and_dataplane_v2(up):
    cluster = up.one(CLUSTER).inputs
    assert cluster["location"] == "us-central1-a"
    assert "nodeLocations" not in cluster
    assert cluster["workloadIdentityConfig"] == {"workloadPool": f"{PROJECT}.svc.id.goog"}
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"  # enforces the chart's NetworkPolicy
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["enableShieldedNodes"] is True
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["deletionProtection"] is False
    addons = cluster["addonsConfig"]
    assert addons["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    # The GCS FUSE driver is on only if something mounts a bucket through it: nothing does.
    fuse_volumes = [pv for pv in up.by_type(PV) if pv.inputs["spec"].get("csi", {}).get("driver")
                    == "gcsfuse.csi.storage.gke.io"]
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": bool(fuse_volumes)} == {"enabled": False}
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    # The newest 1.34 patch GKE offers (the mocked API answers 1.34.4 first).
    assert cluster["minMasterVersion"] == "1.34.4-gke.1100000"
    (exclusion,) = cluster["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion["exclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES",
                                             "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}
    assert "nodePools" not in cluster  # pools are separate resources: changing one never replaces the cluster
    assert {"minMasterVersion", "nodeConfig"} <= set(up.one(CLUSTER).ignore_changes)


def test_regional_cluster_keeps_its_nodes_in_the_zone():
    result = run_main(config_with({**JOB_ENABLED, "trainstack:regional": True}))
    cluster = result.one(CLUSTER).inputs
    assert cluster["location"] == "us-central1"
    assert cluster["nodeLocations"] == ["us-central1-a"]
    assert _gpu_pool(result).inputs["nodeLocations"] == ["us-central1-a"]


def test_gpu_pool_is_seed_003s_spot_t4_pool_scaling_from_zero(up):
    pool = _gpu_pool(up).inputs
    node = pool["nodeConfig"]
    assert node["machineType"] == "n1-standard-4"
    assert node["diskSizeGb"] == 270 and node["diskType"] == "pd-ssd"  # Pulumi.gcp.yaml (issue 30.18: the cache fits)
    assert node["spot"] is True
    (accelerator,) = node["guestAccelerators"]
    assert accelerator == {"type": "nvidia-tesla-t4", "count": 2,
                           "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}}
    assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert node["gvnic"] == {"enabled": True}
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    assert pool["autoscaling"]["totalMaxNodeCount"] == 2
    assert pool["initialNodeCount"] == 0
    assert pool["nodeLocations"] == ["us-central1-a"]
    assert "initialNodeCount" in _gpu_pool(up).ignore_changes


def test_nodes_use_their_own_least_privilege_account_and_the_metadata_server(up):
    accounts = {a.name: a for a in up.by_type(SERVICE_ACCOUNT)}
    node_email = f"{accounts['trainstack-nodes'].inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
    for pool in up.by_type(NODE_POOL):
        node = pool.inputs["nodeConfig"]
        assert node["serviceAccount"] == node_email
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
        assert node["metadata"] == {"disable-legacy-endpoints": "true"}
    roles = {m.inputs["role"] for m in up.by_type(PROJECT_IAM_MEMBER)}
    assert roles == {"roles/container.defaultNodeServiceAccount", "roles/serviceusage.serviceUsageConsumer"}
    reader = up.one(REPOSITORY_IAM_MEMBER).inputs
    assert reader["role"] == "roles/artifactregistry.reader"
    assert reader["member"] == f"serviceAccount:{node_email}"


def test_image_streaming_has_its_api_and_the_node_accounts_role(up):
    # gcfs_config without the Container File System API (and, for a custom node account, Service Usage
    # Consumer in the images' project) leaves nodes pulling whole images, or failing to pull.
    defaults = up.one(CLUSTER).inputs["nodePoolDefaults"]["nodeConfigDefaults"]
    assert defaults["gcfsConfig"] == {"enabled": True}
    assert "containerfilesystem.googleapis.com" in {s.inputs["service"] for s in up.by_type(SERVICE)}
    node_member = up.one(SERVICE_ACCOUNT, "trainstack-nodes")
    grants = {m.inputs["role"]: m for m in up.by_type(PROJECT_IAM_MEMBER)}
    consumer = grants["roles/serviceusage.serviceUsageConsumer"]
    assert consumer.inputs["project"] == PROJECT  # where the Artifact Registry repository is
    assert consumer.inputs["member"].endswith(f"{node_member.inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com")


def test_system_pool_is_small_and_always_up(up):
    pool = up.one(NODE_POOL, "trainstack-system").inputs
    assert pool["nodeConfig"]["machineType"] == "e2-standard-4"
    assert "guestAccelerators" not in pool["nodeConfig"]
    assert pool["autoscaling"]["totalMinNodeCount"] == 1
    # Its nodes exist from the start (a pool without an initial count starts empty).
    assert pool["initialNodeCount"] == 1
    bigger = run_main(config_with({"trainstack:systemNodes": {"min": 2, "max": 4}}))
    assert bigger.one(NODE_POOL, "trainstack-system").inputs["initialNodeCount"] == 2
    assert "initialNodeCount" in up.one(NODE_POOL, "trainstack-system").ignore_changes  # the autoscaler's after


def test_job_identity_is_workload_identity_with_the_bucket_only(up):
    job_account = up.one(SERVICE_ACCOUNT, "trainstack-job")
    email = f"{job_account.inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
    binding = up.one(SA_IAM_MEMBER, "trainstack-job-workload-identity-trainstack-jobs").inputs
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == f"serviceAccount:{PROJECT}.svc.id.goog[default/trainstack-jobs]"
    assert binding["serviceAccountId"] == f"projects/{PROJECT}/serviceAccounts/{email}"
    # The bindings need the identity pool, which exists once the cluster does.
    assert all(up.one(CLUSTER).urn in member.dependencies for member in up.by_type(SA_IAM_MEMBER))
    bucket_member = up.one(BUCKET_IAM_MEMBER).inputs
    assert bucket_member == {"bucket": "trainstack-snapshots-5f6a7b8", "role": "roles/storage.objectUser",
                             "member": f"serviceAccount:{email}"}
    # Nothing grants the job's account a project-wide role, and no key exists anywhere.
    assert all(m.inputs["member"] != f"serviceAccount:{email}" for m in up.by_type(PROJECT_IAM_MEMBER))
    assert up.by_type(SERVICE_ACCOUNT_KEY) == []
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["serviceAccount"] == {"create": False, "name": "trainstack-jobs", "annotations": {}}
    account = up.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]
    assert account["annotations"] == {GKE_SERVICE_ACCOUNT_ANNOTATION: email}


def test_bucket_is_private_versioned_and_kept_on_destroy(up):
    bucket = up.one(BUCKET)
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["versioning"] == {"enabled": True}
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.retain_on_delete is True


def test_bucket_is_deleted_on_destroy_only_when_asked():
    bucket = run_main(config_with({"trainstack:deleteBucketOnDestroy": True})).one(BUCKET)
    assert bucket.inputs["forceDestroy"] is True
    assert not bucket.retain_on_delete


def test_filestore_volume_is_claimed_by_the_job(up):
    instance = up.one(FILESTORE).inputs
    assert instance["tier"] == "BASIC_HDD"
    assert instance["location"] == "us-central1-a"
    assert instance["fileShares"]["capacityGb"] == 1024
    assert instance["networks"][0]["network"] == "trainstack-network-3c4d5e6"
    volume = up.one(PV).inputs["spec"]
    assert volume["csi"]["driver"] == "filestore.csi.storage.gke.io"
    assert volume["csi"]["volumeHandle"] == "modeInstance/us-central1-a/trainstack-filestore-9c0d1e2/trainstack"
    assert volume["csi"]["volumeAttributes"] == {"ip": FILESTORE_IP, "volume": "trainstack"}
    assert volume["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["claimRef"] == {"namespace": "default", "name": "train-shared"}
    claim = up.one(PVC)
    assert claim.inputs["spec"]["volumeName"] == up.one(PV).inputs["metadata"]["name"]
    assert claim.inputs["spec"]["storageClassName"] == ""
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert up.one(PV).urn in claim.dependencies
    assert up.one(RELEASE, "train").inputs["values"]["storage"]["pvc"] == "train-shared"


def test_job_runs_the_image_by_digest_on_the_gpu_pool(up):
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["image"]["digest"] == DIGEST
    assert values["image"]["repository"] == f"us-central1-docker.pkg.dev/{PROJECT}/trainstack-gcp/trainstack"
    assert values["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
                                      "trainstack/node-pool": "t4"}
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                      "effect": "NoSchedule"}]
    assert values["job"]["pods"] == {"min": 1, "max": 2}
    assert values["job"]["procsPerPod"] == 2
    assert values["resources"]["gpusPerPod"] == 2
    # The data set comes from the bucket through the node-local cache.
    assert values["storage"]["cache"] == {"enabled": True,
                                          "sourceUri": "gs://trainstack-snapshots-5f6a7b8/data/"}
    assert values["train"]["data"] == "/mnt/cache"
    assert values["train"]["extraArgs"] == ["--snapshot-uri", "gs://trainstack-snapshots-5f6a7b8/runs/train"]
    # The job waits for its GPU pool; GKE runs the device plugin itself, so none is installed.
    job = up.one("trainstack:index:TrainingJob")
    assert _gpu_pool(up).urn in job.dependencies
    assert [r.name for r in up.by_type(RELEASE) if r.name != "train"] == ["trainstack-kueue"]  # the queue only


def test_image_is_pushed_to_artifact_registry_with_a_secret_token(up):
    image = up.one(IMAGE, "trainstack-image")
    assert image.inputs["push"] is True
    (registry,) = image.inputs["registries"]
    assert registry["address"] == "us-central1-docker.pkg.dev"
    assert registry["username"] == "oauth2accesstoken"
    assert image.is_secret("registries[0].password")
    assert ACCESS_TOKEN not in json.dumps(up.exports, default=str)
    assert up.one(REPOSITORY).inputs["format"] == "DOCKER"


def test_tensorboard_runs_its_own_small_image_built_by_the_same_program(up):
    assert_tensorboard_runs_its_own_image(up, TENSORBOARD_DIGEST)


def test_the_registry_never_expires_the_images_the_stack_deploys(up):
    policies = {p["id"]: p for p in up.one(REPOSITORY).inputs["cleanupPolicies"]}
    assert policies["keep-deployed"] == {"id": "keep-deployed", "action": "KEEP", "condition": {
        "tagState": "TAGGED", "tagPrefixes": ["latest", "tensorboard"]}}
    pushed = {tag.rsplit(":", 1)[1] for image in up.by_type(IMAGE) for tag in image.inputs["tags"]}
    assert pushed == {"latest", "tensorboard"}
    assert policies["delete-old"]["action"] == "DELETE"  # everything else: after 30 days, beyond the newest 10


def test_no_tensorboard_no_tensorboard_image():
    result = run_main(config_with({"trainstack:job": {"enabled": True, "tensorboard": False}}))
    assert [i.name for i in result.by_type(IMAGE)] == ["trainstack-image"]
    assert "image" not in result.one(RELEASE, "train").inputs["values"].get("tensorboard", {})


def test_every_gcp_resource_uses_the_explicit_provider_and_every_kubernetes_object_the_clusters(up):
    google = up.one(GCP_PROVIDER)
    assert google.inputs["project"] == PROJECT and google.inputs["region"] == "us-central1"
    assert json.loads(google.inputs["defaultLabels"]) == {"app": "trainstack", "pulumi-stack": "gcp"}
    k8s = up.one(K8S_PROVIDER)
    for registration in up.registrations:
        if registration.type.startswith("gcp:"):
            assert registration.provider == google.urn, registration.name
        if registration.type.startswith("kubernetes:"):
            assert registration.provider == k8s.urn, registration.name


def test_kubeconfig_uses_the_gcloud_auth_plugin_and_is_secret(up):
    config = json.loads(up.exports["kubeconfig"])
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": f"https://{ENDPOINT}", "certificate-authority-data": CA_CERTIFICATE}
    (user,) = config["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in json.dumps(user)
    assert "kubeconfig" in up.secret_exports


def test_outputs_give_the_commands_with_the_names_filled_in(up):
    exports = up.exports
    assert exports["kubeconfigCommand"] == ("gcloud container clusters get-credentials trainstack-gcp "
                                            f"--location us-central1-a --project {PROJECT}")
    assert exports["uploadDataCommand"].startswith("gcloud storage rsync --recursive ")
    assert exports["uploadDataCommand"].endswith("data/prepared gs://trainstack-snapshots-5f6a7b8/data")
    assert exports["logsCommand"].startswith("kubectl logs -f -n default -l app.kubernetes.io/instance=train")
    assert exports["tensorboardCommand"].startswith("kubectl port-forward -n default svc/train-tensorboard 6006")
    for name in ("clusterName", "registryUrl", "imageRef", "bucketName", "jobName", "statusCommand",
                 "eventsCommand", "cancelCommand"):
        assert exports[name], name
    assert exports["imageRef"].endswith(DIGEST)


def test_several_gpu_pools_and_the_job_on_the_named_one():
    pools = {"t4": {}, "l4": {"machineType": "g2-standard-24", "max": 1}}
    result = run_main(config_with({"trainstack:gpuPools": pools, "trainstack:jobPool": "l4",
                                   "trainstack:job": {"enabled": True, "podsMax": 1}}))
    l4 = result.one(NODE_POOL, "trainstack-gpu-l4").inputs
    assert l4["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-l4"
    assert l4["nodeConfig"]["guestAccelerators"][0]["count"] == 2
    values = result.one(RELEASE, "train").inputs["values"]
    assert values["nodeSelector"]["trainstack/node-pool"] == "l4"
    assert values["resources"]["gpusPerPod"] == 2


def test_job_off_leaves_no_release_and_says_how_to_start_it():
    result = run_main(config_with())
    assert [r.name for r in result.by_type(RELEASE)] == ["trainstack-kueue"]  # the queue waits for submissions
    assert result.exports["enableJobCommand"].startswith("pulumi config set --path trainstack:job.enabled true")
    assert result.one(PVC)  # the volume is there to upload into and to keep results


def test_queue_puts_the_job_behind_kueue_with_the_pools_gpus():
    result = run_main(config_with({"trainstack:job": {"enabled": True, "queue": True}}))
    values = result.one(RELEASE, "train").inputs["values"]
    assert values["kueue"]["queueName"] == "training"
    quota = result.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs["spec"]["resourceGroups"][0]
    gpu = {r["name"]: r["nominalQuota"] for r in quota["flavors"][0]["resources"]}["nvidia.com/gpu"]
    assert gpu == 4  # 2 nodes x 2 T4
    flavor = result.one("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor").inputs["spec"]
    assert flavor["nodeLabels"]["trainstack/node-pool"] == "t4"


def test_the_shared_filesystem_is_protected_until_the_config_releases_it(up):
    # `pulumi destroy` refuses (before deleting anything) while the runs live only on Filestore.
    assert up.one(FILESTORE).protect is True
    released = run_main(config_with({"trainstack:protectSharedFilesystem": False}))
    assert released.one(FILESTORE).protect is False


def test_save_results_copies_the_run_directory_to_the_bucket_without_the_job(up):
    import shlex

    command = up.exports["saveResultsCommand"]
    words = shlex.split(command)
    overrides = json.loads(next(w for w in words if w.startswith("--overrides=")).split("=", 1)[1])
    spec = overrides["spec"]
    assert spec["volumes"] == [{"name": "shared", "persistentVolumeClaim": {"claimName": "train-shared",
                                                                            "readOnly": True}}]
    assert spec["securityContext"]["runAsUser"] == 10001  # the trainer's user owns the run
    assert "kubectl cp -n default trainstack-results:/mnt/shared/runs/train results/train" in command
    assert command.endswith("gcloud storage rsync --recursive results/train gs://trainstack-snapshots-5f6a7b8/results/train")


def test_a_snapshot_uri_in_job_train_wins_over_the_buckets():
    result = run_main(config_with({"trainstack:job": {"enabled": True,
                                                      "train": {"snapshotUri": "gs://elsewhere/runs/x"}}}))
    assert result.one(RELEASE, "train").inputs["values"]["train"]["extraArgs"] == [
        "--snapshot-uri", "gs://elsewhere/runs/x"]


def test_the_stack_jobs_previous_account_stays_trusted_under_its_old_binding(up):
    # Review finding 4: before every job shared trainstack-jobs, the stack job (and the CLI jobs that
    # borrowed its account) ran as the account named like the job; an upgrade must not cut their bucket
    # access. Its binding keeps the resource name it had, so the upgrade only adds a binding.
    bindings = {m.name: m.inputs["member"] for m in up.by_type(SA_IAM_MEMBER)}
    assert bindings == {
        "trainstack-job-workload-identity": f"serviceAccount:{PROJECT}.svc.id.goog[default/train]",
        "trainstack-job-workload-identity-trainstack-jobs":
            f"serviceAccount:{PROJECT}.svc.id.goog[default/trainstack-jobs]",
    }
