"""Preflight: what only the AWS account can answer, asked during `pulumi preview` before anything is created.

- Is every chosen availability zone one of the region's, available to this account? (ec2:DescribeAvailabilityZones)
- Is every instance type (GPU and system) offered in every chosen availability zone?
  (ec2:DescribeInstanceTypeOfferings; an EKS node group whose subnets include a zone without the
  type fails only after the cluster has been created, 15 minutes in.) An EFA group's type is asked
  for its one zone (gpuNodes.zone) only.
- For an EFA group: does the account describe the type as efa.py's table has it (EFA supported, as
  many EFA interfaces and network cards, x86_64 for the AL2023_x86_64_NVIDIA AMI type)?
  (ec2:DescribeInstanceTypes; a launch template with one interface too many fails at launch.)
  Does EKS publish its AL2023 NVIDIA AMI for the Kubernetes version in the region? (ssm:GetParameter
  on the public /aws/service/eks/optimized-ami/<version>/amazon-linux-2023/x86_64/nvidia/recommended/image_id,
  EKS user guide retrieve-ami-id.html.)
- For a group that launches into a reservation (gpuNodes.capacityReservationId): is it for the group's
  instance type, in gpuNodes.zone? A Capacity Block (ec2:DescribeCapacityReservations through the provider's
  getCapacityBlockReservation, capacity_block.py): is it a Capacity Block of this account here (an ID that
  is none fails the read, which is turned into one line), active or scheduled? An
  On-Demand Capacity Reservation is read as a resource (aws.ec2.CapacityReservation.get, the same call;
  pulumi_aws 7.51.1 has no invoke for one): its read fails for a cancelled or expired reservation
  (terraform-provider-aws findCapacityReservationByID treats those as not found), but it exposes no state
  or reservation type, so a pending ODCR or a Capacity Block ID given with ON_DEMAND is not caught here.
  Without this a mismatch creates the group and surfaces only as launches that fail at scale-up.
- For a group that launches into an existing placement group (gpuNodes.placementGroup): is it a `cluster`
  group of the stack's region? pulumi_aws 7.51.1 has no placement-group invoke, so it is read as a resource
  (aws.ec2.PlacementGroup.get, by name, its import ID): terraform-provider-aws reads it with
  ec2:DescribePlacementGroups by group name (internal/service/ec2/find.go findPlacementGroupByName), which
  answers for the provider's region only (aws:region). A name that no group of the region has, or a deleted
  group, fails that read and with it the preview; a `spread` group (at most 7 running instances per zone) or
  a `partition` group (trainstack's choice: its racks split the EFA traffic) is refused in one line.
  Without this a wrong name or strategy surfaces only when the autoscaler's first launch fails.
- With both: was the reservation made in that placement group? With no group named, a reservation
  places its instances in its own group (shared from another account too), so nothing is checked; a
  named group other than the reservation's (by name and owner: a launch constrained to a group the
  reserved capacity is not in fails) is refused. A named group for an On-Demand Capacity Reservation
  made in none is a warning (EC2 uses the reservation there too, but may fill only part of the
  count); for a Capacity Block made in none, a refusal.
- For an EFA group: does the account's EC2 vCPU quota for the capacity type hold gpuNodes.max instances?
  (servicequotas:GetServiceQuota, quotas.py)
- Does EKS offer the configured Kubernetes version in the region? (eks:DescribeClusterVersions)
- Is the pinned EFS CSI add-on build one EKS offers for that version? (eks:DescribeAddonVersions)
- When the cluster is still to be created (eks:ListClusters): is a cluster admin the identity running
  Pulumi? (sts:GetCallerIdentity; EKS makes the creator admin, and a second access entry for it fails
  the apply after the cluster was created.) The preview role is checked the same way, but only by a
  real `up`: in CI it runs `pulumi preview` as itself, which creates nothing.

Each answer is an Output whose apply raises a one-line pulumi.RunError; `gate()` combines them into
an Output that the stack's resources depend on, so a wrong answer fails the preview and nothing is
registered. These calls need credentials (the same ones `pulumi preview` uses); under mocks the tests
answer them. With `trainstack:existingNetwork` the zones are the subnets', which are not looked up
here: the offering check is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import pulumi
import pulumi_aws as aws

from trainstack.infra.aws.capacity_block import checked_is_block, read_capacity_block
from trainstack.infra.aws.config import AwsStackConfig
from trainstack.infra.aws.placement import group_account, group_name
from trainstack.infra.aws.quotas import EC2_SERVICE_CODE, checked_vcpu_quota, unchecked_spot_quota, vcpu_quota
from trainstack.infra.config import NAMESPACE
from trainstack.infra.core import versions

EFS_CSI_ADDON = "aws-efs-csi-driver"
T = TypeVar("T")


def checked_offerings(result: aws.ec2.GetInstanceTypeOfferingsResult, wanted: dict[str, str],
                      zones: Sequence[str]) -> bool:
    """`wanted` maps instance type -> the config key that chose it; every (type, zone) pair must be offered."""
    offered = set(zip(result.instance_types or (), result.locations or (), strict=False))
    for instance_type, key in wanted.items():
        missing = [zone for zone in zones if (instance_type, zone) not in offered]
        if missing:
            where = [zone for zone in zones if zone not in missing]
            raise pulumi.RunError(
                f"{key}: {instance_type} is not offered in {', '.join(missing)} (offered in: "
                f"{', '.join(where) or 'none of the chosen zones'}). Fix: drop {', '.join(missing)} from "
                f"{NAMESPACE}:availabilityZones, or choose another instance type")
    return True


def checked_offerings_by_zone(result: aws.ec2.GetInstanceTypeOfferingsResult,
                              wanted: Sequence[tuple[str, str, Sequence[str]]]) -> bool:
    """`wanted`: (instance type, the config key that chose it, the zones it must be offered in)."""
    offered = set(zip(result.instance_types or (), result.locations or (), strict=False))
    for instance_type, key, zones in wanted:
        missing = [zone for zone in zones if (instance_type, zone) not in offered]
        if missing:
            where = sorted(zone for t, zone in offered if t == instance_type)
            raise pulumi.RunError(
                f"{key}: {instance_type} is not offered in {', '.join(missing)} (offered in: "
                f"{', '.join(where) or 'none of the chosen zones'}). Fix: choose a zone where it is offered, or "
                "another instance type")
    return True


def checked_efa_instance_type(result: aws.ec2.GetInstanceTypeResult, instance_type: str, interfaces: int) -> bool:
    """The account's description of an EFA type matches efa.py's row (the launch template is built from it)."""
    key = f"{NAMESPACE}:gpuNodes.instanceTypes"
    if not result.efa_supported:
        raise pulumi.RunError(f"{key}: {instance_type} does not support EFA in this region (ec2:DescribeInstanceTypes). "
                              "Fix: choose another EFA type (trainstack/infra/aws/efa.py)")
    described = {"EFA interfaces": result.efa_maximum_interfaces, "network cards": result.maximum_network_cards}
    wrong = {name: count for name, count in described.items() if count != interfaces}
    if wrong:
        said = ", ".join(f"{count} {name}" for name, count in wrong.items())
        raise pulumi.RunError(f"{key}: ec2:DescribeInstanceTypes gives {instance_type} {said}, but trainstack/infra/aws/efa.py "
                              f"builds {interfaces} EFA interfaces for it, one per network card. Fix: correct its row in "
                              "trainstack/infra/aws/efa.py EFA_INSTANCE_TYPES")
    if "x86_64" not in (result.supported_architectures or ()):
        raise pulumi.RunError(f"{key}: {instance_type} is not x86_64, and the GPU group boots "
                              f"{versions.EKS_GPU_AMI_TYPE}. Fix: choose an x86_64 EFA type (trainstack/infra/aws/efa.py)")
    return True


RESERVATION_KEY = f"{NAMESPACE}:gpuNodes.capacityReservationId"
# A Capacity Block is "scheduled" until its start, then "active" (EC2 user guide
# capacity-blocks-using.html); anything else (expired, cancelled, payment-failed, ...) launches nothing.
CAPACITY_BLOCK_LAUNCHABLE_STATES = ("active", "scheduled")


def checked_reservation(reservation_id: str, *, instance_type: str, zone: str, wanted_type: str, wanted_zone: str,
                        state: str | None = None) -> bool:
    """The reservation the group launches into is for its type, in its zone (and, for a block, launchable).
    That a CAPACITY_BLOCK ID names a Capacity Block at all is capacity_block.checked_is_block's question."""
    if instance_type != wanted_type:
        raise pulumi.RunError(f"{RESERVATION_KEY}: {reservation_id} reserves {instance_type}, but the group launches "
                              f"{wanted_type}. Fix: pulumi config set --path '{NAMESPACE}:gpuNodes.instanceTypes[0]' "
                              f"{instance_type}, or use a reservation for {wanted_type}")
    if zone != wanted_zone:
        raise pulumi.RunError(f"{RESERVATION_KEY}: {reservation_id} is in {zone}, but the group is in {wanted_zone}. "
                              f"Fix: pulumi config set --path {NAMESPACE}:gpuNodes.zone {zone} (one of "
                              f"{NAMESPACE}:availabilityZones)")
    if state is not None and state not in CAPACITY_BLOCK_LAUNCHABLE_STATES:
        raise pulumi.RunError(f"{RESERVATION_KEY}: {reservation_id} is {state}: nothing launches into it. Fix: use an "
                              "active or scheduled Capacity Block (aws ec2 describe-capacity-reservations --filters "
                              "Name=reservation-type,Values=capacity-block)")
    return True


