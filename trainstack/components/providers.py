"""The cloud provider a hosted part builds with: the caller's, or one it makes from its own explicit inputs.

A part given a provider (`opts.provider`, `opts.providers`, or inherited from `opts.parent`, the order Pulumi
itself applies: pulumi/resource.py Resource._get_providers in pulumi 3.272) builds every child resource and
asks every invoke with it, so the caller's assume-role, default tags, endpoints and `aws:*`/`gcp:*` settings
apply; its region (and GCP project) then come from that provider when the part's inputs leave them unset.
Only without one does the part make a provider, from its inputs and nothing ambient.
"""

from collections.abc import Mapping, Sequence

import pulumi


def given_provider(opts: pulumi.ResourceOptions | None, package: str) -> pulumi.ProviderResource | None:
    """The provider for `package` ("aws", "gcp", "kubernetes") that `opts` hands a component, if any."""
    if opts is None:
        return None
    if opts.provider is not None and opts.provider.package == package:
        return opts.provider
    providers = opts.providers
    if isinstance(providers, Mapping) and package in providers:
        return providers[package]
    if isinstance(providers, Sequence):
        found = next((p for p in providers if p.package == package), None)
        if found is not None:
            return found
    parent = opts.parent
    inherited = getattr(parent, "_providers", None) if parent is not None else None
    return inherited.get(package) if inherited else None
