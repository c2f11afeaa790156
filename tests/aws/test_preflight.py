"""Preflight (trainstack/infra/aws/preflight.py) under mocks: what the account answers decides whether the preview
goes on. Both answers are tested for each question, and a failed check must leave nothing registered
but the stack's components and providers."""

from __future__ import annotations

import pulumi
import pytest

from tests import pulumi_harness
from tests.aws.stack_runs import (
    ACCOUNT,
    DEPLOYER_ROLE_ARN,
    EKS_CLUSTER,
    GET_ADDON_VERSION,
    GET_CALLER_IDENTITY,
    GET_CLUSTER_VERSIONS,
    GET_CLUSTERS,
    GET_INSTANCE_TYPE_OFFERINGS,
    clusters_answer,
    config_with,
    filter_values,
    provider_calls,
    run_main,
)


def _answering(token: str, answer):
    def calls(called: str, args: dict) -> dict:
        return answer(args) if called == token else provider_calls(called, args)
    return calls


def _offered_except(instance_type: str, zone: str):
    def answer(args: dict) -> dict:
        pairs = [(t, z) for t in filter_values(args, "instance-type") for z in filter_values(args, "location")
                 if (t, z) != (instance_type, zone)]
        return {"id": "us-west-2", "instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
                "locationTypes": ["availability-zone"] * len(pairs)}
    return answer


def test_types_offered_in_every_zone_let_the_preview_through():
    result = run_main(config_with({"trainstack:gpuNodes": {"instanceTypes": ["g5.xlarge", "g6.xlarge"]}}),
                      preview=True)
    asked = next(args for token, args in result.invokes if token == GET_INSTANCE_TYPE_OFFERINGS)
    assert filter_values(asked, "instance-type") == ["g5.xlarge", "g6.xlarge", "t3.medium"]
    assert len(result.registrations) > 50