PLACEMENT_GROUP_KEY = f"{NAMESPACE}:gpuNodes.placementGroup"


def checked_placement_group(name: str, strategy: str | None) -> bool:
    """An existing placement group for an EFA group is a `cluster` group, as the one the stack creates is.

    A spread group holds at most 7 running instances per zone (EC2 user guide placement-strategies.html),
    too few for a training group. A partition group could hold them, but spreads them over separate racks:
    refusing it is trainstack's choice, to keep the all-reduce traffic of an EFA group in one low-latency
    network segment.
    """
    if strategy != "cluster":
        reasons = {
            "spread": "a spread group holds at most 7 running instances per zone",
            "partition": "a partition group spreads them over separate racks, and trainstack keeps an EFA group's "
                         "all-reduce traffic in one low-latency network segment",
        }
        reason = reasons.get(strategy or "", "only a cluster group packs them into one low-latency network segment")
        raise pulumi.RunError(f"{PLACEMENT_GROUP_KEY}: {name} is a {strategy or 'strategy-less'} placement group, "
                              f"and trainstack launches EFA nodes into a cluster group only: {reason}. Fix: name a "
                              "cluster placement group (aws ec2 describe-placement-groups --filters "
                              f"Name=strategy,Values=cluster), or pulumi config rm --path {PLACEMENT_GROUP_KEY} "
                              "to let the stack create one")
    return True


