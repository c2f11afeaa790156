"""An AWS part's region: the given aws provider's, asked of it, or its own input (trainstack/components/providers.py)."""

import pulumi
import pulumi_aws as aws

from trainstack.components.stack_config import InputError


def aws_region(given: pulumi.ProviderResource | None, region: str | None, parent: pulumi.Resource | None = None) -> str:
    """The region the part's AWS resources go to: the given provider's (asked of it: aws.getRegion), which an
    input `region` must agree with; without a provider, the input `region`, which must then be set."""
    if given is None:
        if not region:
            raise InputError("region: not set, and no aws provider is given. Fix: set the input region (e.g. "
                             "eu-west-1), or pass your aws.Provider in the resource options")
        return region
    # A blocking invoke: the region decides checks and settings while the program runs, never in an apply.
    provider_region = aws.get_region(opts=pulumi.InvokeOptions(provider=given, parent=parent)).region
    if region and region != provider_region:
        raise InputError(f"region: {region}, but the given aws provider is in {provider_region}. Fix: remove the "
                         f"input region (the provider's is used), or set it to {provider_region}")
    return provider_region


# As many zones as the stack's own default (us-west-2's four): two subnets each, in a VPC cut for eight.
MAX_DEFAULT_ZONES = 4


def available_zones(given: pulumi.ProviderResource) -> list[str]:
    """The first zones (by name) of the given provider's region that are available to its account (Local and
    Wavelength Zones, which need an opt-in, are not listed by aws.getAvailabilityZones by default)."""
    names = aws.get_availability_zones(state="available", opts=pulumi.InvokeOptions(provider=given)).names
    return sorted(names)[:MAX_DEFAULT_ZONES]
