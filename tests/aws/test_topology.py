"""Kueue Topology Aware Scheduling on the aws-p5 EFA group (trainstack/infra/aws/topology.py) under mocks.

Checked against: the EC2 instance topology layers per type (EC2 user guide
ec2-instance-topology-prerequisites.html: 3 network nodes on p5/p5e/p5en, 4 on p6-b200), the labels the
AWS cloud controller manager sets from them (kubernetes/cloud-provider-aws pkg/providers/v1/instances_v2.go),
Kueue v0.19.2's CRD schemas and its provisioning admission check, and the cluster autoscaler
(cluster-autoscaler-1.35.2: --enable-provisioning-requests and the ProvisioningRequest CRD; chart 9.59.0).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.aws.p5_runs import GPU, JOB_ENABLED, p5_config, run_p5, run_p5_expecting_error
from tests.aws.stack_runs import JOB_ENABLED as AWS_JOB_ENABLED
from tests.aws.stack_runs import RELEASE, config_with, run_main
from tests.stack_runs import assert_one_config_error_line
from tests.workloads.chart import render
from trainstack.infra.aws.cluster_autoscaler import PROVISIONING_REQUEST_CRD, PROVISIONING_REQUEST_CRD_SHA256
from trainstack.infra.aws.config import parse_aws_config
from trainstack.infra.aws.efa import EFA_INSTANCE_TYPES
from trainstack.infra.aws.topology import (
    ATOMIC_SCALE_UP_CLASS,
    PROVISIONING_API_ANNOTATION,
    efa_topology,
    serves_provisioning_requests,
)
from trainstack.infra.core.versions import KUEUE_API_VERSION

KUEUE = f"kubernetes:{KUEUE_API_VERSION}"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
SCHEMAS = json.loads((Path(__file__).parents[1] / "infra" / "fixtures" / "kueue-v0.19.2-v1beta2-schemas.json")
                     .read_text())
P5_LEVELS = ["topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
             "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname"]
NO_BUDGET = ("trainstack:maxHourlyUsd",)  # p5e has no price to check a budget against
# Where topology-aware placement is on by default: capacity in one block, here an On-Demand Capacity
# Reservation (the mocks read it as two p5.48xlarge in us-west-2a). TAS_ON asks for it on a plain group.
RESERVED = {"capacityReservationId": "cr-0123456789abcdef0"}
TAS_ON = {"topologyAware": True}


@pytest.fixture(scope="module")
def up():
    return run_p5(p5_config({**JOB_ENABLED, GPU: RESERVED}))


def _levels(result) -> list[str]:
    return [level["nodeLabel"] for level in result.one(f"{KUEUE}:Topology").inputs["spec"]["levels"]]


def _autoscaler_args(result) -> dict:
    return result.one(RELEASE, "trainstack-autoscaler").inputs["values"]["extraArgs"]


def test_the_efa_groups_topology_is_its_ec2_network_layers_then_the_host(up):
    assert _levels(up) == P5_LEVELS
    flavor = up.one(f"{KUEUE}:ResourceFlavor").inputs
    assert flavor["spec"]["topologyName"] == up.one(f"{KUEUE}:Topology").inputs["metadata"]["name"]
    # Kueue's CEL rule: a topology flavor selects its nodes; these are the managed node group's labels.
    assert flavor["spec"]["nodeLabels"]["trainstack/node-pool"] == "gpu"


@pytest.mark.parametrize(("instance_type", "layers"), [("p5e.48xlarge", 3), ("p5en.48xlarge", 3),
                                                       ("p6-b200.48xlarge", 4)])
def test_each_type_gets_as_many_layers_as_ec2_describes(instance_type, layers):
    assert EFA_INSTANCE_TYPES[instance_type].topology_layers == layers
    levels = _levels(run_p5(p5_config({GPU: {"instanceTypes": [instance_type], **TAS_ON}}, remove=NO_BUDGET)))
    assert levels == [f"topology.k8s.aws/network-node-layer-{n}" for n in range(1, layers + 1)] + [
        "kubernetes.io/hostname"]


def test_the_group_at_zero_is_provisioned_by_the_autoscaler_before_kueue_places_the_job(up):
    config = up.one(f"{KUEUE}:ProvisioningRequestConfig").inputs
    assert config["spec"]["provisioningClassName"] == ATOMIC_SCALE_UP_CLASS
    # A slow or short p5 launch lets bookings expire: Kueue retries for days instead of deactivating
    # the job after its default 3 retries (kueue v0.19.2 provisioningrequestconfig_types.go).
    assert config["spec"]["retryStrategy"] == {"backoffLimitCount": 1000, "backoffBaseSeconds": 60,
                                               "backoffMaxSeconds": 600}
    check = up.one(f"{KUEUE}:AdmissionCheck").inputs
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    flavor = up.one(f"{KUEUE}:ResourceFlavor").inputs["metadata"]["name"]
    assert up.one(f"{KUEUE}:ClusterQueue").inputs["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": check["metadata"]["name"], "onFlavors": [flavor]}]}


@pytest.mark.parametrize("kind", ["Topology", "AdmissionCheck", "ProvisioningRequestConfig", "ResourceFlavor",
                                  "ClusterQueue"])
def test_the_kueue_objects_are_valid_for_the_pinned_kueue(up, kind):
    inputs = up.one(f"{KUEUE}:{kind}").inputs
    obj = {key: inputs[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in inputs}
    schema = json.loads(json.dumps(SCHEMAS[kind]["openAPIV3Schema"]).replace("^(?i)", "(?i)^"))
    jsonschema.validate(obj, schema)


def test_the_autoscaler_serves_provisioning_requests_with_the_pinned_crd(up):
    assert _autoscaler_args(up)["enable-provisioning-requests"] == "true"
    crd = up.one(CRD)
    pinned = yaml.safe_load(PROVISIONING_REQUEST_CRD.read_text())
    assert {key: crd.inputs[key] for key in ("metadata", "spec")} == {key: pinned[key] for key in ("metadata", "spec")}
    assert crd.inputs["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    # Kueue v0.19.2 vendors the autoscaler's v1 client: the CRD must serve v1.
    assert [v["name"] for v in crd.inputs["spec"]["versions"] if v["served"] and v["storage"]] == ["v1"]
    assert crd.urn in up.one(RELEASE, "trainstack-autoscaler").dependencies


def test_the_vendored_crd_is_the_upstream_file_its_header_and_constant_name():
    # The pinned digest is of kubernetes/autoscaler cluster-autoscaler-1.35.2
    # cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml; an edit of the
    # vendored body, or a bump that updates only the file, fails here.
    text = PROVISIONING_REQUEST_CRD.read_bytes()
    header, separator, body = text.partition(b"\n---\n")
    assert separator and hashlib.sha256(b"---\n" + body).hexdigest() == PROVISIONING_REQUEST_CRD_SHA256
    assert PROVISIONING_REQUEST_CRD_SHA256.encode() in header
    assert all(line.startswith(b"#") for line in header.splitlines())


def test_kueue_starts_after_the_crd_and_restarts_when_it_appears(up):
    # Kueue enables its provisioning controller only if the API is served at its start; on destroy the
    # platform (Kueue's objects with it) goes first, the CRD after.
    crd = up.one(CRD).urn
    kueue = up.one(RELEASE, "trainstack-kueue")
    assert crd in kueue.dependencies
    assert crd in up.one(f"{KUEUE}:AdmissionCheck").dependencies
    annotations = kueue.inputs["values"]["controllerManager"]["manager"]["podAnnotations"]
    assert annotations == {PROVISIONING_API_ANNOTATION: "served"}


def test_the_job_prefers_one_host_and_the_chart_renders_it_in_efa_mode(up):
    values = up.one(RELEASE, "train").inputs["values"]
    assert values["kueue"]["preferredTopology"] == "kubernetes.io/hostname"
    template = next(o for o in render(values) if o["kind"] == "Job")["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == "kubernetes.io/hostname"
    assert template["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32
    assert up.exports["jobSubmission"]["values"]["kueue"]["preferredTopology"] == "kubernetes.io/hostname"


def test_switching_topology_on_replaces_the_stacks_running_job(up):
    # What docs/upgrading.md warns about: the first `up` of an aws-p5 stack from before topology-aware
    # placement adds kueue.preferredTopology to the job's values, a replace-on-change path of a
    # delete-before-replace release, so the running Job is deleted and created again.
    off = run_p5(p5_config({**JOB_ENABLED, GPU: {**RESERVED, "topologyAware": False}})).one(RELEASE, "train")
    on = up.one(RELEASE, "train")
    assert off.inputs["values"]["kueue"] == {"queueName": "training"}
    assert on.inputs["values"]["kueue"] == {"queueName": "training", "preferredTopology": "kubernetes.io/hostname"}
    assert "values.kueue" in on.replace_on_changes and on.delete_before_replace


def _without_tas(result) -> None:
    assert result.by_type(f"{KUEUE}:Topology") == [] and result.by_type(f"{KUEUE}:AdmissionCheck") == []
    assert result.by_type(CRD) == []
    assert "enable-provisioning-requests" not in _autoscaler_args(result)
    assert "controllerManager" not in result.one(RELEASE, "trainstack-kueue").inputs["values"]
    assert result.one(f"{KUEUE}:ResourceFlavor").inputs["metadata"]["name"] == "training-nodes"


def test_topology_aware_placement_can_be_switched_off():
    _without_tas(run_p5(p5_config({GPU: {**RESERVED, "topologyAware": False}})))
    _without_tas(run_p5(p5_config()))  # plain ON_DEMAND, the stack file's default: off unless asked


def test_the_aws_stack_without_efa_keeps_no_topology():
    _without_tas(run_main(config_with(AWS_JOB_ENABLED)))


def test_a_region_without_ec2_topology_is_off_by_default_and_refused_when_asked():
    milan = {"aws:region": "eu-south-1", "trainstack:availabilityZones": ["eu-south-1a", "eu-south-1b"],
             GPU: {"zone": "eu-south-1a"}}
    # The account's zones are us-west-2's in the mocks: the parser alone answers for another Region.
    milan_reserved = {**milan, GPU: {"zone": "eu-south-1a", **RESERVED}}
    assert parse_aws_config(p5_config(milan_reserved, remove=NO_BUDGET), stack="aws-p5").gpu_nodes.topology_aware is False
    assert parse_aws_config(p5_config({GPU: RESERVED}), stack="aws-p5").gpu_nodes.topology_aware is True
    asked = p5_config({**milan, GPU: {"zone": "eu-south-1a", "topologyAware": True}}, remove=NO_BUDGET)
    assert_one_config_error_line(*run_p5_expecting_error(asked), f"{GPU}.topologyAware",
                                 "EC2 describes no instance topology in eu-south-1")


def test_topology_aware_is_refused_on_a_group_without_efa():
    config = p5_config({GPU: {"efa": False, "zone": None, "topologyAware": True}})
    assert_one_config_error_line(*run_p5_expecting_error(config), f"{GPU}.topologyAware", "true needs an EFA group")


def test_a_fixed_size_group_needs_no_provisioning():
    # Without the autoscaler `pulumi up` sets the size: the nodes exist when Kueue places the job.
    result = run_p5(p5_config({"trainstack:clusterAutoscaler": False, GPU: RESERVED}))
    assert _levels(result) == P5_LEVELS
    assert result.by_type(f"{KUEUE}:AdmissionCheck") == [] and result.by_type(CRD) == []
    assert "controllerManager" not in result.one(RELEASE, "trainstack-kueue").inputs["values"]


def test_without_kueue_the_autoscaler_serves_no_provisioning_requests():
    result = run_p5(p5_config({"trainstack:job": {"queue": False}, GPU: RESERVED}))
    assert result.by_type(CRD) == [] and "enable-provisioning-requests" not in _autoscaler_args(result)


def test_the_topology_is_the_autoscaler_class_only_when_the_autoscaler_sizes_the_group():
    instance = EFA_INSTANCE_TYPES["p5.48xlarge"]
    assert efa_topology(instance, autoscaled=True).provisioning_class == ATOMIC_SCALE_UP_CLASS
    assert efa_topology(instance, autoscaled=False).provisioning_class is None


def test_the_autoscaler_serves_provisioning_requests_only_for_a_queued_topology_it_sizes():
    sized = efa_topology(EFA_INSTANCE_TYPES["p5.48xlarge"], autoscaled=True)
    assert serves_provisioning_requests(sized, autoscaler=True, queued=True)
    assert not serves_provisioning_requests(sized, autoscaler=True, queued=False)
    assert not serves_provisioning_requests(sized, autoscaler=False, queued=True)
    assert not serves_provisioning_requests(efa_topology(EFA_INSTANCE_TYPES["p5.48xlarge"], autoscaled=False),
                                            autoscaler=True, queued=True)
    assert not serves_provisioning_requests(None, autoscaler=True, queued=True)