def checked_reservation_placement(reservation_id: str, reservation_group_arn: str | None,
                                  named_group: str | None, caller_account: str, *,
                                  capacity_block: bool = False) -> bool:
    """The group launches in the placement group its reservation was made in, if it was made in one.

    A reservation made in a cluster placement group is used by launches into that group (EC2 user guide
    capacity-reservations-launch.html: choose the cluster placement group and the reservation); a launch
    constrained to a group the reserved capacity is not in fails with InsufficientInstanceCapacity
    (terraform-aws-modules/terraform-aws-eks PR #3730, for On-Demand Capacity Reservations and Capacity Blocks).
    An On-Demand Capacity Reservation made in no group is still used by a launch into a group (EC2 user guide
    limitations-placement-groups.html), but may fill only part of the count (eksctl-io/eksctl issue #7949):
    a warning, not a refusal. A named group for a Capacity Block made in no group is still refused: AWS
    ParallelCluster refuses a placement group with a Capacity Block (aws/aws-parallelcluster PR #6311).

    With no group named, the launch template carries only the reservation, and the reservation places its
    instances in its own group, also one shared from another account (aws/aws-parallelcluster PR #7252:
    with no group set "the ODCR decides the placement using its own PG", which lets users consume an ODCR
    in a cross-account group): nothing to check. A named group is read by name, which only finds this
    account's groups: one of another account's of the same name is not the reservation's. Groups are
    compared by name, the launch template's key, and by owner.
    """
    if named_group is None:
        return True
    reservation_group = group_name(reservation_group_arn) if reservation_group_arn else None
    owner = group_account(reservation_group_arn) if reservation_group_arn else caller_account
    if not owner:
        raise pulumi.RunError(f"{PLACEMENT_GROUP_KEY}: EC2 answered {reservation_group_arn!r} for the placement group "
                              f"of {reservation_id}, which is not a placement-group ARN, so it cannot be compared "
                              f"with {named_group}. Fix: pulumi config rm --path {PLACEMENT_GROUP_KEY} (the "
                              "reservation places its instances in its own group)")
    if owner != caller_account:
        raise pulumi.RunError(f"{PLACEMENT_GROUP_KEY}: {reservation_id} was made in placement group "
                              f"{reservation_group} of account {owner}, shared with this account ({caller_account}), "
                              f"and {named_group} names a group of this account. Fix: pulumi config rm --path "
                              f"{PLACEMENT_GROUP_KEY} (the reservation places its instances in its own group)")
    if reservation_group != named_group:
        if not reservation_group_arn and not capacity_block:
            pulumi.log.warn(f"{PLACEMENT_GROUP_KEY}: {named_group} is not the placement group of {reservation_id}, "
                            "which was made in no placement group: EC2 uses the reservation for a launch into "
                            f"{named_group} too, but may fill only part of the count there. To launch into all of "
                            f"it: pulumi config rm --path {PLACEMENT_GROUP_KEY}")
            return True
        if not reservation_group_arn:
            raise pulumi.RunError(f"{PLACEMENT_GROUP_KEY}: {named_group} is not the placement group of "
                                  f"{reservation_id}, a Capacity Block made in no placement group: trainstack launches "
                                  "into such a block in no group (AWS ParallelCluster refuses a placement group with "
                                  f"a Capacity Block). Fix: pulumi config rm --path {PLACEMENT_GROUP_KEY}")
        raise pulumi.RunError(f"{PLACEMENT_GROUP_KEY}: {named_group} is not the placement group of {reservation_id}, "
                              f"which was made in {reservation_group}: its instances cannot launch there. Fix: pulumi "
                              f"config rm --path {PLACEMENT_GROUP_KEY} (the reservation places them in its own group)")
    return True


