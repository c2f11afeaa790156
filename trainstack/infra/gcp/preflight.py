"""Preflight: what only the GCP account can answer, asked during `pulumi preview` before anything is created.

- Are the Compute Engine and GKE APIs enabled? (serviceusage: gcp.projects.get_project_service). Every
  other question below is asked of them, and on a new project they are off: asked first, so that the
  answer is one line naming the `gcloud services enable` command, not the APIs' 403s.
- Is the zone one of the region's, for this project? (compute.zones.list: gcp.compute.get_zones)
- Which version does the release channel offer for the configured minor? (container getServerConfig:
  gcp.container.get_engine_versions). GKE refuses a control-plane version outside the cluster's
  channel, so the version is the channel's newest patch of the minor, never any valid version; and it
  must meet what a GPUDirect pool needs. Enforced only for a cluster still to be created: an existing
  one stays on its minor (minMasterVersion is ignored after creation, and a maintenance exclusion may
  hold it there while the channel stops offering that minor to new clusters), so that is a warning.
- Is each GPU pool's machine type offered in the zone? (compute.machineTypes.list, which for A2/A3/A4/
  G2 machines also says which GPUs come with them). pulumi-gcp has no data source for accelerator
  types, so the GPU an N1 pool attaches (nvidia-tesla-t4) is not checked here: GKE refuses a zone
  without it when it creates the node pool.

Not asked: whether the zone offers the RoCE network profile an RDMA pool's VPC names (<zone>-vpc-roce,
gpu_networks.roce_network_profile). Compute Engine has networkProfiles.get, but pulumi-gcp 10.2.0 has
no data source for it, so a zone without the profile fails at the RDMA VPC's create (docs/a4.md).

Each answer is an Output whose apply raises a one-line pulumi.RunError; `gate()` combines them for
every resource of the stack to depend on, so a wrong answer stops the preview (and `up
--skip-preview`) before anything is registered. They need credentials; under mocks the tests answer them.
A caller's provider whose settings are other resources' outputs answers nothing at preview (every answer
empty, read as a refusal): then nothing is asked, and `up` asks with the provider known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pulumi
import pulumi_gcp as gcp

from trainstack.infra.config import NAMESPACE
from trainstack.infra.core.unknown_answers import not_known_yet
from trainstack.infra.gcp.config import GcpStackConfig, GpuPoolConfig
from trainstack.infra.gcp.machine_types import GpuDirectProfile, meets_gpu_direct_minimum

T = TypeVar("T")

# What the preflight's own questions need (compute.zones/machineTypes.list, container getServerConfig).
PREFLIGHT_SERVICES = ("compute.googleapis.com", "container.googleapis.com")


def checked_services(answers: Sequence[gcp.projects.GetProjectServiceResult], project: str) -> bool:
    """A service that is not enabled reads back without an ID: terraform-provider-google's
    resourceGoogleProjectServiceRead (google/services/resourcemanager/resource_google_project_service.go,
    which the data source calls) clears the ID when the service is not among the enabled ones."""
    disabled = [service for service, answer in zip(PREFLIGHT_SERVICES, answers, strict=True)
                if not (answer.id and answer.service)]
    if disabled:
        raise pulumi.RunError(f"gcp:project: {' and '.join(disabled)} {'is' if len(disabled) == 1 else 'are'} not "
                              f"enabled in {project}, and the checks before any resource need them. Fix: gcloud "
                              f"services enable {' '.join(PREFLIGHT_SERVICES)} --project {project}")
    return True


def existing_master_version(cfg: GcpStackConfig, provider: gcp.Provider, parent: pulumi.Resource) -> str | None:
    """The control-plane version of the stack's cluster if it exists already, else None.

    Asked while the program runs (the gate's shape depends on it). The data source fails for a cluster
    that does not exist (terraform-provider-google data_source_google_container_cluster.go: "not
    found"), and with the Kubernetes Engine API still disabled: both mean no cluster to keep.
    """
    try:
        found = gcp.container.get_cluster(name=cfg.cluster_name, location=cfg.location, project=cfg.project,
                                          opts=pulumi.InvokeOptions(parent=parent, provider=provider))
    except Exception:  # noqa: BLE001 - any failure of the lookup means: treat the cluster as new
        return None
    return found.master_version or None


def checked_zone(result: gcp.compute.GetZonesResult, zone: str, region: str) -> bool:
    if zone not in (result.names or ()):
        raise pulumi.RunError(f"{NAMESPACE}:zone: {zone} is not an available zone of {region} for this project "
                              f"(available: {', '.join(result.names or ()) or 'none'}). Fix: pulumi config set "
                              f"{NAMESPACE}:zone <one of those>")
    return True


def channel_version(result: gcp.container.GetEngineVersionsResult, channel: str, minor: str, location: str,
                    gpu_direct: Sequence[GpuDirectProfile] = (), existing: str | None = None) -> str:
    """The newest patch of `minor` that the release `channel` offers in `location`.

    With `existing` (the running cluster's version) nothing is refused: the version only matters at
    creation, so a channel that no longer offers the minor is a one-line warning and `existing` is kept.

    `release_channel_latest_version[channel]` is the first of the channel's validVersions that starts
    with the data source's version_prefix (terraform-provider-google,
    google/services/container/data_source_google_container_engine_versions.go, which pulumi-gcp 10.2
    bridges); `valid_master_versions` holds versions of every channel, and a cluster enrolled in a
    channel may not be created at one outside it.
    """
    version = (result.release_channel_latest_version or {}).get(channel, "")
    if existing is not None:
        if not version.startswith(minor + "."):
            pulumi.log.warn(f"{NAMESPACE}:kubernetesVersion: GKE's {channel} channel no longer offers {minor}.x to new "
                            f"clusters in {location}; the existing cluster stays at {existing} until GKE upgrades it")
        return existing
    if not version.startswith(minor + "."):
        defaults = result.release_channel_default_version or {}
        offered = f"its default is {defaults[channel]}" if defaults.get(channel) else "it offers none there"
        raise pulumi.RunError(f"{NAMESPACE}:kubernetesVersion: GKE's {channel} channel offers no {minor}.x in "
                              f"{location} ({offered}). Fix: pulumi config set {NAMESPACE}:kubernetesVersion "
                              f"<a minor of the {channel} channel>, or pulumi config set {NAMESPACE}:releaseChannel "
                              "<a channel that has it>")
    for profile in gpu_direct:
        minimum = meets_gpu_direct_minimum(profile, version)
        if minimum is not None:
            needs = f"{minimum} or newer" + (f" for {minor}" if minimum.startswith(minor + ".") else "")
            raise pulumi.RunError(f"{NAMESPACE}:kubernetesVersion: GKE {version} is older than GPUDirect-"
                                  f"{profile.mode.upper()} needs ({needs}). Fix: pulumi config "
                                  f"set {NAMESPACE}:kubernetesVersion <a newer minor>")
    return version


def checked_machine_type(result: gcp.compute.GetMachineTypesResult, pool: GpuPoolConfig, zone: str) -> bool:
    key = f"{NAMESPACE}:gpuPools.{pool.name}.machineType"
    machines = [m for m in result.machine_types or () if m.name == pool.machine_type]
    if not machines:
        raise pulumi.RunError(f"{key}: {pool.machine_type} is not offered in {zone} for this project. Fix: pulumi "
                              f"config set {NAMESPACE}:zone <a zone that offers it> (gcloud compute machine-types "
                              f"list --filter=name={pool.machine_type}), or choose another machine type")
    if not pool.attach_accelerator:
        gpus = {(a.guest_accelerator_type, a.guest_accelerator_count) for a in machines[0].accelerators or ()}
        if (pool.accelerator_type, pool.gpus_per_node) not in gpus:
            offered = ", ".join(f"{n} x {t}" for t, n in sorted(gpus)) or "no GPUs"
            raise pulumi.RunError(f"{key}: {pool.machine_type} in {zone} comes with {offered}, not "
                                  f"{pool.gpus_per_node} x {pool.accelerator_type}. Fix: choose the machine type "
                                  "of the GPUs you want")
    return True


@dataclass(frozen=True)
class Preflight:
    ready: pulumi.Output[list]  # [] once every answer passed: every resource depends on it
    control_plane_version: pulumi.Output[str | None]  # the channel's version for the minor (None: not asked)


def gate(cfg: GcpStackConfig, provider: gcp.Provider, parent: pulumi.Resource,
         checked: Callable[[Callable[..., T]], Callable[..., T]] = lambda check: check, *,
         settings_known: bool = True) -> Preflight:
    """Every question asked at once; the stack's resources depend on `ready`, the cluster takes the version.

    `checked` wraps each check: a hosted part (trainstack.components) re-raises its errors in its inputs' terms.
    `settings_known` False (the provider's settings are not known at preview): nothing asked, the version
    unknown (`up` asks).
    """
    if not settings_known:
        # The version is unknown, not None: a preview without it would promise a cluster that `up`, which asks,
        # then changes (and a saved plan would refuse the difference).
        return Preflight(ready=pulumi.Output.from_input([]),
                         control_plane_version=pulumi.Output.from_input(None).apply(lambda _: not_known_yet()))
    invoke = pulumi.InvokeOutputOptions(parent=parent, provider=provider)
    gpu_direct = [pool.gpu_direct for pool in cfg.gpu_pools if pool.gpu_direct is not None]
    existing = existing_master_version(cfg, provider, parent)
    # The APIs first: every other question is asked only once they answered (apply chains the invokes).
    services = pulumi.Output.all(*(gcp.projects.get_project_service_output(project=cfg.project, service=service,
                                                                           opts=invoke)
                                   for service in PREFLIGHT_SERVICES)).apply(
        lambda answers: checked(checked_services)(answers, cfg.project))

    def after_services(ask):
        return services.apply(lambda _: ask())

    version = after_services(lambda: gcp.container.get_engine_versions_output(
        project=cfg.project, location=cfg.location, version_prefix=f"{cfg.kubernetes_version}.", opts=invoke,
    ).apply(lambda result: checked(channel_version)(result, cfg.release_channel, cfg.kubernetes_version, cfg.location,
                                           gpu_direct, existing)))
    checks = [
        services,
        after_services(lambda: gcp.compute.get_zones_output(project=cfg.project, region=cfg.region, opts=invoke).apply(
            lambda result: checked(checked_zone)(result, cfg.zone, cfg.region))),
        version,
        *(after_services(lambda pool=pool: gcp.compute.get_machine_types_output(
            project=cfg.project, zone=cfg.zone, filter=f"name = {pool.machine_type}", opts=invoke).apply(
            lambda result: checked(checked_machine_type)(result, pool, cfg.zone)))
          for pool in cfg.gpu_pools),
    ]
    ready = pulumi.Output.all(*checks).apply(lambda _: [])
    return Preflight(ready=ready, control_plane_version=pulumi.Output.all(ready, version).apply(lambda v: v[1]))
