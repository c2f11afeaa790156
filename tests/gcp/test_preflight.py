"""Preflight (infra/gcp/preflight.py) under mocks: each GPU pool's machine type must be offered in the
node zone, with the GPUs the config expects; both answers are tested."""

from __future__ import annotations

import pulumi
import pytest

from tests.gcp.stack_runs import GET_MACHINE_TYPES, REPO, config_with, machine_type, provider_calls, run_main
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
