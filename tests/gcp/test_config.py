"""Bad GCP config stops `__main__.py` before any resource is registered, with one line naming the key and the fix.

Each case runs the real program under mocks with Pulumi.gcp.yaml (plus gcp:project) and one bad change.
"""

from __future__ import annotations

import pulumi
import pytest

from tests.gcp.stack_runs import (
    GET_ENGINE_VERSIONS,
    GET_ZONES,
    PROJECT,
    as_cli_config,
    config_with,
    provider_calls,
    run_main,
    run_main_expecting_error,
    stack_file_config,
)
from tests.stack_runs import assert_one_config_error_line
from trainstack.infra.gcp.config import parse_gcp_config

POOL = "trainstack:gpuPools.t4"
POOLS = "trainstack:gpuPools"
JOB = "trainstack:job"
FS = "trainstack:sharedFilesystem"


def pool(**settings):
    return {POOLS: {"t4": settings}}


# (case id, config overrides, keys removed, the key the message must name, a fragment of the message)
BAD_CONFIGS = [
    ("no project (the shipped file leaves it to the user)", {}, ("gcp:project",), "gcp:project",
     "not set"),
    ("project display name instead of ID", {"gcp:project": "My Project"}, (), "gcp:project",
     "is not a project ID"),
    ("Google provider key trainstack would ignore", {"gcp:zone": "us-central1-b"}, (), "gcp:zone",
     "takes only gcp:project and gcp:region"),
    ("unknown top-level key", {"trainstack:gpuPool": {}}, (), "trainstack:gpuPool",
     "did you mean trainstack:gpuPools?"),
    ("unknown pool key", pool(acceleratorCont=2), (), f"{POOL}.acceleratorCont",
     f"did you mean {POOL}.acceleratorCount?"),
    ("unknown train key", {JOB: {"train": {"batchSzie": 4}}}, (), f"{JOB}.train.batchSzie",
     f"did you mean {JOB}.train.batchSize?"),
    ("accelerator that cannot attach to N1", pool(acceleratorType="nvidia-l4"), (), f"{POOL}.acceleratorType",
     "nvidia-l4 cannot be attached to n1-standard-4"),
    ("machine type without GPUs", pool(machineType="e2-standard-8"), (), f"{POOL}.machineType",
     "e2-standard-8 takes no GPUs"),
    ("GPU count the type does not offer", pool(acceleratorCount=3), (), f"{POOL}.acceleratorCount",
     "3 x nvidia-tesla-t4 is not a count GCP offers"),
    ("too many vCPUs for the GPU count", pool(machineType="n1-standard-64", acceleratorCount=2), (),
     f"{POOL}.machineType", "n1-standard-64 has 64 vCPUs; with 2 x nvidia-tesla-t4 an N1 machine may have at most 48"),
    ("A2 with another GPU count", pool(machineType="a2-highgpu-2g", acceleratorType="nvidia-tesla-a100",
                                       acceleratorCount=4), (), f"{POOL}.acceleratorCount",
     "a2-highgpu-2g comes with 2 x nvidia-tesla-a100"),
    ("A3 with another accelerator", pool(machineType="a3-highgpu-8g", acceleratorType="nvidia-tesla-t4",
                                         acceleratorCount=8), (), f"{POOL}.acceleratorType",
     "a3-highgpu-8g comes with 8 x nvidia-h100-80gb"),
    ("A3 with part of its bundled local SSDs", {POOLS: {"h100": {"machineType": "a3-highgpu-8g",
                                                               "localSsdCount": 8}}}, (),
     f"{POOLS}.h100.localSsdCount", "a3-highgpu-8g comes with 16 local SSDs, and GKE uses all of them or none, not 8"),
    ("A3 High 1g with part of its bundled local SSDs", {POOLS: {"h100": {"machineType": "a3-highgpu-1g",
                                                                        "localSsdCount": 1}}}, (),
     f"{POOLS}.h100.localSsdCount", "a3-highgpu-1g comes with 2 local SSDs"),
    ("A2 Ultra with part of its bundled local SSDs", {POOLS: {"a100": {"machineType": "a2-ultragpu-8g",
                                                                      "localSsdCount": 3}}}, (),
     f"{POOLS}.a100.localSsdCount", "a2-ultragpu-8g comes with 8 local SSDs"),
    ("A4 with part of its bundled local SSDs", {POOLS: {"b200": {"machineType": "a4-highgpu-8g", "localSsdCount": 16}}}, (),
     f"{POOLS}.b200.localSsdCount", "a4-highgpu-8g comes with 32 local SSDs"),
    ("N1 with a local SSD count Compute Engine does not offer", pool(localSsdCount=9), (), f"{POOL}.localSsdCount",
     "an N1 machine takes 1 to 8, 16 or 24 local SSDs, not 9"),
    ("GPU the image's CUDA build cannot run", pool(acceleratorType="nvidia-tesla-v100", acceleratorCount=2), (),
     f"{POOL}.acceleratorType", "nvidia-tesla-v100 is a Volta GPU"),
    ("disk below the image's needs", pool(diskSizeGb=30), (), f"{POOL}.diskSizeGb",
     "30 GB cannot hold the CUDA training image"),
    ("unknown disk type", pool(diskType="pd-fast"), (), f"{POOL}.diskType",
     "expected one of pd-ssd, pd-balanced"),
    ("pool min greater than max", pool(min=3, max=2), (), f"{POOL}.min", "min (3) is greater than max (2)"),
    ("pool name GKE refuses", {POOLS: {"T4_pool": {}}}, ("trainstack:gpuPools",), f"{POOLS}.T4_pool",
     "is not a valid node pool name"),
    ("job larger than the pool", {JOB: {"podsMax": 3}}, (), f"{JOB}.podsMax",
     f"3 pods need 3 GPU nodes, but {POOL}.max is 2"),
    ("job old key larger than the pool", {JOB: {"nodesMax": 3}}, (JOB,), f"{JOB}.nodesMax",
     f"3 pods need 3 GPU nodes, but {POOL}.max is 2. Fix: rename nodesMax to podsMax: pulumi config rm --path "
     f"'{JOB}.nodesMax' && raise {POOL}.max to 3"),
    ("more GPUs per pod than the machine has", {JOB: {"gpusPerPod": 4, "procsPerPod": 4}}, (),
     f"{JOB}.gpusPerPod", "4 GPUs per pod, but the n1-standard-4 node pool's machine type has 2"),
    ("processes not one per GPU", {JOB: {"procsPerPod": 1}}, (), f"{JOB}.procsPerPod",
     "1 processes for 2 GPUs"),
    ("job podsMin greater than podsMax", {JOB: {"podsMin": 3, "podsMax": 2}}, (), f"{JOB}.podsMin",
     "podsMin (3) is greater than podsMax (2)"),
    ("several pools and no job pool", {POOLS: {"t4": {}, "l4": {"machineType": "g2-standard-4"}}}, (),
     "trainstack:jobPool", "not set, and there are 2 GPU pools"),
    ("job pool that does not exist", {"trainstack:jobPool": "a100"}, (), "trainstack:jobPool",
     "'a100' is not one of the GPU pools"),
    ("zone outside the region", {"trainstack:zone": "europe-west4-a"}, (), "trainstack:zone",
     "'europe-west4-a' is not a zone of region us-central1"),
    ("region without a default zone", {"gcp:region": "asia-east1"}, ("trainstack:zone",), "trainstack:zone",
     "no default zone for region asia-east1"),
    ("Filestore below its tier's minimum", {FS: {"tier": "BASIC_SSD", "capacityGb": 1024}}, (),
     f"{FS}.capacityGb", "a BASIC_SSD Filestore share holds 2560 to 65433 GiB, not 1024"),
    ("unknown Filestore tier", {FS: {"tier": "PREMIUM_FAST"}}, (), f"{FS}.tier", "expected one of BASIC_HDD"),
    ("no shared filesystem for an enabled job", {FS: {"enabled": False}, JOB: {"enabled": True}}, (),
     f"{FS}.enabled", "its checkpoints and export would live only inside the pod"),
    ("Kubernetes version that is not a minor", {"trainstack:kubernetesVersion": "latest"}, (),
     "trainstack:kubernetesVersion", "expected a minor version such as"),
    ("Kubernetes version too old", {"trainstack:kubernetesVersion": "1.27"}, (), "trainstack:kubernetesVersion",
     "Kubernetes 1.27 is older than trainstack supports on GKE"),
    ("unknown release channel", {"trainstack:releaseChannel": "EXTENDED"}, (), "trainstack:releaseChannel",
     "expected one of REGULAR, STABLE, RAPID"),
    ("overlapping ranges", {"trainstack:network": {"servicesCidr": "10.16.0.0/20"}}, (),
     "trainstack:network.servicesCidr", "overlaps trainstack:network.podsCidr"),
    ("zone in capitals", {"trainstack:zone": "US-CENTRAL1-A"}, (), "trainstack:zone",
     "'US-CENTRAL1-A': zone names are lower case, without spaces"),
    ("subnet block with host bits", {"trainstack:network": {"subnetCidr": "10.10.0.1/20"}}, (),
     "trainstack:network.subnetCidr", "10.10.0.1/20 has bits set past its /20 prefix. Fix: write the block's first "
     "address: 10.10.0.0/20"),
    ("control-plane range with host bits", {"trainstack:network": {"masterCidr": "172.16.0.33/28"}}, (),
     "trainstack:network.masterCidr", "has bits set past its /28 prefix"),
    ("subnet in loopback space", {"trainstack:network": {"subnetCidr": "127.0.0.0/20"}}, (),
     "trainstack:network.subnetCidr", "127.0.0.0/20 must be an internal block (10.0.0.0/8"),
    ("services range in 'this network'", {"trainstack:network": {"servicesCidr": "0.0.0.0/20"}}, (),
     "trainstack:network.servicesCidr", "must be an internal block"),
    ("control-plane range in loopback space", {"trainstack:network": {"masterCidr": "127.0.0.32/28"}}, (),
     "trainstack:network.masterCidr", "must be an internal /28"),
    ("control-plane range of the wrong size", {"trainstack:network": {"masterCidr": "172.16.0.0/24"}}, (),
     "trainstack:network.masterCidr", "must be an internal /28"),
    ("existing network without its ranges", {"trainstack:existingNetwork": {"network": "vpc", "subnetwork": "s"}},
     (), "trainstack:existingNetwork.podsRangeName", "not set"),
    ("label GCP refuses", {"trainstack:labels": {"Team": "ML"}}, (), "trainstack:labels",
     "is not a GCP label"),
    ("label trainstack sets itself", {"trainstack:labels": {"app": "mine"}}, (), "trainstack:labels.app",
     "is set by trainstack on every resource"),
    ("API allow-list entry that is not a CIDR", {"trainstack:apiAuthorizedNetworks": ["my-laptop"]}, (),
     "trainstack:apiAuthorizedNetworks", "'my-laptop' is not an IPv4 CIDR block"),
    ("cluster name GKE refuses", {"trainstack:clusterName": "Train_Stack"}, (), "trainstack:clusterName",
     "is not a valid GKE cluster name"),
    ("run budget that is not a number", {"trainstack:maxRunUsd": "10 dollars"}, (), "trainstack:maxRunUsd",
     "expected a number, got '10 dollars'"),
    # 2 x (n1-standard-4 + 2 T4) on demand at max: $0.52 platform + 2 x $0.91 = $2.35/h.
    ("stack over the hourly budget", {"trainstack:gpuPools": {"t4": {"capacity": "ON_DEMAND"}},
                                      "trainstack:maxHourlyUsd": 2}, (), "trainstack:maxHourlyUsd",
     "the stack can cost $0.52 platform + 2 x n1-standard-4 + 2 x nvidia-tesla-t4 ON_DEMAND $0.95 = $2.43/h with "
     "the GPU pool at its max, over the $2.00/h limit"),
    ("job over the run budget", {"trainstack:job": {"enabled": True, "train": {"maxSteps": 1000000}},
                                 "trainstack:maxRunUsd": 50}, (), "trainstack:maxRunUsd",
     "the job's run is estimated at $"),
    ("train value the trainer refuses", {JOB: {"train": {"warmupSteps": -5}}}, (), f"{JOB}.train",
     "the trainer refuses it: argument --warmup-steps"),
    # The stack creates the job's namespace and deletes it on destroy: never one the cluster or the stack has.
    ("job namespace kube-system", {JOB: {"namespace": "kube-system", "enabled": True}}, (), f"{JOB}.namespace",
     "'kube-system' is a Kubernetes system namespace (the kube- prefix is reserved)"),
    ("job namespace gmp-system", {JOB: {"namespace": "gmp-system", "enabled": True}}, (), f"{JOB}.namespace",
     "'gmp-system' is a namespace GKE keeps for its own components"),
    ("job namespace gmp-public", {JOB: {"namespace": "gmp-public"}}, (), f"{JOB}.namespace",
     "'gmp-public' is a namespace GKE keeps"),
    ("job namespace gke-managed-system", {JOB: {"namespace": "gke-managed-system"}}, (), f"{JOB}.namespace",
     "'gke-managed-system' is a namespace GKE keeps"),
    ("job namespace of Kueue", {JOB: {"namespace": "kueue-system"}}, (), f"{JOB}.namespace",
     "'kueue-system' is the namespace the stack installs Kueue into"),
    ("label in Google's namespace", {"trainstack:labels": {"goog-team": "ml"}}, (), "trainstack:labels.goog-team",
     "Google reserves"),
    ("Arm system machine type", {"trainstack:systemNodes": {"machineType": "t2a-standard-4"}}, (),
     "trainstack:systemNodes.machineType", "is not a general-purpose x86 machine type"),
]


