"""Preflight: does the account's EC2 vCPU quota let the EFA group grow to gpuNodes.max?

An EFA group starts at zero, so `pulumi up` succeeds whatever the quota; the first job's scale-up then
fails in the Auto Scaling group (VcpuLimitExceeded, MaxSpotInstanceCountExceeded), the cluster
autoscaler backs the group off, and Kueue's ProvisioningRequest retries for days with the job suspended
and no pod to show why. So the quota is asked for before anything is created
(servicequotas:GetServiceQuota, which the preview role's ReadOnlyAccess covers).

EC2 counts these quotas in vCPUs of running instances (EC2 user guide ec2-resource-limits.html,
using-spot-limits.html). The quota codes (service code `ec2`), as the Service Quotas API names them:
- ON_DEMAND, also into an On-Demand Capacity Reservation (its instances are On-Demand Instances):
  L-417A185B "Running On-Demand P instances", which covers every P family.
- SPOT on p5, p5e, p5en: L-C4BD4855 "All P5 Spot Instance Requests" (default 0; the EC2 user guide's
  Spot quota table lists it apart from "All P4, P3 and P2 Spot Instance Requests", L-7212CCBC).
  p6-b200 on spot: which spot quota counts it is not documented where this was checked, so it is not
  asked (docs/aws.md, "only a real account shows").
- CAPACITY_BLOCK: not asked. A Capacity Block is bought, and instances launched into it run on the
  block; the purchase is where a limit applies.
The check is the quota against gpuNodes.max x the type's vCPUs: the quota is the account's and Region's,
so instances the account runs elsewhere count against it too (the check cannot see them; the line says so).
"""

from __future__ import annotations

import math

import pulumi

from trainstack.infra.config import NAMESPACE

EC2_SERVICE_CODE = "ec2"
ON_DEMAND_P = ("L-417A185B", "Running On-Demand P instances")
SPOT_P5 = ("L-C4BD4855", "All P5 Spot Instance Requests")
# Every EFA type trainstack builds (trainstack/infra/aws/efa.py) has 192 vCPUs (EC2 accelerated computing
# instance types page, docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
VCPUS = {"p5.48xlarge": 192, "p5e.48xlarge": 192, "p5en.48xlarge": 192, "p6-b200.48xlarge": 192}
_SPOT_QUOTA_OF_FAMILY = {"p5": SPOT_P5, "p5e": SPOT_P5, "p5en": SPOT_P5}


def vcpu_quota(instance_type: str, capacity_type: str) -> tuple[str, str] | None:
    """(quota code, quota name) that limits the group's instances, or None where none is asked."""
    if capacity_type == "ON_DEMAND":
        return ON_DEMAND_P
    if capacity_type == "SPOT":
        return _SPOT_QUOTA_OF_FAMILY.get(instance_type.partition(".")[0])
    return None


def unchecked_spot_quota(instance_type: str, region: str) -> str:
    """The warning for a spot type whose quota is not documented: name both candidates to look at."""
    spot_p5, other_p = SPOT_P5, ("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests")
    return (f"{NAMESPACE}:gpuNodes.instanceTypes: which EC2 Spot quota counts {instance_type} is not documented, so "
            f"it was not checked; a quota of 0 leaves the job suspended with no error. Check both "
            f"(aws service-quotas get-service-quota --service-code ec2 --quota-code {spot_p5[0]} --region {region}, "
            f"and {other_p[0]}) before the first job")


def request_command(quota_code: str, vcpus: int, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --service-code {EC2_SERVICE_CODE} "
            f"--quota-code {quota_code} --desired-value {vcpus} --region {region}")


def checked_vcpu_quota(value: float | None, *, quota: tuple[str, str], instance_type: str, max_nodes: int,
                       region: str) -> bool:
    """The quota holds gpuNodes.max instances of the type; else one line with the request command."""
    needed = max_nodes * VCPUS[instance_type]
    have = math.floor(value or 0)
    if have < needed:
        code, name = quota
        raise pulumi.RunError(
            f"{NAMESPACE}:gpuNodes.max: {max_nodes} x {instance_type} need {needed} vCPUs, but this account's "
            f"\"{name}\" quota ({code}) in {region} is {have}, so the autoscaler's scale-up would fail and the job "
            f"wait suspended. Fix: {request_command(code, needed, region)} (and wait for it to be granted; running "
            f"P instances elsewhere in the Region count too), or lower {NAMESPACE}:gpuNodes.max")
    return True
