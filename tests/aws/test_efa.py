"""The aws-p5 stack: an EFA GPU node group (trainstack/infra/aws/efa.py, efa_networking.py, cluster.py) under mocks.

What is checked against what upstream builds (terraform-aws-modules/terraform-aws-eks v21.19.0
modules/eks-managed-node-group, enable_efa_support + enable_efa_only): one interface per network card,
the first `efa` on device 0, the rest `efa-only` on device 1, all with the cluster's and the EFA
security group; a cluster placement group; a self-referencing all-traffic rule, ingress and egress.
"""

from __future__ import annotations

import json

import pulumi
import pytest

from tests import pulumi_harness
from tests.aws.p5_runs import GOLDEN, GPU, JOB_ENABLED, p5_config, run_p5, run_p5_expecting_error
from tests.aws.stack_runs import (
    BUCKET,
    CLUSTER_SECURITY_GROUP,
    GET_CAPACITY_BLOCK_RESERVATION,
    GET_INSTANCE_TYPE,
    GET_INSTANCE_TYPE_OFFERINGS,
    GET_PARAMETER,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    PLACEMENT_GROUP,
    RELEASE,
    SECURITY_GROUP,
    filter_values,
    instance_type_answer,
    provider_calls,
    provider_outputs,
    reservation_made_in,
)
from tests.aws.stack_runs import run_main as run_aws_main
from tests.golden import assert_matches_golden
from tests.stack_runs import assert_one_config_error_line
from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES

INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
CLUSTER_QUEUE_KIND = "ClusterQueue"
RESERVATION = "cr-0123456789abcdef0"


@pytest.fixture(scope="module")
def up():
    return run_p5(p5_config(JOB_ENABLED))


def test_resource_graph_matches_the_golden_file(up):
    assert_matches_golden(up, GOLDEN)


def _gpu_template(result):
    return result.one(LAUNCH_TEMPLATE, "trainstack-eks-gpu")


@pytest.mark.parametrize("instance_type", sorted(EFA_INSTANCE_TYPES))
def test_the_launch_template_has_every_efa_of_the_type(instance_type):
    # p5e and p6-b200 have no price in trainstack/infra/cost/prices.yaml: without the budget key there is nothing to check.
    config = p5_config({GPU: {"instanceTypes": [instance_type]}}, remove=("trainstack:maxHourlyUsd",))
    interfaces = _gpu_template(run_p5(config)).inputs["networkInterfaces"]

    expected = EFA_INSTANCE_TYPES[instance_type].efa_interfaces
    assert [i["networkCardIndex"] for i in interfaces] == list(range(expected))
    assert (interfaces[0]["interfaceType"], interfaces[0]["deviceIndex"]) == ("efa", 0)
    assert {(i["interfaceType"], i["deviceIndex"]) for i in interfaces[1:]} == {("efa-only", 1)}
    for interface in interfaces:
        assert interface["securityGroups"] == [CLUSTER_SECURITY_GROUP, "trainstack-eks-gpu-efa-id"]
        assert interface["associatePublicIpAddress"] == "false"


