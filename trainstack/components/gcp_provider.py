"""A GCP part's project and region: the given gcp provider's, asked of it, or its own inputs
(trainstack/components/providers.py)."""

from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from trainstack.components.providers import given_provider
from trainstack.components.stack_config import InputError


def gcp_location(given: pulumi.ProviderResource | None, project: str | None, region: str | None,
                 parent: pulumi.Resource | None = None, *, takes_region: bool = True
                 ) -> tuple[str | None, str | None, bool]:
    """(project, region, whether the given provider's settings are known) for a GCP part: the inputs, else the given
    provider's (gcp.organizations.getClientConfig asked of it); an input that disagrees with the given provider is
    refused. `takes_region`: whether the part has a region input (a node pool and a Filestore share are placed by
    their zone or location inputs instead). The settings are not known at a preview of a provider built on other
    resources' outputs, whose every invoke is answered empty: the preflight then asks nothing (`up` asks)."""
    if given is None:
        return project, region, True
    client = gcp.organizations.get_client_config(opts=pulumi.InvokeOptions(provider=given, parent=parent))
    if client.id is None:
        # An empty answer (an answer always has an id): the provider's settings are other resources' outputs,
        # not known at preview (pulumi/pulumi sdk/go/common/resource/plugin/provider_plugin.go Invoke:
        # `if !pcfg.known`). The inputs must say where; the region's default would silently differ.
        needed = (("project", project), ("region", region)) if takes_region else (("project", project),)
        for name, value in needed:
            if not value:
                raise InputError(f"{name}: not set, and the given gcp provider's {name} is not known at preview "
                                 f"(its settings are other resources' outputs). Fix: set the input {name} to the "
                                 "provider's")
        return project, region, False
    for name, value, known in (("project", project, client.project), ("region", region, client.region)):
        if value and known and value != known:
            raise InputError(f"{name}: {value}, but the given gcp provider's {name} is {known}. Fix: remove the "
                             f"input {name} (the provider's is used), or set it to {known}")
    return project or client.project or None, region or client.region or None, True


def gcp_settings(opts: pulumi.ResourceOptions | None, project: str | None, region: str | None,
                 labels: Mapping[str, str] | None, *, takes_region: bool = True
                 ) -> tuple[pulumi.ProviderResource | None, str, str | None, bool]:
    """(the given gcp provider or None, project, region, whether its settings are known) for a GCP part (see
    gcp_location). A part's own provider
    carries its labels as default_labels; a given provider carries the caller's, so `labels` is refused with one."""
    given = given_provider(opts, "gcp")
    if given is not None and labels:
        raise InputError("labels: the given gcp provider labels what the part creates with its own default_labels. "
                         "Fix: set default_labels on your gcp.Provider, and remove the input labels")
    project, region, known = gcp_location(given, project, region, takes_region=takes_region)
    if not project and given is None:
        raise InputError("project: not set, and no gcp provider is given. Fix: set the input project, or pass your "
                         "gcp.Provider (with its project) in the resource options")
    if not project:
        raise InputError("project: not set, and the given gcp provider has no project. Fix: set the input project, "
                         "or set project on your gcp.Provider")
    return given, project, region, known


def provider_zone(given: pulumi.ProviderResource | None, project: str, region: str | None,
                  zone: str | None) -> str | None:
    """The zone input, else (with a given provider and a region) the first zone of the region that is up, asked
    of that provider (gcp.compute.getZones): any region works without a built-in list. Without a provider the
    stack parser's default (or its refusal, naming the input) holds."""
    if zone is not None or given is None or region is None:
        return zone
    zones = gcp.compute.get_zones(project=project, region=region, status="UP",
                                  opts=pulumi.InvokeOptions(provider=given)).names
    if zones is None:  # an empty answer: the provider's settings are not known at preview (gcp_location)
        raise InputError("zone: not set, and the given gcp provider's zones are not known at preview (its settings "
                         "are other resources' outputs). Fix: set the input zone")
    return sorted(zones)[0] if zones else None
