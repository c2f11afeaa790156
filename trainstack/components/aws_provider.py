"""An AWS part's region: the given aws provider's, asked of it, or its own input (trainstack/components/providers.py).

A given provider whose settings are not known yet (its region or assume-role ARN is another resource's output,
during a preview) answers every invoke with an empty result (pulumi/pulumi sdk/go/common/resource/plugin/
provider_plugin.go, Invoke: `if !pcfg.known { return ... PropertyMap{} }`): its region and zones read as None,
which means "not known yet", never a region of its own.
"""

import pulumi
import pulumi_aws as aws

from trainstack.components.stack_config import InputError


def aws_region(given: pulumi.ProviderResource | None, region: str | None, parent: pulumi.Resource | None = None) -> str:
    """The region the part's AWS resources go to (aws_location)."""
    return aws_location(given, region, parent)[0]


def aws_location(given: pulumi.ProviderResource | None, region: str | None,
                 parent: pulumi.Resource | None = None) -> tuple[str, bool]:
    """(region, whether the given provider's settings are known). The region is the given provider's (asked of
    it: aws.getRegion), which an input `region` must agree with; without a provider, or with one whose settings
    are not known yet (a preview of a provider built on outputs: its lookups answer nothing, so the account
    checks wait for `up`), the input `region`, which must then be set."""
    if given is None:
        if not region:
            raise InputError("region: not set, and no aws provider is given. Fix: set the input region (e.g. "
                             "eu-west-1), or pass your aws.Provider in the resource options")
        return region, True
    # A blocking invoke: the region decides checks and settings while the program runs, never in an apply.
    provider_region = aws.get_region(opts=pulumi.InvokeOptions(provider=given, parent=parent)).region
    if provider_region is None:
        if not region:
            raise InputError("region: not set, and the given aws provider's region is not known at preview (its "
                             "settings are other resources' outputs). Fix: set the input region to the provider's")
        return region, False
    if region and region != provider_region:
        raise InputError(f"region: {region}, but the given aws provider is in {provider_region}. Fix: remove the "
                         f"input region (the provider's is used), or set it to {provider_region}")
    return provider_region, True


# As many zones as the stack's own default (us-west-2's four): two subnets each, in a VPC cut for eight.
MAX_DEFAULT_ZONES = 4
# Availability Zones only: with Local Zones enabled in a region the data source lists them too (pulumi-aws
# getAvailabilityZones docs, "Only Availability Zones (no Local Zones)"), and us-west-2-lax-1a sorts first.
ZONES_WITHOUT_OPT_IN = [aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])]


def available_zones(given: pulumi.ProviderResource) -> list[str]:
    """The first Availability Zones (by name) of the given provider's region that are available to its account;
    Local and Wavelength Zones, even opted in, are left out."""
    names = aws.get_availability_zones(state="available", filters=ZONES_WITHOUT_OPT_IN,
                                       opts=pulumi.InvokeOptions(provider=given)).names
    if names is None:
        raise InputError("availabilityZones: not set, and the given aws provider's zones are not known at preview "
                         "(its settings are other resources' outputs). Fix: set the input availabilityZones")
    return sorted(names)[:MAX_DEFAULT_ZONES]