@pytest.mark.parametrize(("overrides", "remove", "key", "fragment"),
                         [case[1:] for case in BAD_CONFIGS], ids=[case[0] for case in BAD_CONFIGS])
def test_bad_config_stops_before_any_resource_with_one_line(overrides, remove, key, fragment):
    assert_one_config_error_line(*run_main_expecting_error(config_with(overrides, remove)), key, fragment)


def _calls_answering(token: str, answer: dict):
    def calls(called: str, args: dict) -> dict:
        return answer if called == token else provider_calls(called, args)
    return calls


@pytest.mark.parametrize(("token", "answer", "fragment"), [
    (GET_ZONES, {"names": ["us-central1-b", "us-central1-c"]},
     "trainstack:zone: us-central1-a is not an available zone of us-central1 for this project"),
    (GET_ENGINE_VERSIONS, {"latestMasterVersion": "", "validMasterVersions": [],
                           "releaseChannelLatestVersion": {}, "releaseChannelDefaultVersion": {"REGULAR": "1.35.1-gke.1"}},
     "trainstack:kubernetesVersion: GKE's REGULAR channel offers no 1.34.x in us-central1-a (its default is "
     "1.35.1-gke.1)"),
])
def test_what_only_the_account_knows_fails_the_preview_with_one_line(token, answer, fragment):
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=_calls_answering(token, answer))
    assert fragment in str(raised.value)
    assert "\n" not in str(raised.value)
    assert "Fix: pulumi config set" in str(raised.value)


