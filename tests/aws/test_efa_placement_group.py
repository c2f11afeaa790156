"""aws-p5 preflight of gpuNodes.placementGroup: an existing group the EFA nodes launch into is read by
name (ec2:DescribePlacementGroups in the stack's region) before anything is created, and must be a
`cluster` group (trainstack/infra/aws/preflight.py checked_placement_group); with a reservation, the
group must be the one the reservation was made in (checked_reservation_placement)."""

from __future__ import annotations

import pulumi
import pytest

from tests import pulumi_harness
from tests.aws.p5_runs import GPU, STACK, p5_config, run_p5
from tests.aws.stack_runs import (
    ACCOUNT,
    CAPACITY_RESERVATION,
    GET_CAPACITY_BLOCK_RESERVATION,
    LAUNCH_TEMPLATE,
    PLACEMENT_GROUP,
    capacity_block_answer,
    placement_group_arn,
    provider_calls,
    provider_outputs,
    reservation_made_in,
)
from tests.aws.stack_runs import run_main as run_aws_main

NAMED = {GPU: {"placementGroup": "p5-reserved"}}
RESERVATION = "cr-0123456789abcdef0"
ODCR = {"capacityReservationId": RESERVATION}
BLOCK = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": RESERVATION}


class _GroupNotFound(Exception):
    """What a read of a name that no group of the region has does: the read, and the preview, fail."""


def _group_answering(**changes):
    def outputs(type_: str, name: str, inputs: dict) -> dict:
        answer = provider_outputs(type_, name, inputs)
        return {**answer, **changes} if type_ == PLACEMENT_GROUP else answer
    return outputs


def _block_made_in(group: str):
    def calls(token: str, args: dict) -> dict:
        if token == GET_CAPACITY_BLOCK_RESERVATION:
            return capacity_block_answer(args["id"], placementGroupArn=placement_group_arn(group))
        return provider_calls(token, args)
    return calls


def _group_not_found(type_: str, name: str, inputs: dict) -> dict:
    if type_ == PLACEMENT_GROUP:
        raise _GroupNotFound("no placement group p5-reserved in us-west-2")
    return provider_outputs(type_, name, inputs)


def _nothing_but_components_providers_and_reads(monitors) -> None:
    created = {r.type for r in monitors[0].recorded if not r.read}
    assert created and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in created), created


def test_a_named_placement_group_is_read_by_its_name_in_the_preview(monkeypatch):
    asked = []
    new_resource = pulumi_harness._Mocks.new_resource

    def recording(self, args):
        if args.typ == PLACEMENT_GROUP:
            asked.append(args.resource_id)
        return new_resource(self, args)

    monkeypatch.setattr(pulumi_harness._Mocks, "new_resource", recording)
    result = run_p5(p5_config(NAMED), preview=True)
    (read,) = result.by_type(PLACEMENT_GROUP)
    assert read.read is True
    assert asked == ["p5-reserved"]  # the import ID of a placement group is its name


def test_no_placement_group_is_read_when_the_stack_creates_its_own():
    result = run_p5(preview=True)
    assert [r.read for r in result.by_type(PLACEMENT_GROUP)] == [False]


