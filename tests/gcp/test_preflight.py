"""Preflight (trainstack/infra/gcp/preflight.py) under mocks: the zone, the release channel's version and each GPU
pool's machine type; both answers are tested, and a wrong one registers no cloud resource."""

from __future__ import annotations

import pulumi
import pytest

from tests import pulumi_harness
from tests.gcp.stack_runs import (
    CHANNEL_VERSIONS,
    CLUSTER,
    GET_CLUSTER,
    GET_ENGINE_VERSIONS,
    GET_MACHINE_TYPES,
    GET_PROJECT_SERVICE,
    GET_ZONES,
    GKE_VERSIONS,
    REPO,
    config_with,
    machine_type,
    project_service,
    provider_calls,
    run_main,
)
from tests.stack_runs import config_with as stack_config_with


def _answering(answer):
    def calls(called: str, args: dict) -> dict:
        return answer(args) if called == GET_MACHINE_TYPES else provider_calls(called, args)
    return calls


def test_the_zone_is_asked_about_each_pools_machine_type():
    result = run_main(preview=True)
    (asked,) = [args for token, args in result.invokes if token == GET_MACHINE_TYPES]
    assert (asked["zone"], asked["filter"]) == ("us-central1-a", "name = n1-standard-4")


def test_a3_with_its_h100s_passes():
    config = stack_config_with(REPO / "Pulumi.gcp-a3.yaml", {"gcp:project": "ml-research-123"})
    result = run_main(config, stack="gcp-a3", preview=True)
    assert [args["filter"] for token, args in result.invokes if token == GET_MACHINE_TYPES] == [
        "name = a3-highgpu-8g"]


@pytest.mark.parametrize(("answer", "line"), [
    (lambda args: {"machineTypes": [], "filter": args["filter"], "id": "x"},
     "trainstack:gpuPools.t4.machineType: n1-standard-4 is not offered in us-central1-a for this project. Fix:"),
])
def test_a_machine_type_the_zone_lacks_fails_the_preview_with_one_line(answer, line):
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=_answering(answer))
    assert line in str(raised.value) and "\n" not in str(raised.value)


def test_a_machine_with_other_gpus_than_expected_fails_the_preview():
    def answer(args: dict) -> dict:
        wrong = {**machine_type("a3-highgpu-8g"),
                 "accelerators": [{"guestAcceleratorType": "nvidia-h100-80gb", "guestAcceleratorCount": 4}]}
        return {"machineTypes": [wrong], "filter": args["filter"], "id": "x"}

    config = stack_config_with(REPO / "Pulumi.gcp-a3.yaml", {"gcp:project": "ml-research-123"})
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config, stack="gcp-a3", preview=True, calls=_answering(answer))
    assert ("trainstack:gpuPools.a3.machineType: a3-highgpu-8g in us-central1-c comes with 4 x nvidia-h100-80gb, "
            "not 8 x nvidia-h100-80gb") in str(raised.value)


def test_the_control_plane_version_is_the_release_channels_not_any_valid_one():
    # The mocked API offers 1.34.5 on RAPID only; a REGULAR cluster created at it would be refused by GKE.
    assert GKE_VERSIONS[0:3] == ("1.36.0-gke.1000000", "1.35.2-gke.1000000", "1.35.1-gke.1200000")
    regular = run_main(preview=True).one(CLUSTER).inputs
    assert (regular["releaseChannel"], regular["minMasterVersion"]) == ({"channel": "REGULAR"}, "1.34.4-gke.1100000")
    assert "1.34.5-gke.1000000" in CHANNEL_VERSIONS["RAPID"]
    rapid = run_main(config_with({"trainstack:releaseChannel": "RAPID"}), preview=True).one(CLUSTER).inputs
    assert rapid["minMasterVersion"] == "1.34.5-gke.1000000"
    stable = run_main(config_with({"trainstack:releaseChannel": "STABLE"}), preview=True).one(CLUSTER).inputs
    assert stable["minMasterVersion"] == "1.34.3-gke.1300000"