def nvidia_ami_parameter(kubernetes_version: str) -> str:
    """The public SSM parameter naming EKS's recommended AL2023 NVIDIA AMI for a Kubernetes version."""
    return f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"


def checked_nvidia_ami(result: aws.ssm.GetParameterResult, kubernetes_version: str, region: str) -> bool:
    if not (result.value or "").startswith("ami-"):
        raise pulumi.RunError(f"{NAMESPACE}:kubernetesVersion: EKS publishes no {versions.EKS_GPU_AMI_TYPE} AMI for "
                              f"Kubernetes {kubernetes_version} in {region} ({nvidia_ami_parameter(kubernetes_version)}). "
                              f"Fix: pulumi config set {NAMESPACE}:kubernetesVersion {versions.EKS_KUBERNETES_VERSION}, "
                              "or another aws:region")
    return True


def checked_zones(result: aws.GetAvailabilityZonesResult, zones: Sequence[str], region: str) -> bool:
    available = list(result.names or ())
    missing = [zone for zone in zones if zone not in available]
    if missing:
        verb = "is not an available zone" if len(missing) == 1 else "are not available zones"
        raise pulumi.RunError(f"{NAMESPACE}:availabilityZones: {', '.join(missing)} {verb} of {region} for this "
                              f"account (available: {', '.join(available) or 'none'}). Fix: list only available zones "
                              f"in {NAMESPACE}:availabilityZones")
    return True


def checked_cluster_version(result: aws.eks.GetClusterVersionsResult, version: str, region: str) -> bool:
    if not any(v.cluster_version == version for v in result.cluster_versions or ()):
        raise pulumi.RunError(f"{NAMESPACE}:kubernetesVersion: EKS offers no Kubernetes {version} in {region}. Fix: "
                              f"pulumi config set {NAMESPACE}:kubernetesVersion {versions.EKS_KUBERNETES_VERSION}")
    return True


def addon_version_key(version: str) -> tuple[int, ...]:
    """`v3.3.0-eksbuild.1` -> (3, 3, 0, 1)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def checked_addon(result: aws.eks.GetAddonVersionResult, pinned: str, kubernetes_version: str) -> bool:
    newest = result.version or ""
    if not newest or addon_version_key(pinned) > addon_version_key(newest):
        raise pulumi.RunError(
            f"{NAMESPACE}:kubernetesVersion: EKS offers the {EFS_CSI_ADDON} add-on for Kubernetes {kubernetes_version} "
            f"up to {newest or 'no version'}, not the pinned {pinned} (trainstack/infra/core/versions.py EFS_CSI_ADDON_VERSION). "
            f"Fix: pulumi config set {NAMESPACE}:kubernetesVersion {versions.EKS_KUBERNETES_VERSION}, or pin an "
            "offered build")
    return True


def deployer_principal(caller_arn: str) -> str:
    """The IAM ARN behind sts:GetCallerIdentity's answer (an assumed-role session maps to its role)."""
    match = re.fullmatch(r"arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+", caller_arn)
    if match:
        return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
    return caller_arn


