"""aws-p5 capacity that really exists (issue 28 items 8, 9, 12, 13): the P-instance vCPU quota, a reserved
group never rolled while its nodes run, the Capacity Block's end, a reservation's placement group in the
launch template, topology-aware placement by default only on capacity that comes in one block, and the
preview role per stack."""

from __future__ import annotations

import re
from pathlib import Path

import pulumi
import pytest
import yaml

from tests import pulumi_harness
from tests.aws.p5_runs import GPU, p5_config, run_p5
from tests.aws.stack_runs import (
    GET_CAPACITY_BLOCK_RESERVATION,
    GET_NODE_GROUP,
    GET_NODE_GROUPS,
    GET_SERVICE_QUOTA,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    capacity_block_answer,
    provider_calls,
    provider_outputs,
    reservation_made_in,
    service_quota_answer,
)
from tests.aws.stack_runs import run_main as run_aws_main
from trainstack.infra.aws.config import parse_aws_config
from trainstack.infra.aws.quotas import ON_DEMAND_P, SPOT_P5, vcpu_quota
from trainstack.infra.aws.reserved_updates import checked_reserved_update

REPO = Path(__file__).resolve().parents[2]
RESERVATION = "cr-0123456789abcdef0"
ODCR = {"capacityReservationId": RESERVATION}
BLOCK = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": RESERVATION}


def answering(answers: dict):
    """provider_calls, with the tokens in `answers` answered by their function of the invoke's args."""
    def calls(token: str, args: dict) -> dict:
        return answers[token](args) if token in answers else provider_calls(token, args)
    return calls


def quota_of(value: float):
    return answering({GET_SERVICE_QUOTA: lambda args: service_quota_answer(args["quotaCode"], value)})


def asked_quotas(result) -> list[str]:
    return [args["quotaCode"] for token, args in result.invokes if token == GET_SERVICE_QUOTA]


# --- item 8: the P-instance vCPU quota --------------------------------------------------------------------

@pytest.mark.parametrize(("gpu", "quota"), [({}, ON_DEMAND_P), (ODCR, ON_DEMAND_P), ({"capacityType": "SPOT"}, SPOT_P5),
                                            (BLOCK, None)], ids=["on demand", "into an ODCR", "spot", "capacity block"])
def test_preflight_asks_the_quota_of_the_capacity_type(gpu, quota):
    result = run_p5(p5_config({GPU: gpu}), preview=True)
    assert asked_quotas(result) == ([quota[0]] if quota else [])


def test_the_quota_codes_are_the_ones_the_service_quotas_api_names():
    assert ON_DEMAND_P == ("L-417A185B", "Running On-Demand P instances")
    assert SPOT_P5 == ("L-C4BD4855", "All P5 Spot Instance Requests")
    assert vcpu_quota("p6-b200.48xlarge", "SPOT") is None  # not documented which spot quota counts it