@pytest.mark.parametrize("strategy", ["spread", "partition"])
def test_preflight_refuses_a_placement_group_that_is_not_a_cluster_group(strategy, monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_aws_main(p5_config(NAMED), stack=STACK, preview=True, calls=provider_calls,
                     outputs=_group_answering(strategy=strategy))
    message = str(raised.value)
    reason = {"spread": "a spread group holds at most 7 running instances per zone",
              "partition": "a partition group spreads them over separate racks, and trainstack keeps an EFA group's "
                           "all-reduce traffic in one low-latency network segment"}[strategy]
    assert message.startswith(f"{GPU}.placementGroup: p5-reserved is a {strategy} placement group, and trainstack "
                              f"launches EFA nodes into a cluster group only: {reason}. Fix: ")
    assert "\n" not in message and ". Fix: " in message
    _nothing_but_components_providers_and_reads(monitors)


def test_a_placement_group_the_region_does_not_have_stops_the_preview_before_anything_billable(monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(Exception, match="p5-reserved"):
        run_aws_main(p5_config(NAMED), stack=STACK, preview=True, calls=provider_calls, outputs=_group_not_found)
    _nothing_but_components_providers_and_reads(monitors)



@pytest.mark.parametrize(("gpu", "calls", "outputs", "line"), [
    ({**BLOCK, **NAMED[GPU]}, provider_calls, provider_outputs,
     f"{GPU}.placementGroup: p5-reserved is not the placement group of {RESERVATION}, a Capacity Block made in no "
     "placement group: trainstack launches into such a block in no group (AWS ParallelCluster refuses a placement "
     f"group with a Capacity Block). Fix: pulumi config rm --path {GPU}.placementGroup"),
    ({**ODCR, **NAMED[GPU]}, provider_calls, reservation_made_in("p5-other"),
     f"{GPU}.placementGroup: p5-reserved is not the placement group of {RESERVATION}, which was made in p5-other: "
     f"its instances cannot launch there. Fix: pulumi config rm --path {GPU}.placementGroup (the reservation places "
     "them in its own group)"),
], ids=["group named, block in none", "group named, ODCR in another"])
@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_preflight_refuses_a_placement_group_the_reservation_was_not_made_in(gpu, calls, outputs, line, preview,
                                                                             monkeypatch):
    # At `up` too the refusal comes before anything billable is registered.
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_aws_main(p5_config({GPU: gpu}), stack=STACK, preview=preview, calls=calls, outputs=outputs)
    assert str(raised.value) == line
    _nothing_but_components_providers_and_reads(monitors)


@pytest.mark.parametrize(("gpu", "calls", "outputs"), [
    (ODCR, provider_calls, reservation_made_in("p5-reserved")),
    (BLOCK, _block_made_in("ultra-7"), provider_outputs),
], ids=["ODCR in a group", "block in a group"])
def test_a_reservation_made_in_a_group_places_its_instances_with_no_group_named(gpu, calls, outputs):
    """Re-review of the fix round: with no group named the launch template carries only the reservation,
    which places its instances in its own group (aws/aws-parallelcluster PR #7252)."""
    result = run_aws_main(p5_config({GPU: gpu}), stack=STACK, preview=False, calls=calls, outputs=outputs)
    assert not [r for r in result.registrations if r.type == "aws:ec2/placementGroup:PlacementGroup" and not r.read]


@pytest.mark.parametrize(("gpu", "outputs"), [(ODCR, reservation_made_in(None)), (BLOCK, provider_outputs)],
                         ids=["on-demand reservation", "capacity block"])
def test_a_reservation_made_in_no_group_needs_none(gpu, outputs):
    # The ODCR's placementGroupArn is "" (known), so that the check runs in this preview rather than waiting.
    run_aws_main(p5_config({GPU: gpu}), stack=STACK, preview=True, calls=provider_calls, outputs=outputs)


def test_a_reservation_made_in_the_named_group_passes():
    result = run_aws_main(p5_config({GPU: {**ODCR, **NAMED[GPU]}}), stack=STACK, preview=True, calls=provider_calls,
                          outputs=reservation_made_in("p5-reserved"))
    assert {r.type for r in result.registrations if r.read} == {PLACEMENT_GROUP, CAPACITY_RESERVATION}


OTHER_ACCOUNT = "210987654321"


def _shared_group_answers(type_: str, name: str, inputs: dict) -> dict:
    """An ODCR made in cluster placement group ultra-7 of another account, shared with the caller's."""
    answer = provider_outputs(type_, name, inputs)
    if type_ == CAPACITY_RESERVATION:
        return {**answer, "placementGroupArn": f"arn:aws:ec2:us-west-2:{OTHER_ACCOUNT}:placement-group/ultra-7"}
    return answer


def test_a_reservation_in_a_group_shared_from_another_account_deploys_with_no_group_named():
    """The reservation places its instances in the shared group; the stack names none (PR #7252)."""
    run_aws_main(p5_config({GPU: ODCR}), stack=STACK, preview=False, calls=provider_calls, outputs=_shared_group_answers)


def test_a_named_group_of_the_same_name_as_a_shared_one_is_refused(monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_aws_main(p5_config({GPU: {**ODCR, "placementGroup": "ultra-7"}}), stack=STACK, preview=True,
                     calls=provider_calls, outputs=_shared_group_answers)
    assert str(raised.value) == (
        f"{GPU}.placementGroup: {RESERVATION} was made in placement group ultra-7 of account {OTHER_ACCOUNT}, shared "
        f"with this account ({ACCOUNT}), and ultra-7 names a group of this account. Fix: pulumi config rm --path "
        f"{GPU}.placementGroup (the reservation places its instances in its own group)")
    _nothing_but_components_providers_and_reads(monitors)


def test_the_reservation_and_the_named_group_are_compared_by_name_not_by_arn():
    # A read of the named group whose answer carries no ARN: the names still match.
    named_group_without_arn = reservation_made_in("p5-reserved")

    def outputs(type_: str, name: str, inputs: dict) -> dict:
        answer = named_group_without_arn(type_, name, inputs)
        return {k: v for k, v in answer.items() if k != "arn"} if type_ == PLACEMENT_GROUP else answer

    run_aws_main(p5_config({GPU: {**ODCR, **NAMED[GPU]}}), stack=STACK, preview=False, calls=provider_calls,
                 outputs=outputs)


def _warnings(monkeypatch) -> list[str]:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    return warnings


PARTIAL_FILL_WARNING = (
    f"{GPU}.placementGroup: p5-reserved is not the placement group of {RESERVATION}, which was made in no placement "
    "group: EC2 uses the reservation for a launch into p5-reserved too, but may fill only part of the count there. "
    f"To launch into all of it: pulumi config rm --path {GPU}.placementGroup")


def test_a_named_group_for_an_odcr_made_in_no_group_deploys_with_one_warning(monkeypatch):
    warnings = _warnings(monkeypatch)
    result = run_aws_main(p5_config({GPU: {**ODCR, **NAMED[GPU]}}), stack=STACK, calls=provider_calls,
                          outputs=reservation_made_in(None))
    assert [w for w in warnings if w.startswith(f"{GPU}.placementGroup")] == [PARTIAL_FILL_WARNING]
    assert result.by_type(LAUNCH_TEMPLATE)


def test_an_odcr_answer_without_its_placement_group_is_checked_at_up(monkeypatch):
    # The default ODCR answer has no placementGroupArn: unknown in a preview (the check waits), None in an up.
    warnings = _warnings(monkeypatch)
    config = p5_config({GPU: {**ODCR, **NAMED[GPU]}})
    run_aws_main(config, stack=STACK, preview=True, calls=provider_calls, outputs=provider_outputs)
    assert not [w for w in warnings if w.startswith(f"{GPU}.placementGroup")]
    run_aws_main(config, stack=STACK, preview=False, calls=provider_calls, outputs=provider_outputs)
    assert [w for w in warnings if w.startswith(f"{GPU}.placementGroup")] == [PARTIAL_FILL_WARNING]


def test_a_reservation_answer_that_is_no_placement_group_arn_is_one_line():
    """Re-check 7 p11: a garbage placementGroupArn ended in an IndexError inside the preflight."""
    from trainstack.infra.aws.preflight import checked_reservation_placement

    with pytest.raises(pulumi.RunError, match="EC2 answered 'garbage' for the placement group of .* not a "
                                              "placement-group ARN"):
        checked_reservation_placement(RESERVATION, "garbage", "p5-reserved", ACCOUNT)