def _principal_identity(arn: str) -> tuple[str, str, str]:
    """(account, kind, name): a role's path is not part of the session ARN, so it is left out."""
    _, _, resource = arn.partition(":iam::")
    account, _, rest = resource.partition(":")
    kind, _, path = rest.partition("/")
    return account, kind, path.rsplit("/", 1)[-1]


def checked_access_entries(admin_arns: Sequence[str], preview_role_arn: str | None, caller_arn: str, *,
                           cluster_exists: bool, dry_run: bool) -> bool:
    """No access entry of ours is for the identity that creates the cluster.

    Only creation collides: pulumi-eks leaves bootstrapClusterCreatorAdminPermissions at true
    (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, accessConfig), so EKS gives the creator an entry,
    and a second entry for it fails the apply (ResourceInUseException) after the cluster took 10
    minutes. Once the cluster exists, whoever created it, a listed admin may run preview and up. The
    preview role is refused only by a real `up`: in CI it runs `pulumi preview` as itself, which
    creates no cluster, and its own read-only entry is the one that preview needs.
    """
    if cluster_exists:
        return True
    deployer = _principal_identity(deployer_principal(caller_arn))
    for arn in admin_arns:
        if _principal_identity(arn) == deployer:
            raise pulumi.RunError(f"trainstack:clusterAdmins: {arn} is the identity running Pulumi ({caller_arn}), "
                                  "which EKS makes cluster admin when it creates the cluster. Fix: remove it from "
                                  "trainstack:clusterAdmins")
    if preview_role_arn and not dry_run and _principal_identity(preview_role_arn) == deployer:
        raise pulumi.RunError(f"trainstack:previewRoleArn: {preview_role_arn} is the identity running `pulumi up` "
                              f"({caller_arn}), which EKS makes cluster admin when it creates the cluster. Fix: create "
                              "the cluster as another identity (the preview role is for `pulumi preview` in CI), or "
                              "pulumi config rm trainstack:previewRoleArn")
    return True