def _registered_when_refused(monkeypatch, token: str, answer: dict) -> tuple[str, set[str]]:
    """Run a preview whose preflight answer is wrong: (its one error line, the resource types registered)."""
    monitors = pulumi_harness.recording_monitors(monkeypatch)

    def calls(called: str, args: dict) -> dict:
        return answer if called == token else provider_calls(called, args)

    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=calls)
    return str(raised.value), {r.type for r in monitors[0].recorded}


@pytest.mark.parametrize(("token", "answer", "line"), [
    (GET_ZONES, {"names": ["us-central1-b", "us-central1-c"]},
     "trainstack:zone: us-central1-a is not an available zone of us-central1 for this project"),
    (GET_ENGINE_VERSIONS, {"releaseChannelLatestVersion": {"RAPID": "1.34.5-gke.1000000"}},
     "trainstack:kubernetesVersion: GKE's REGULAR channel offers no 1.34.x in us-central1-a"),
    (GET_MACHINE_TYPES, {"machineTypes": [], "filter": "name = n1-standard-4", "id": "x"},
     "trainstack:gpuPools.t4.machineType: n1-standard-4 is not offered in us-central1-a"),
])
def test_a_refused_preflight_registers_no_cloud_resource(monkeypatch, token, answer, line):
    # Every answer gates every resource: `pulumi up --skip-preview` must not create a VPC, a NAT or a
    # bucket before a zone that does not exist is found out (only providers and our components).
    message, registered = _registered_when_refused(monkeypatch, token, answer)
    assert message.startswith(line) and "\n" not in message and ". Fix: " in message
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_a_fresh_project_without_the_apis_is_told_the_command_in_one_line(monkeypatch):
    # On a new project Compute Engine and GKE are off: the zone, version and machine-type questions would
    # answer with 403s. The APIs are asked first, and nothing else is asked before they answer.
    monitors = pulumi_harness.recording_monitors(monkeypatch)

    asked: list[str] = []

    def calls(token: str, args: dict) -> dict:
        asked.append(token)
        if token == GET_PROJECT_SERVICE:
            return project_service(args, enabled=args["service"] != "compute.googleapis.com")
        return provider_calls(token, args)

    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=calls)
    line = str(raised.value)
    assert line == ("gcp:project: compute.googleapis.com is not enabled in ml-research-123, and the checks before any "
                    "resource need them. Fix: gcloud services enable compute.googleapis.com container.googleapis.com "
                    "--project ml-research-123")
    assert not {GET_ZONES, GET_MACHINE_TYPES, GET_ENGINE_VERSIONS} & set(asked), asked
    registered = {r.type for r in monitors[0].recorded}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_an_existing_cluster_on_a_minor_the_channel_dropped_is_a_warning_not_a_refusal(monkeypatch):
    # The cluster runs 1.34 (held there by a maintenance exclusion); REGULAR now offers new clusters 1.35
    # only. minMasterVersion is ignored after creation, so an update must go on.
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))

    def calls(token: str, args: dict) -> dict:
        if token == GET_CLUSTER:
            return {"name": args["name"], "location": args["location"], "project": args["project"],
                    "masterVersion": "1.34.1-gke.1000000", "id": "cluster"}
        if token == GET_ENGINE_VERSIONS:
            return {"releaseChannelLatestVersion": {"REGULAR": "1.35.2-gke.1000000"}, "location": args["location"]}
        return provider_calls(token, args)

    result = run_main(config_with(), preview=False, calls=calls)
    assert result.one(CLUSTER).inputs["minMasterVersion"] == "1.34.1-gke.1000000"
    assert [w for w in warnings if w.startswith("trainstack:kubernetesVersion: GKE's REGULAR channel no longer "
                                                "offers 1.34.x to new clusters")]