@pytest.mark.parametrize(("token", "answer", "line"), [
    (GET_INSTANCE_TYPE_OFFERINGS, _offered_except("g4dn.xlarge", "us-west-2d"),
     "trainstack:gpuNodes.instanceTypes: g4dn.xlarge is not offered in us-west-2d (offered in: us-west-2a, us-west-2b, "
     "us-west-2c). Fix: drop us-west-2d from trainstack:availabilityZones, or choose another instance type"),
    (GET_INSTANCE_TYPE_OFFERINGS, _offered_except("t3.medium", "us-west-2a"),
     "trainstack:systemNodes.instanceType: t3.medium is not offered in us-west-2a"),
    (GET_CLUSTER_VERSIONS, lambda args: {"id": "us-west-2", "clusterVersions": []},
     "trainstack:kubernetesVersion: EKS offers no Kubernetes 1.35 in us-west-2. Fix: pulumi config set "
     "trainstack:kubernetesVersion 1.35"),
    (GET_ADDON_VERSION, lambda args: {"id": "a", "addonName": args["addonName"], "version": "v2.1.0-eksbuild.1",
                                      "kubernetesVersion": args["kubernetesVersion"]},
     "trainstack:kubernetesVersion: EKS offers the aws-efs-csi-driver add-on for Kubernetes 1.35 up to "
     "v2.1.0-eksbuild.1, not the pinned v3.3.0-eksbuild.1"),
])
def test_a_wrong_answer_fails_the_preview_with_one_line_before_anything_billable(token, answer, line, monkeypatch):
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with(), preview=True, calls=_answering(token, answer))

    assert line in str(raised.value) and "\n" not in str(raised.value)
    registered = {r.type for r in monitors[0].recorded}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_an_existing_network_skips_the_zone_check():
    existing = {"trainstack:existingNetwork": {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-1", "subnet-2"]}}
    result = run_main(config_with(existing), preview=True)
    assert GET_INSTANCE_TYPE_OFFERINGS not in [token for token, _ in result.invokes]


def _registered_when_refused(monkeypatch, config, calls=provider_calls) -> tuple[str, set[str]]:
    """Run a preview that preflight must refuse: (its one error line, the resource types it registered)."""
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config, preview=True, calls=calls)
    return str(raised.value), {r.type for r in monitors[0].recorded}


def test_a_cluster_admin_who_runs_pulumi_is_refused_before_any_cloud_resource(monkeypatch):
    # sts answers with the deployer's SSO session; the same role listed as an admin would fail the
    # apply (ResourceInUseException) once the cluster exists. Nothing but providers and the stack's
    # components may be registered when that is found out.
    line, registered = _registered_when_refused(
        monkeypatch, config_with({"trainstack:clusterAdmins": [DEPLOYER_ROLE_ARN]}))

    assert line.startswith(f"trainstack:clusterAdmins: {DEPLOYER_ROLE_ARN} is the identity running Pulumi")
    assert "\n" not in line and ". Fix: " in line
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_the_ci_preview_role_running_pulumi_gets_its_read_only_entry():
    # In CI `pulumi preview` runs as trainstack:previewRoleArn itself (an assumed-role session of it),
    # as the README tells users to configure it: that must not be refused.
    preview_role = f"arn:aws:iam::{ACCOUNT}:role/github-preview"

    def calls(token: str, args: dict) -> dict:
        if token == GET_CALLER_IDENTITY:
            return {"id": ACCOUNT, "accountId": ACCOUNT, "userId": "AROAEXAMPLE:gha",
                    "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/github-preview/GitHubActions"}
        return provider_calls(token, args)

    result = run_main(config_with({"trainstack:previewRoleArn": preview_role}), preview=True, calls=calls)
    entries = result.one(EKS_CLUSTER).inputs["accessEntries"]
    assert entries[f"preview-{ACCOUNT}-role-github-preview"]["principalArn"] == preview_role
    assert "ClusterAdmin" not in str(entries)


def test_a_subnet_of_another_vpc_is_refused_before_any_cloud_resource(monkeypatch):
    # The existing network's subnets are looked up while the program runs (blocking invokes), before
    # anything but providers and components is registered.
    existing = {"trainstack:existingNetwork": {"vpcId": "vpc-0abc", "privateSubnetIds": ["subnet-a",
                                                                                        "subnet-elsewhere"]}}
    line, registered = _registered_when_refused(monkeypatch, config_with(existing))
    assert line.startswith("trainstack:existingNetwork.privateSubnetIds: subnet-elsewhere is in vpc-0other")
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def _cluster_exists(token: str, args: dict) -> dict:
    """The region already has trainstack-aws (created by someone else, e.g. CI's deploy role)."""
    return clusters_answer(["trainstack-aws"]) if token == GET_CLUSTERS else provider_calls(token, args)


@pytest.mark.parametrize("preview", [True, False])
def test_a_listed_admin_may_run_pulumi_once_the_cluster_exists(preview):
    # EKS gave its creator (not this admin) the bootstrap entry; this admin's own entry is the one it
    # was listed for, so preview and up go on.
    result = run_main(config_with({"trainstack:clusterAdmins": [DEPLOYER_ROLE_ARN]}), preview=preview,
                      calls=_cluster_exists)
    entries = result.one(EKS_CLUSTER).inputs["accessEntries"]
    assert entries[f"admin-{ACCOUNT}-role-AWSReservedSSO_Deployer"]["principalArn"] == DEPLOYER_ROLE_ARN


def _as_preview_role(token: str, args: dict) -> dict:
    if token == GET_CALLER_IDENTITY:
        return {"id": ACCOUNT, "accountId": ACCOUNT, "userId": "AROAEXAMPLE:gha",
                "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/github-preview/GitHubActions"}
    return provider_calls(token, args)


def test_the_preview_role_creating_the_cluster_in_a_real_up_is_refused_before_any_cloud_resource(monkeypatch):
    # `pulumi up` as the preview role on a region without the cluster: EKS makes the creator admin, and
    # the read-only entry for the same principal would fail the apply once the cluster exists.
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    preview_role = f"arn:aws:iam::{ACCOUNT}:role/github-preview"
    with pytest.raises(pulumi.RunError) as raised:
        run_main(config_with({"trainstack:previewRoleArn": preview_role}), preview=False, calls=_as_preview_role)
    line = str(raised.value)
    assert line.startswith(f"trainstack:previewRoleArn: {preview_role} is the identity running `pulumi up`")
    assert "\n" not in line and ". Fix: " in line
    registered = {r.type for r in monitors[0].recorded}
    assert registered and all(t.startswith(("trainstack:", "pulumi:providers:")) for t in registered), registered


def test_a_pulumi_cli_older_than_the_log_group_adoption_needs_is_refused_before_anything(monkeypatch):
    # Importing a log group with a diff (trainstack/infra/aws/cluster.py) needs the engine of pulumi/pulumi#19339; the
    # program asks the CLI (RequirePulumiVersion), which refuses itself when older.
    monitors = pulumi_harness.recording_monitors(monkeypatch)
    monkeypatch.setattr(pulumi_harness, "CLI_VERSION", "3.173.0")
    with pytest.raises(Exception, match="Pulumi CLI version 3.173.0 does not satisfy the version range '>=3.174.0'"):
        run_main(config_with(), preview=True)
    assert not [r for r in monitors[0].recorded if r.type.startswith(("aws:", "eks:"))]
    monkeypatch.setattr(pulumi_harness, "CLI_VERSION", "3.174.0")
    assert run_main(config_with(), preview=True).registrations