def gate(cfg: AwsStackConfig, provider: aws.Provider, parent: pulumi.Resource,
         checked: Callable[[Callable[..., T]], Callable[..., T]] = lambda check: check,
         settings_known: bool = True) -> pulumi.Output[list]:
    """An Output that resolves to [] once every check passed: give it to resources as depends_on.

    `checked` wraps each check: a hosted part (trainstack.components) re-raises its errors in its inputs' terms.
    A provider whose settings are not known yet (`settings_known` false: a preview of a caller's provider built
    on outputs) answers every lookup with nothing (pulumi/pulumi sdk/go/common/resource/plugin/provider_plugin.go
    Invoke), which no check can judge: they run at `up`, once its settings are known.
    """
    if not settings_known:
        pulumi.log.info("the aws provider's settings are not known at preview: the account checks run at up",
                        resource=parent)
        return pulumi.Output.from_input([])
    invoke = pulumi.InvokeOutputOptions(parent=parent, provider=provider)
    checks = [
        aws.eks.get_cluster_versions_output(cluster_versions_onlies=[cfg.kubernetes_version], opts=invoke).apply(
            lambda result: checked(checked_cluster_version)(result, cfg.kubernetes_version, cfg.region)),
        aws.eks.get_addon_version_output(addon_name=EFS_CSI_ADDON, kubernetes_version=cfg.kubernetes_version,
                                         most_recent=True, opts=invoke).apply(
            lambda result: checked(checked_addon)(result, versions.EFS_CSI_ADDON_VERSION, cfg.kubernetes_version)),
    ]
    if cfg.cluster_admin_arns or cfg.preview_role_arn:
        dry_run = pulumi.runtime.is_dry_run()
        checks.append(pulumi.Output.all(aws.get_caller_identity_output(opts=invoke),
                                        aws.eks.get_clusters_output(opts=invoke)).apply(
            lambda answers: checked(checked_access_entries)(
                cfg.cluster_admin_arns, cfg.preview_role_arn, answers[0].arn,
                cluster_exists=cfg.cluster_name in (answers[1].names or ()), dry_run=dry_run)))
    zones = cfg.network.availability_zones
    if cfg.network.existing is None and zones:
        checks.append(aws.get_availability_zones_output(state="available", opts=invoke).apply(
            lambda result: checked(checked_zones)(result, zones, cfg.region)))
        efa = cfg.gpu_nodes.efa
        wanted = {} if efa else {t: f"{NAMESPACE}:gpuNodes.instanceTypes" for t in cfg.gpu_nodes.instance_types}
        wanted.update({t: f"{NAMESPACE}:systemNodes.instanceType" for t in cfg.system_nodes.instance_types})
        checks.append(aws.ec2.get_instance_type_offerings_output(
            location_type="availability-zone",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(wanted)),
                     aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=list(zones))],
            opts=invoke).apply(lambda result: checked(checked_offerings)(result, wanted, zones)))
        if efa is not None:
            efa_type = cfg.gpu_nodes.instance_types[0]
            checks.append(aws.ec2.get_instance_type_offerings_output(
                location_type="availability-zone",
                filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[efa_type]),
                         aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=[efa.zone])],
                opts=invoke).apply(lambda result: checked(checked_offerings_by_zone)(
                    result, [(efa_type, f"{NAMESPACE}:gpuNodes.zone", [efa.zone])])))
    if cfg.gpu_nodes.efa is not None:
        efa_type, interfaces = cfg.gpu_nodes.instance_types[0], cfg.gpu_nodes.efa.instance.efa_interfaces
        checks.append(aws.ec2.get_instance_type_output(instance_type=efa_type, opts=invoke).apply(
            lambda result: checked(checked_efa_instance_type)(result, efa_type, interfaces)))
        quota = vcpu_quota(efa_type, cfg.gpu_nodes.capacity_type)
        if quota is None and cfg.gpu_nodes.capacity_type == "SPOT":
            pulumi.log.warn(unchecked_spot_quota(efa_type, cfg.region))
        if quota is not None:
            checks.append(aws.servicequotas.get_service_quota_output(
                service_code=EC2_SERVICE_CODE, quota_code=quota[0], opts=invoke).apply(
                lambda result: checked(checked_vcpu_quota)(result.value, quota=quota, instance_type=efa_type,
                                                           max_nodes=cfg.gpu_nodes.max_size, region=cfg.region)))
        checks.append(aws.ssm.get_parameter_output(name=nvidia_ami_parameter(cfg.kubernetes_version), opts=invoke).apply(
            lambda result: checked(checked_nvidia_ami)(result, cfg.kubernetes_version, cfg.region)))
    placement_group = cfg.gpu_nodes.efa.placement_group if cfg.gpu_nodes.efa is not None else None
    if placement_group is not None:
        existing = aws.ec2.PlacementGroup.get("gpu-placement-group", placement_group,
                                              opts=pulumi.ResourceOptions(parent=parent, provider=provider))
        checks.append(existing.strategy.apply(
            lambda strategy: checked(checked_placement_group)(placement_group, strategy)))
    reservation = cfg.gpu_nodes.capacity_reservation_id
    if reservation is not None and cfg.gpu_nodes.efa is not None:
        group = {"wanted_type": cfg.gpu_nodes.instance_types[0], "wanted_zone": cfg.gpu_nodes.efa.zone}
        if cfg.gpu_nodes.capacity_type == "CAPACITY_BLOCK":
            block = read_capacity_block(reservation, provider, parent).apply(
                lambda answer: checked(checked_is_block)(answer, reservation, cfg.region))
            checks.append(block.apply(
                lambda block: checked(checked_reservation)(
                    reservation, instance_type=block.instance_type, zone=block.availability_zone, state=block.state,
                    **group)))
            reservation_group_arn = block.placement_group_arn
        else:
            odcr = aws.ec2.CapacityReservation.get("gpu-capacity-reservation", reservation,
                                                   opts=pulumi.ResourceOptions(parent=parent, provider=provider))
            checks.append(pulumi.Output.all(odcr.instance_type, odcr.availability_zone).apply(
                lambda answer: checked(checked_reservation)(reservation, instance_type=answer[0], zone=answer[1], **group)))
            reservation_group_arn = odcr.placement_group_arn
        caller = aws.get_caller_identity_output(opts=invoke)
        checks.append(pulumi.Output.all(reservation_group_arn, caller.account_id).apply(
            lambda answers: checked(checked_reservation_placement)(
                reservation, answers[0], placement_group, answers[1],
                capacity_block=cfg.gpu_nodes.capacity_type == "CAPACITY_BLOCK")))
    return pulumi.Output.all(*checks).apply(lambda _: [])