def test_a_quota_below_max_nodes_is_refused_with_the_request_command_before_anything_billable(monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_p5(preview=True, calls=quota_of(192))  # a typical account's default: one p5, not two
    line = str(raised.value)
    assert line == (
        'trainstack:gpuNodes.max: 2 x p5.48xlarge need 384 vCPUs, but this account\'s "Running On-Demand P instances" '
        "quota (L-417A185B) in us-west-2 is 192, so the autoscaler's scale-up would fail and the job wait suspended. "
        "Fix: aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 384 --region us-west-2 (and wait for it to be granted; running P instances elsewhere in "
        "the Region count too), or lower trainstack:gpuNodes.max")
    registered = {r.type for r in monitors[0].recorded if not r.read}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_a_quota_that_holds_max_nodes_passes():
    run_p5(preview=True, calls=quota_of(384))


def test_the_spot_quota_is_asked_for_max_nodes_too():
    with pytest.raises(pulumi.RunError, match=r'"All P5 Spot Instance Requests" quota \(L-C4BD4855\) in us-west-2 is 0'):
        run_p5(p5_config({GPU: {"capacityType": "SPOT", "max": 3}}), preview=True, calls=quota_of(0))


def test_every_efa_type_has_its_vcpus_for_the_quota_check():
    # A type added to efa.py without its vCPU count would fail the preflight with a KeyError.
    from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES
    from trainstack.infra.aws.quotas import VCPUS

    assert set(EFA_INSTANCE_TYPES) <= set(VCPUS)


def test_a_spot_type_whose_quota_is_not_documented_warns_naming_both_candidates(monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: said.append(message))
    run_p5(p5_config({GPU: {"capacityType": "SPOT", "instanceTypes": ["p6-b200.48xlarge"]},
                      "trainstack:maxHourlyUsd": "300"}), preview=True,
           calls=quota_of(0))
    line = next(m for m in said if "Spot quota counts p6-b200.48xlarge" in m)
    assert "L-C4BD4855" in line and "L-7212CCBC" in line and "\n" not in line


# --- item 9: a reserved group is not rolled while its nodes run ---------------------------------------------

GPU_TEMPLATE_ID = "trainstack-eks-gpu-id"  # the mocks' ID of the GPU group's launch template


def running_group(*, desired: int, template_id: str = GPU_TEMPLATE_ID, template_version: str = "1",
                  kubernetes_version: str = "1.35"):
    """What eks:DescribeNodegroup says about the stack's running GPU group."""
    def answer(args: dict) -> dict:
        return {"id": f"{args['clusterName']}:{args['nodeGroupName']}", "clusterName": args["clusterName"],
                "nodeGroupName": args["nodeGroupName"], "region": "us-west-2",
                "arn": f"arn:aws:eks:us-west-2:123456789012:nodegroup/{args['clusterName']}/{args['nodeGroupName']}/x",
                "labels": {"trainstack/node-pool": "gpu", "nvidia.com/gpu.present": "true",
                           "k8s.amazonaws.com/accelerator": "nvidia"},
                "launchTemplates": [{"id": template_id, "name": "gpu", "version": template_version}],
                "scalingConfigs": [{"desiredSize": desired, "maxSize": 2, "minSize": 0}],
                "version": kubernetes_version}
    system = {"labels": {"trainstack/node-pool": "system"}, "launchTemplates": [], "scalingConfigs": [],
              "version": "1.35"}
    return answering({
        GET_NODE_GROUPS: lambda args: {"id": args["clusterName"], "clusterName": args["clusterName"],
                                       "names": ["trainstack-eks-gpu-0a1b", "trainstack-eks-system-2c3d"]},
        GET_NODE_GROUP: lambda args: answer(args) if "gpu" in args["nodeGroupName"] else {**answer(args), **system},
    })


def template_at(version: int):
    def outputs(type_: str, name: str, inputs: dict) -> dict:
        answer = provider_outputs(type_, name, inputs)
        return {**answer, "latestVersion": version} if type_ == LAUNCH_TEMPLATE and name.endswith("-gpu") else answer
    return outputs


@pytest.mark.parametrize(("running", "outputs", "change"), [
    (running_group(desired=2, template_version="1"), template_at(2), "its launch template (version 1 -> 2)"),
    (running_group(desired=2, template_id="lt-0old"), provider_outputs,
     f"its launch template (lt-0old -> {GPU_TEMPLATE_ID})"),
    (running_group(desired=1, kubernetes_version="1.34"), provider_outputs, "its Kubernetes version (1.34 -> 1.35)"),
], ids=["new template version", "replaced template", "kubernetes version"])
@pytest.mark.parametrize("capacity", [ODCR, BLOCK], ids=["ODCR", "capacity block"])
def test_up_refuses_to_roll_a_reserved_group_whose_nodes_run(capacity, running, outputs, change, monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_aws_main(p5_config({GPU: capacity}), stack="aws-p5", calls=running, outputs=outputs)
    line = str(raised.value)
    assert line.startswith(f"trainstack:gpuNodes: this update changes {change} of node group trainstack-eks-gpu-0a1b, "
                           "which runs ") and "\n" not in line
    assert ("aws eks update-nodegroup-config --region us-west-2 --cluster-name trainstack-aws-p5 --nodegroup-name "
            "trainstack-eks-gpu-0a1b --scaling-config minSize=0,desiredSize=0") in line
    assert "trainstack cancel <job> --stack aws-p5" in line
    # The group itself is never sent to EKS with the new template.
    assert not [r for r in monitors[0].recorded if r.type == NODE_GROUP and r.name == "trainstack-eks-gpu"]


@pytest.mark.parametrize(("running", "outputs"), [
    (running_group(desired=0, template_version="1"), template_at(2)),  # at zero: nothing to surge
    (running_group(desired=2, template_version="1"), provider_outputs),  # nothing that rolls it
], ids=["at zero", "no change"])
def test_up_updates_a_reserved_group_at_zero_or_without_a_rolling_change(running, outputs):
    result = run_aws_main(p5_config({GPU: ODCR}), stack="aws-p5", calls=running, outputs=outputs)
    group = result.one(NODE_GROUP, "trainstack-eks-gpu")
    assert group.inputs["launchTemplate"]["version"] == ("2" if outputs is not provider_outputs else "1")


def test_a_plain_on_demand_or_spot_group_is_not_looked_up():
    result = run_aws_main(p5_config({}), stack="aws-p5")
    assert not [token for token, _ in result.invokes if token in (GET_NODE_GROUPS, GET_NODE_GROUP)]


def test_the_refusal_needs_running_reserved_nodes_and_a_rolling_change():
    from types import SimpleNamespace

    def group(desired):
        return SimpleNamespace(launch_templates=[SimpleNamespace(id="lt-1", version="3")], version="1.35",
                               scaling_configs=[SimpleNamespace(desired_size=desired)], node_group_name="g",
                               cluster_name="c", region="us-west-2")

    checks = {"kubernetes_version": "1.35", "stack": "aws-p5"}
    assert checked_reserved_update(None, template=("lt-1", "4"), **checks) == "4"  # no group yet: first up
    assert checked_reserved_update(group(0), template=("lt-1", "4"), **checks) == "4"
    assert checked_reserved_update(group(2), template=("lt-1", "3"), **checks) == "3"
    with pytest.raises(pulumi.RunError):
        checked_reserved_update(group(2), template=("lt-1", "4"), **checks)


# --- item 12: the Capacity Block's end, a reservation's placement group ------------------------------------

def test_a_capacity_block_stack_outputs_the_blocks_end():
    calls = answering({GET_CAPACITY_BLOCK_RESERVATION: lambda args: capacity_block_answer(
        args["id"], endDate="2026-12-04T11:30:00Z")})
    result = run_aws_main(p5_config({GPU: BLOCK}), stack="aws-p5", calls=calls)
    assert result.exports["capacityBlockEndDate"] == "2026-12-04T11:30:00Z"
    assert "capacityBlockEndDate" not in run_aws_main(p5_config({GPU: ODCR}), stack="aws-p5").exports


def gpu_template(result):
    return result.one(LAUNCH_TEMPLATE, "trainstack-eks-gpu").inputs


def test_an_odcr_made_in_a_cluster_placement_group_names_it_in_the_launch_template():
    # EC2 user guide capacity-reservations-launch.html: launch with the reservation's group and the reservation.
    result = run_aws_main(p5_config({GPU: ODCR}), stack="aws-p5", outputs=reservation_made_in("p5-reserved"))
    template = gpu_template(result)
    assert template["placement"]["groupName"] == "p5-reserved"
    assert template["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == RESERVATION


def test_an_odcr_made_in_no_group_or_another_accounts_group_names_none():
    for arn in ("", "arn:aws:ec2:us-west-2:210987654321:placement-group/ultra-7"):
        def outputs(type_, name, inputs, arn=arn):
            answer = provider_outputs(type_, name, inputs)
            return {**answer, "placementGroupArn": arn} if type_ == "aws:ec2/capacityReservation:CapacityReservation" \
                else answer
        template = gpu_template(run_aws_main(p5_config({GPU: ODCR}), stack="aws-p5", outputs=outputs))
        # No placement block at all (not an empty one): an empty one is a new template version, so a roll.
        assert template.get("placement") is None, template.get("placement")


# --- item 13: topology-aware placement only on capacity in one block ---------------------------------------

@pytest.mark.parametrize(("gpu", "on"), [({}, False), ({"capacityType": "SPOT"}, False), (ODCR, True), (BLOCK, True),
                                         ({"topologyAware": True}, True)],
                         ids=["on demand", "spot", "ODCR", "capacity block", "asked for on demand"])
def test_topology_aware_placement_is_on_by_default_only_where_capacity_comes_in_one_block(gpu, on):
    assert parse_aws_config(p5_config({GPU: gpu}), stack="aws-p5").gpu_nodes.topology_aware is on


# --- item 12: the preview role is per stack -----------------------------------------------------------------

def test_every_aws_stack_the_ci_previews_sets_its_preview_role_or_the_docs_say_how():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "pulumi-preview.yml").read_text())
    matrix = next(job["strategy"]["matrix"]["stack"] for job in workflow["jobs"].values() if "strategy" in job)
    docs = (REPO / "docs" / "aws.md").read_text()
    for stack in (s for s in matrix if s.startswith("aws")):
        stack_file = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
        documented = re.search(rf"pulumi config set trainstack:previewRoleArn \S+ --stack {re.escape(stack)}\b", docs)
        assert "trainstack:previewRoleArn" in stack_file or documented, stack


def test_asking_for_topology_on_a_plain_on_demand_group_is_honoured_with_one_warning(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    result = run_p5(p5_config({GPU: {"topologyAware": True}}))
    assert result.by_type("kubernetes:kueue.x-k8s.io/v1beta2:Topology")
    mine = [w for w in warnings if "topologyAware" in w]
    assert mine == [
        "trainstack:gpuNodes.topologyAware is true on ON_DEMAND capacity, which does not come as one reserved block: "
        "the cluster autoscaler's best-effort-atomic-scale-up class is not atomic on AWS, so EC2 may launch only "
        "part of the job's nodes, which bill while the job stays pending with no error. Fix: launch into a "
        "reservation or Capacity Block (trainstack:gpuNodes.capacityReservationId), or pulumi config set --path "
        "trainstack:gpuNodes.topologyAware false"]
    warnings.clear()
    run_p5(p5_config({GPU: ODCR}))
    assert not [w for w in warnings if "topologyAware" in w]