def test_the_efa_group_launches_into_one_zone_and_its_placement_group(up):
    template = _gpu_template(up)
    placement = up.one(PLACEMENT_GROUP)
    assert placement.inputs["strategy"] == "cluster"
    assert template.inputs["placement"]["groupName"].startswith("trainstack-eks-gpu-efa-")
    group = up.one(NODE_GROUP, "trainstack-eks-gpu")
    assert group.inputs["subnetIds"] == ["trainstack-network-private-us-west-2a-id"]
    assert group.inputs["capacityType"] == "ON_DEMAND"
    assert group.inputs["instanceTypes"] == ["p5.48xlarge"]
    # Scale from zero: the autoscaler's template node learns the EFAs from the group's tags.
    assert group.inputs["tags"]["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == "32"
    assert group.inputs["scalingConfig"]["minSize"] == 0


def test_the_efa_security_group_allows_all_traffic_within_itself_both_ways(up):
    group = up.one(SECURITY_GROUP, "trainstack-eks-gpu-efa")
    for rule_type in (INGRESS_RULE, EGRESS_RULE):
        rule = next(r for r in up.by_type(rule_type) if r.name.startswith("trainstack-eks-gpu-efa"))
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.inputs["securityGroupId"] == rule.inputs["referencedSecurityGroupId"] == "trainstack-eks-gpu-efa-id"
        assert rule.parent == group.parent
    assert "cidrIpv4" not in str([r.inputs for r in up.by_type(INGRESS_RULE) if "efa" in r.name])


def test_a_capacity_block_names_its_reservation_type_and_market_in_the_template():
    result = run_p5(p5_config({GPU: {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": RESERVATION}}))
    template = _gpu_template(result).inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["instanceType"] == "p5.48xlarge"
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": RESERVATION}}
    group = result.one(NODE_GROUP, "trainstack-eks-gpu").inputs
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in group


def test_an_on_demand_reservation_is_targeted_without_a_market_type():
    result = run_p5(p5_config({GPU: {"capacityReservationId": RESERVATION}}))
    template = _gpu_template(result).inputs
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": RESERVATION}
    assert "instanceMarketOptions" not in template and "instanceType" not in template


@pytest.mark.parametrize("capacity", [{"capacityReservationId": RESERVATION},
                                      {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": RESERVATION}],
                         ids=["on-demand reservation", "capacity block"])
def test_a_reservation_launches_without_a_new_placement_group(capacity):
    # Reserved capacity is not inside a new, empty placement group: a launch constrained to one fails.
    result = run_p5(p5_config({GPU: capacity}))
    # The mocked reservation was made in no group: the template names none (test_p5_capacity.py: one made in one).
    assert not (_gpu_template(result).inputs.get("placement") or {}).get("groupName")
    assert result.by_type(PLACEMENT_GROUP) == []


@pytest.mark.parametrize(("capacity", "outputs"), [
    ({}, provider_outputs),
    ({"capacityReservationId": RESERVATION}, provider_outputs),
    ({"capacityReservationId": RESERVATION}, reservation_made_in("p5-reserved")),
], ids=["no reservation", "reservation made in no group", "reservation made in the group"])
def test_a_named_placement_group_is_used_and_none_is_created(capacity, outputs):
    # A reservation made in no group still deploys (with a warning: tests/aws/test_efa_placement_group.py).
    result = run_aws_main(p5_config({GPU: {**capacity, "placementGroup": "p5-reserved"}}), stack="aws-p5",
                          calls=provider_calls, outputs=outputs)
    assert _gpu_template(result).inputs["placement"] == {"groupName": "p5-reserved"}
    # Only preflight's read of the named group (tests/aws/test_efa_placement_group.py), no new group.
    assert [r.read for r in result.by_type(PLACEMENT_GROUP)] == [True]


def test_the_efa_device_plugin_runs_on_the_gpu_nodes_at_its_pinned_version(up):
    release = next(r for r in up.by_type(RELEASE) if r.name == "trainstack-efa-device-plugin")
    assert (release.inputs["chart"], release.inputs["version"]) == ("aws-efa-k8s-device-plugin", "v0.5.30")
    assert release.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    values = release.inputs["values"]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in values["tolerations"]
    assert values["nodeSelector"]["trainstack/node-pool"] == "gpu"


def test_the_queue_quota_counts_every_efa_of_the_pool(up):
    queue = next(r for r in up.registrations if r.inputs.get("kind") == CLUSTER_QUEUE_KIND)
    (group,) = queue.inputs["spec"]["resourceGroups"]
    quotas = {q["name"]: q["nominalQuota"] for q in group["flavors"][0]["resources"]}
    assert quotas["vpc.amazonaws.com/efa"] == "64"  # 2 nodes x 32
    assert quotas["nvidia.com/gpu"] == 16
    assert "vpc.amazonaws.com/efa" in group["coveredResources"]


def test_the_job_runs_in_efa_mode_with_gpudirect_rdma(up):
    job = next(r for r in up.by_type(RELEASE) if r.inputs.get("values", {}).get("gpuNetworking"))
    networking = job.inputs["values"]["gpuNetworking"]
    assert networking["mode"] == "efa"
    assert networking["efa"]["interfaces"] == 32
    assert networking["efa"]["ncclEnv"]["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_the_estimate_prices_the_p5_nodes_and_teardown_keeps_the_bucket(up):
    estimate = json.loads(json.dumps(up.exports["estimatedHourlyUsd"]))
    assert estimate["gpuNode"]["type"] == "p5.48xlarge"
    assert estimate["gpuNode"]["usdPerNode"] >= 55.04  # after AWS's June 2025 cut (prices.yaml)
    bucket = up.one(BUCKET)
    assert bucket.retain_on_delete is True and bucket.inputs["forceDestroy"] is False


BAD_CONFIGS = [
    ("unknown EFA instance type", {GPU: {"instanceTypes": ["g5.48xlarge"]}}, f"{GPU}.instanceTypes",
     "g5.48xlarge is not an EFA GPU type trainstack knows (p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge)"),
    ("two EFA types", {GPU: {"instanceTypes": ["p5.48xlarge", "p5en.48xlarge"]}}, f"{GPU}.instanceTypes",
     "an EFA group launches one instance type"),
    ("EFA count mismatch", {GPU: {"efaInterfaces": 16}}, f"{GPU}.efaInterfaces",
     "16, but p5.48xlarge has 32 network cards"),
    ("capacity block without reservation", {GPU: {"capacityType": "CAPACITY_BLOCK"}}, f"{GPU}.capacityReservationId",
     "not set: a Capacity Block node group launches into the block's reservation"),
    ("reservation ID typo", {GPU: {"capacityReservationId": "cr-xyz"}}, f"{GPU}.capacityReservationId",
     "'cr-xyz' is not a capacity reservation ID"),
    ("spot into a reservation", {GPU: {"capacityType": "SPOT", "capacityReservationId": RESERVATION}},
     f"{GPU}.capacityReservationId", "spot instances never launch into a reservation"),
    ("zone outside the stack's zones", {GPU: {"zone": "us-west-2c"}}, f"{GPU}.zone",
     "'us-west-2c' is not one of trainstack:availabilityZones"),
    ("EFA keys without efa", {GPU: {"efa": False}}, f"{GPU}.zone", "set, but gpuNodes.efa is not true"),
    # A reservation is applied only in the EFA launch template: elsewhere it would be silently ignored.
    ("reservation without efa", {GPU: {"efa": False, "zone": None, "capacityReservationId": RESERVATION}},
     f"{GPU}.capacityReservationId", "set, but gpuNodes.efa is not true (it applies to EFA groups only)"),
    ("placement group without efa", {GPU: {"efa": False, "zone": None, "placementGroup": "p5-reserved"}},
     f"{GPU}.placementGroup", "set, but gpuNodes.efa is not true (it applies to EFA groups only)"),
    ("placement group name", {GPU: {"placementGroup": "p5 \u00e9"}}, f"{GPU}.placementGroup",
     "is not a placement group name"),
    ("EFA on an existing network", {"trainstack:existingNetwork": {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-a"]}},
     f"{GPU}.efa", "not supported with trainstack:existingNetwork yet"),
]
# An existing network without listed zones is refused for what it is, not for a missing gpuNodes.zone.
EXISTING_WITHOUT_ZONES = ({"trainstack:existingNetwork": {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-a"]},
                           GPU: {"zone": None}}, ("trainstack:availabilityZones",))


@pytest.mark.parametrize(("overrides", "key", "fragment"), [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_bad_efa_config_stops_before_any_resource_with_one_line(overrides, key, fragment):
    assert_one_config_error_line(*run_p5_expecting_error(p5_config(overrides)), key, fragment)


def test_an_existing_network_without_zones_is_refused_for_the_network():
    overrides, remove = EXISTING_WITHOUT_ZONES
    assert_one_config_error_line(*run_p5_expecting_error(p5_config(overrides, remove)), f"{GPU}.efa",
                                 "not supported with trainstack:existingNetwork yet")


def test_a_capacity_block_is_refused_for_a_group_without_efa():
    from tests.aws.stack_runs import config_with, run_main_expecting_error
    stop = run_main_expecting_error(config_with({GPU: {"capacityType": "CAPACITY_BLOCK"}}))
    assert_one_config_error_line(*stop, f"{GPU}.capacityType", "(Capacity Blocks are for gpuNodes.efa groups)")


def test_a_reservation_is_refused_for_a_group_without_efa():
    # The review's reproduction: the aws stack's spot-pool types, on demand, into a reservation.
    from tests.aws.stack_runs import config_with, run_main_expecting_error
    stop = run_main_expecting_error(config_with({GPU: {"instanceTypes": ["g5.xlarge"], "capacityType": "ON_DEMAND",
                                                       "capacityReservationId": RESERVATION}}))
    assert_one_config_error_line(*stop, f"{GPU}.capacityReservationId", "it applies to EFA groups only")


def _answering(token: str, answer):
    def calls(called: str, args: dict) -> dict:
        return answer(args) if called == token else provider_calls(called, args)
    return calls


def _not_offered_in(zone: str):
    def answer(args: dict) -> dict:
        pairs = [(t, z) for t in filter_values(args, "instance-type") for z in filter_values(args, "location")
                 if not (t == "p5.48xlarge" and z == zone)]
        return {"id": "us-west-2", "instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
                "locationTypes": ["availability-zone"] * len(pairs)}
    return answer


@pytest.mark.parametrize(("token", "answer", "line"), [
    (GET_INSTANCE_TYPE_OFFERINGS, _not_offered_in("us-west-2a"),
     "trainstack:gpuNodes.zone: p5.48xlarge is not offered in us-west-2a"),
    (GET_INSTANCE_TYPE, lambda args: instance_type_answer(args["instanceType"], efa_interfaces=16),
     "trainstack:gpuNodes.instanceTypes: ec2:DescribeInstanceTypes gives p5.48xlarge 16 EFA interfaces, 16 network "
     "cards, but trainstack/infra/aws/efa.py builds 32 EFA interfaces for it"),
    (GET_INSTANCE_TYPE, lambda args: {**instance_type_answer(args["instanceType"]), "efaSupported": False},
     "trainstack:gpuNodes.instanceTypes: p5.48xlarge does not support EFA in this region"),
    (GET_PARAMETER, lambda args: {"id": args["name"], "name": args["name"], "type": "String", "value": "",
                                  "arn": "arn", "version": 1},
     "trainstack:kubernetesVersion: EKS publishes no AL2023_x86_64_NVIDIA AMI for Kubernetes 1.35 in us-west-2"),
])
def test_preflight_refuses_what_the_account_does_not_offer_before_anything_billable(token, answer, line, monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_p5(preview=True, calls=_answering(token, answer))

    assert line in str(raised.value) and "\n" not in str(raised.value) and ". Fix: " in str(raised.value)
    registered = {r.type for r in monitors[0].recorded}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_preflight_asks_for_the_efa_type_in_its_zone_only():
    result = run_p5(preview=True)
    offerings = [args for token, args in result.invokes if token == GET_INSTANCE_TYPE_OFFERINGS]
    efa_asks = [a for a in offerings if filter_values(a, "instance-type") == ["p5.48xlarge"]]
    assert [filter_values(a, "location") for a in efa_asks] == [["us-west-2a"]]
    assert all("p5.48xlarge" not in filter_values(a, "instance-type") for a in offerings if a not in efa_asks)
    (ami,) = [args for token, args in result.invokes if token == GET_PARAMETER]
    assert ami["name"] == "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id"


def test_the_nccl_check_command_runs_the_allreduce_over_efa_and_fails_below_the_bar(up):
    command = up.exports["ncclCheckCommand"]
    assert "-f workloads/charts/training-job/profiles/eks-efa.yaml" in command
    assert "-f workloads/charts/training-job/profiles/nccl-allreduce.yaml" in command
    assert "--set gpuNetworking.efa.interfaces=32" in command
    assert "--set ncclCheck.minBusBandwidthGBps=100" in command
    assert "--set-string image.digest=sha256:" in command
    assert command.endswith("helm uninstall nccl-check -n default; test $passed -eq 0")


def test_the_bar_in_the_stack_is_the_profiles():
    import yaml

    from trainstack.infra.aws.efa import NCCL_MIN_BUS_BANDWIDTH_GBPS
    from trainstack.infra.core.paths import TRAINING_JOB_CHART_DIR

    profile = yaml.safe_load((TRAINING_JOB_CHART_DIR / "profiles" / "eks-efa.yaml").read_text())
    assert profile["ncclCheck"]["minBusBandwidthGBps"] == NCCL_MIN_BUS_BANDWIDTH_GBPS
    assert profile["gpuNetworking"]["mode"] == "efa"


def test_the_aws_stack_without_efa_has_no_nccl_check():
    from tests.aws.stack_runs import run_main
    assert "ncclCheckCommand" not in run_main().exports


def test_the_preview_shows_the_estimate_and_the_budget_guard_stops_two_p5_at_100_usd():
    preview = run_p5(preview=True)
    assert preview.exports["estimatedHourlyUsd"]["atMax"]["nodes"] == 2
    assert preview.exports["estimatedHourlyUsd"]["atMax"]["usd"] > 2 * 55.04
    assert_one_config_error_line(*run_p5_expecting_error(p5_config({"trainstack:maxHourlyUsd": 100})),
                                 "trainstack:maxHourlyUsd", "p5.48xlarge")


def test_an_unpriced_efa_type_is_refused_by_the_budget_guard_rather_than_guessed():
    assert_one_config_error_line(
        *run_p5_expecting_error(p5_config({GPU: {"instanceTypes": ["p5e.48xlarge"]}})),
        "trainstack:maxHourlyUsd", "cannot check the budget: p5e.48xlarge has no us-west-2 price")


def test_the_efa_stacks_image_is_built_with_the_efa_installer_and_the_aws_stacks_without(up):
    from tests.aws.stack_runs import IMAGE, run_main

    image = up.one(IMAGE, "trainstack-image")
    assert image.inputs["buildArgs"] == {"EFA_INSTALLER_VERSION": "1.51.0"}
    assert "buildArgs" not in run_main().one(IMAGE, "trainstack-image").inputs


def test_jobs_submitted_to_the_stack_run_in_efa_mode_too(up):
    # `trainstack submit` renders every job from the stack's shared values (jobSubmission.values).
    values = up.exports["jobSubmission"]["values"]
    assert values["gpuNetworking"]["mode"] == "efa" and values["gpuNetworking"]["efa"]["interfaces"] == 32
    assert values["resources"]["requests"]["cpu"] == "160"
    # GPUs per pod are the CLI's, per job (job_submission.PER_JOB_RESOURCE_KEYS), from the pool's figure.
    assert "gpusPerPod" not in values["resources"] and up.exports["jobSubmission"]["gpusPerNode"] == 8


def test_the_golden_file_holds_no_secret_values():
    text = GOLDEN.read_text()
    assert "ecr-token-that-must-stay-secret" not in text
    assert '"kubeconfig": "[secret]"' in text


def test_the_efa_nodes_user_data_lifts_the_containers_memlock_limit_and_keeps_nofile(up):
    import base64
    import email

    import yaml

    message = email.message_from_bytes(base64.b64decode(_gpu_template(up).inputs["userData"]))
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    (part,) = message.get_payload()
    assert part.get_content_type() == "application/node.eks.aws"
    config = yaml.safe_load(part.get_payload())
    assert (config["apiVersion"], config["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
    assert "cluster" not in config["spec"]  # EKS's own NodeConfig part names the cluster
    limits = {r["type"]: (r["soft"], r["hard"]) for r in config["spec"]["containerd"]["baseRuntimeSpec"]["process"]["rlimits"]}
    assert limits["RLIMIT_NOFILE"] == (65536, 1048576)  # the AMI's default, which the list replaces
    soft, hard = limits["RLIMIT_MEMLOCK"]
    assert soft == hard >= 2**40
    # nodeadm merges through float64: the value must come back as the same integer, inside uint64.
    assert int(float(hard)) == hard < 2**64


def test_only_the_efa_group_carries_user_data():
    from tests.aws.stack_runs import run_main
    assert all("userData" not in t.inputs for t in run_main().by_type(LAUNCH_TEMPLATE))


def _capacity_block_answering(**changes):
    from tests.aws.stack_runs import capacity_block_answer
    return _answering(GET_CAPACITY_BLOCK_RESERVATION, lambda args: capacity_block_answer(args["id"], **changes))


def _no_such_block(args: dict):
    """The provider's answer for an ID that is no Capacity Block: a failed invoke."""
    return {}, [("id", f"no EC2 Capacity Block Reservation found for ID {args['id']}")]


def _odcr_reading(**changes):
    from tests.aws.stack_runs import CAPACITY_RESERVATION, provider_outputs

    def outputs(type_: str, name: str, inputs: dict) -> dict:
        answer = provider_outputs(type_, name, inputs)
        return {**answer, **changes} if type_ == CAPACITY_RESERVATION else answer
    return outputs


BLOCK = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": RESERVATION}
ODCR = {"capacityReservationId": RESERVATION}
KEY = f"{GPU}.capacityReservationId: {RESERVATION}"


@pytest.mark.parametrize(("capacity", "calls", "outputs", "line"), [
    (BLOCK, _capacity_block_answering(instanceType="p5en.48xlarge"), None,
     f"{KEY} reserves p5en.48xlarge, but the group launches p5.48xlarge"),
    (BLOCK, _capacity_block_answering(availabilityZone="us-west-2b"), None,
     f"{KEY} is in us-west-2b, but the group is in us-west-2a"),
    (BLOCK, _capacity_block_answering(state="expired"), None, f"{KEY} is expired: nothing launches into it"),
    # The provider's read returns only capacity-block reservations: an ODCR's ID fails the read itself.
    (BLOCK, _answering(GET_CAPACITY_BLOCK_RESERVATION, _no_such_block), None,
     f"{KEY} is not a Capacity Block of this account in us-west-2 (ec2:DescribeCapacityReservations answered: "),
    # ...and should the read return an On-Demand Capacity Reservation anyway, its type says so.
    (BLOCK, _capacity_block_answering(reservationType="default"), None,
     f"{KEY} is not a Capacity Block of this account in us-west-2 (ec2:DescribeCapacityReservations answered: "
     "reservation type default, not capacity-block)"),
    (ODCR, None, _odcr_reading(instanceType="p5en.48xlarge"),
     f"{KEY} reserves p5en.48xlarge, but the group launches p5.48xlarge"),
    (ODCR, None, _odcr_reading(availabilityZone="us-west-2c"), f"{KEY} is in us-west-2c, but the group is in us-west-2a"),
], ids=["block type", "block zone", "block expired", "block is an ODCR", "block read as an ODCR", "ODCR type",
        "ODCR zone"])
def test_preflight_refuses_a_reservation_that_does_not_fit_the_group(capacity, calls, outputs, line, monkeypatch):
    from tests.aws.stack_runs import provider_calls, provider_outputs
    from tests.aws.stack_runs import run_main as run_aws_main

    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_aws_main(p5_config({GPU: capacity}), stack="aws-p5", preview=True, calls=calls or provider_calls,
                     outputs=outputs or provider_outputs)

    assert line in str(raised.value) and "\n" not in str(raised.value) and ". Fix: " in str(raised.value)
    # Nothing but components, providers and the reservation's read.
    created = {r.type for r in monitors[0].recorded if not r.read}
    assert created and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in created), created


@pytest.mark.parametrize("capacity", [BLOCK, ODCR], ids=["capacity block", "on-demand reservation"])
def test_preflight_passes_a_reservation_for_the_groups_type_and_zone(capacity):
    from tests.aws.stack_runs import CAPACITY_RESERVATION

    result = run_p5(p5_config({GPU: capacity}), preview=True)
    asked = [args["id"] for token, args in result.invokes if token == GET_CAPACITY_BLOCK_RESERVATION]
    read = [r for r in result.registrations if r.type == CAPACITY_RESERVATION]
    if capacity is BLOCK:  # read for preflight and for the capacityBlockEndDate output
        assert set(asked) == {RESERVATION} and read == []
    else:  # read for preflight and for the reservation's placement group in the launch template
        assert asked == [] and [r.read for r in read] == [True, True]