def test_stack_file_parses_to_seed_003s_defaults():
    config = parse_gcp_config(as_cli_config({**stack_file_config(), "gcp:project": PROJECT}), stack="gcp")

    assert (config.project, config.region, config.zone, config.location) == (
        PROJECT, "us-central1", "us-central1-a", "us-central1-a")
    (t4,) = config.gpu_pools
    assert (t4.machine_type, t4.accelerator_type, t4.gpus_per_node) == ("n1-standard-4", "nvidia-tesla-t4", 2)
    assert (t4.disk_size_gb, t4.disk_type, t4.min_nodes, t4.max_nodes, t4.spot) == (270, "pd-ssd", 0, 2, True)
    assert config.job.enabled is False
    assert (config.job.pods_min, config.job.pods_max, config.job.gpus_per_pod) == (1, 2, 2)
    assert config.filestore is not None and config.filestore.capacity_gb == 1024
    assert config.delete_bucket_on_destroy is False
    assert config.cluster_name == "trainstack-gcp"


def test_fixed_gpu_machines_need_no_accelerator_keys():
    raw = as_cli_config({**stack_file_config(), "gcp:project": PROJECT,
                         "trainstack:gpuPools": {"h100": {"machineType": "a3-highgpu-8g", "max": 2}},
                         "trainstack:job": {"podsMax": 2}})
    (h100,) = parse_gcp_config(raw, stack="gcp").gpu_pools
    assert (h100.accelerator_type, h100.gpus_per_node, h100.attach_accelerator) == ("nvidia-h100-80gb", 8, False)


def test_stack_name_picks_gcp_without_the_cloud_key():
    result = run_main(config_with(remove=("trainstack:cloud",)), stack="gcp-dev")
    assert result.exports["clusterName"] == "trainstack-gcp-dev"


@pytest.mark.parametrize("block", [{"podsCidr": "240.0.0.0/14"}, {"servicesCidr": "198.18.0.0/20"},
                                   {"subnetCidr": "100.64.0.0/20"}])
def test_ranges_google_lists_as_valid_are_accepted(block):
    """Re-check 5 s01/s02: class E and the benchmarking range are valid subnet ranges on Google Cloud."""
    raw = as_cli_config({**stack_file_config(), "gcp:project": PROJECT, "trainstack:network": block})
    parse_gcp_config(raw, stack="gcp")


def test_bundled_local_ssds_agree_with_the_gpu_direct_profiles():
    from trainstack.infra.gcp.machine_types import BUNDLED_LOCAL_SSDS, GPU_DIRECT

    assert {m: p.local_ssd_count for m, p in GPU_DIRECT.items()} == {m: BUNDLED_LOCAL_SSDS[m] for m in GPU_DIRECT}
