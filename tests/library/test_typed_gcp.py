"""The GCP stack's one typed model: resolve_gcp takes the Args a component is given, Outputs included, with no
stand-ins and no stack-config strings in between; and the GCP parts on a caller's provider whose settings are
not known at preview (other resources' outputs) need only the inputs they have, in one line each."""

import asyncio
import json

import pulumi
import pulumi_gcp as gcp
import pytest

from tests.library.test_cluster_parts import NODES_ACCOUNT, PROJECT, run
from tests.library.test_unknown_provider import UNKNOWN_PROJECT, gcp_part, unknown
from tests.library.test_user_program import GCP_REGION, gcp_in
from tests.pulumi_harness import UNKNOWN
from trainstack import components
from trainstack.components import gcp as gcp_stack_component
from trainstack.infra.config import NAMESPACE, ConfigError
from trainstack.infra.config.job_settings import Job, SecretEnv
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp.config import parse_gcp_config, resolve_gcp
from trainstack.infra.gcp.settings import Filestore, GcpExistingNetwork, GcpStackArgs, GkeGpuPool


def existing(network, subnetwork, pods: str | None = "pods", services: str | None = "services") -> GcpExistingNetwork:
    return GcpExistingNetwork(network=network, subnetwork=subnetwork, pods_range_name=pods,
                              services_range_name=services)


def test_a_stack_file_and_a_components_args_resolve_to_the_same_config():
    # One model: the stack file's strings and JSON, and a component's Args, load into the same GcpStackArgs (each
    # field's reader canonicalises what it reads, e.g. on_demand) and resolve to the same config.
    raw = {"gcp:project": PROJECT, "gcp:region": "europe-west4", "trainstack:zone": "europe-west4-b",
           "trainstack:gpuPools": json.dumps({"l4": {"machineType": "g2-standard-8", "max": "3",
                                                     "capacity": "on_demand"}}),
           "trainstack:job": json.dumps({"podsMax": 2, "secretEnv": [
               {"name": "WANDB_API_KEY", "secretName": "wandb", "key": "api-key"}]}),
           "trainstack:sharedFilesystem": json.dumps({"tier": "basic_ssd"}), "trainstack:regional": "true",
           "trainstack:labels": json.dumps({"team": "ml"})}
    args = GcpStackArgs(project=PROJECT, region="europe-west4", zone="europe-west4-b", regional=True,
                        gpu_pools={"l4": GkeGpuPool(machine_type="g2-standard-8", max=3, capacity="on_demand")},
                        job=Job(pods_max=2, secret_env=[SecretEnv(name="WANDB_API_KEY", secret_name="wandb",
                                                                  key="api-key")]),
                        shared_filesystem=Filestore(tier="basic_ssd"), labels={"team": "ml"})
    from_stack_file = parse_gcp_config(raw, "dev")
    assert from_stack_file == resolve_gcp(from_inputs(GcpStackArgs, args, key=NAMESPACE), "dev")
    (pool,) = from_stack_file.gpu_pools
    assert (pool.capacity, pool.max_nodes, from_stack_file.filestore.tier) == ("ON_DEMAND", 3, "BASIC_SSD")


def test_the_resolver_hands_output_network_names_to_the_infra_as_they_are():
    # Before: checkable_id gave the parser "network-givenasanoutput0" for each output, and GcpStack put the
    # outputs back into the parsed config afterwards.
    asyncio.set_event_loop(asyncio.new_event_loop())
    network, subnetwork = pulumi.Output.from_input("research-vpc"), pulumi.Output.from_input("research-nodes")
    args = from_inputs(GcpStackArgs, GcpStackArgs(project=PROJECT, job=Job(enabled=False),
                                                  existing_network=existing(network, subnetwork)), key=NAMESPACE)
    kept = resolve_gcp(args, "dev").network.existing
    assert kept.network is network and kept.subnetwork is subnetwork
    assert (kept.pods_range_name, kept.services_range_name) == ("pods", "services")


def test_plain_range_names_are_still_checked_beside_outputs():
    asyncio.set_event_loop(asyncio.new_event_loop())
    network = pulumi.Output.from_input("research-vpc")
    with pytest.raises(ConfigError) as raised:
        from_inputs(GcpStackArgs, GcpStackArgs(project=PROJECT, existing_network=existing(network, network, pods=" ")),
                    key=NAMESPACE)
    assert str(raised.value) == ("trainstack:existingNetwork.podsRangeName: expected a non-empty string, got ' '. Fix: "
                                 "pulumi config set --path 'trainstack:existingNetwork.podsRangeName' <text>")
    args = from_inputs(GcpStackArgs, GcpStackArgs(project=PROJECT, existing_network=existing(network, network,
                                                                                               services=None)),
                       key=NAMESPACE)
    with pytest.raises(ConfigError, match=r"^trainstack:existingNetwork.servicesRangeName: not set \(an existing "):
        resolve_gcp(args, "dev")


def users_network() -> tuple[gcp.Provider, gcp.compute.Network, gcp.compute.Subnetwork]:
    """The user's provider, and a VPC and subnet of theirs on it (their names are outputs)."""
    mine = gcp.Provider("mine", project=PROJECT, region=GCP_REGION)
    on_mine = pulumi.ResourceOptions(provider=mine)
    network = gcp.compute.Network("net", name="research-vpc", auto_create_subnetworks=False, opts=on_mine)
    subnetwork = gcp.compute.Subnetwork("nodes", name="research-nodes", network=network.name,
                                        ip_cidr_range="10.2.0.0/20", opts=on_mine)
    return mine, network, subnetwork


def test_the_gcp_stack_hands_the_users_network_outputs_to_its_infra_stack(monkeypatch):
    handed = []

    class InfraStack(pulumi.ComponentResource):  # what GcpStack gives its infra stack, caught
        def __init__(self, name, args, opts=None):
            super().__init__("test:index:InfraStack", name, None, opts)
            handed.append(args.config)
            self.outputs = {"clusterName": "c", "kubeconfig": "k", "imageRef": "i", "bucketName": "b"}

    monkeypatch.setattr(gcp_stack_component, "InfraGcpStack", InfraStack)
    users = {}

    def program() -> None:
        mine, network, subnetwork = users_network()
        users.update(network=network.name, subnetwork=subnetwork.name)
        components.GcpStack("trainstack", components.GcpStackArgs(
            zone=f"{GCP_REGION}-a", job=components.Job(enabled=False),
            existing_network=components.GcpExistingNetwork(network=network.name, subnetwork=subnetwork.name,
                                                           pods_range_name="pods", services_range_name="services")),
            opts=pulumi.ResourceOptions(providers={"gcp": mine}))

    result, stopped = run(program, calls=gcp_in(GCP_REGION))
    assert not stopped, stopped
    (config,) = handed
    assert config.network.existing.network is users["network"]
    assert config.network.existing.subnetwork is users["subnetwork"]
    assert (config.project, config.region) == (PROJECT, GCP_REGION)


def test_a_pool_given_to_a_component_is_checked_by_its_declared_reader_in_the_stack_files_line():
    with pytest.raises(ConfigError) as raised:
        from_inputs(GcpStackArgs, {"gpuPools": {"t4": components.GkeGpuPool(max=1001)}}, key=NAMESPACE)
    assert str(raised.value) == ("trainstack:gpuPools.t4.max: must be at most 1000, got 1001. Fix: pulumi config set "
                                 "--path 'trainstack:gpuPools.t4.max' 1000")


def test_an_unknown_key_is_refused_with_the_stack_files_keys_in_their_order():
    with pytest.raises(ConfigError) as raised:
        parse_gcp_config({"gcp:project": PROJECT, "trainstack:qqqq": "1"}, "gcp")
    assert str(raised.value) == (
        "trainstack:qqqq: unknown key. Fix: remove it or rename it (known keys: cloud, zone, regional, clusterName, "
        "releaseChannel, kubernetesVersion, network, existingNetwork, apiAuthorizedNetworks, systemNodes, gpuPools, "
        "jobPool, job, maxHourlyUsd, maxRunUsd, sharedFilesystem, deleteBucketOnDestroy, protectSharedFilesystem, "
        "labels)")


def placed_part(part: str, project: str | None):
    """A part placed by its zone or location inputs (no region input), on the caller's provider."""
    def program() -> None:
        mine = pulumi.ResourceOptions(provider=gcp.Provider("mine", project=PROJECT, region=GCP_REGION))
        if part == "GkeGpuNodePool":
            components.GkeGpuNodePool("l4", components.GkeGpuNodePoolArgs(
                project=project, cluster_name="research", location=f"{GCP_REGION}-a", node_zone=f"{GCP_REGION}-a",
                node_service_account_email=NODES_ACCOUNT, pool_name="l4",
                pool=components.GkeGpuPool(machine_type="g2-standard-8")), opts=mine)
        else:
            components.FilestoreShare("share", components.FilestoreShareArgs(
                project=project, location=f"{GCP_REGION}-a", network="research-vpc",
                kubeconfig="apiVersion: v1\nkind: Config\n", cluster_name="research"), opts=mine)
    return program


def on_mine(result) -> list[str]:
    """The GCP resources not registered with the caller's provider `mine`."""
    mine = next(r for r in result.by_type("pulumi:providers:gcp") if r.name == "mine")
    return [r.name for r in result.registrations if r.type.startswith("gcp:") and r.custom and r.provider != mine.urn]


@pytest.mark.parametrize("part", ["GkeGpuNodePool", "FilestoreShare"])
def test_a_part_without_a_region_input_previews_on_a_provider_not_known_yet(part):
    # Before: "region: not set, and the given gcp provider's region is not known at preview ... Fix: set the input
    # region to the provider's", an input these parts do not have; then the pool's machine type "is not offered in
    # None", the empty answer read as a refusal.
    result, stopped = run(placed_part(part, PROJECT), calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert not stopped, stopped
    assert result.by_type("gcp:container/nodePool:NodePool" if part == "GkeGpuNodePool"
                          else "gcp:filestore/instance:Instance")
    assert on_mine(result) == []


@pytest.mark.parametrize("part", ["GkeCluster", "GcpStack"])
def test_a_cluster_previews_on_a_provider_not_known_yet_where_its_inputs_say(part):
    # Before: "project: compute.googleapis.com and container.googleapis.com are not enabled in ml-research-123":
    # the preflight read the empty answers as refusals, so no input could get such a part past preview.
    result, stopped = run(gcp_part(part, PROJECT, GCP_REGION), calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert not stopped, stopped
    cluster = result.one("gcp:container/cluster:Cluster")
    assert cluster.inputs["location"] == f"{GCP_REGION}-a"
    assert cluster.inputs["minMasterVersion"] is UNKNOWN  # not known at preview (not None): asked again at `up`
    assert on_mine(result) == []


PROJECTLESS = {"GkeGpuNodePool": placed_part("GkeGpuNodePool", None), "FilestoreShare": placed_part("FilestoreShare", None),
               **{part: gcp_part(part, None, GCP_REGION) for part in ("GkeCluster", "GcsSnapshotBucket", "GcpStack")}}


@pytest.mark.parametrize("part", sorted(PROJECTLESS))
def test_every_gcp_part_asks_for_a_project_it_cannot_see_in_one_line(part):
    # The project names the bucket, the preflight's questions and the Filestore instance's project: a part cannot
    # build without it, and the default would silently differ from the provider's.
    result, stopped = run(PROJECTLESS[part], calls=unknown("gcp", gcp_in(GCP_REGION)))
    assert [str(error) for error in stopped] == [
        f"{UNKNOWN_PROJECT} (its settings are other resources' outputs). Fix: set the input project to the provider's"]
    assert not [r for r in result.registrations if r.type.startswith("gcp:") and r.custom]


def test_the_cluster_and_the_share_build_on_the_users_network_resources():
    # GkeCluster's network and subnetwork and FilestoreShare's network are the user's own resources' names
    # (outputs): they go to the cluster, its firewall rule and the Filestore instance as they are.
    def program() -> None:
        mine, network, subnetwork = users_network()
        yours = pulumi.ResourceOptions(provider=mine)
        cluster = components.GkeCluster("research", components.GkeClusterArgs(
            cluster_name="research", network=network.name, subnetwork=subnetwork.name, pods_range_name="pods",
            services_range_name="services", node_service_account_email=NODES_ACCOUNT), opts=yours)
        components.FilestoreShare("share", components.FilestoreShareArgs(
            location=cluster.node_zone, network=network.name, kubeconfig=cluster.kubeconfig,
            cluster_name=cluster.cluster_name), opts=yours)

    result, stopped = run(program, calls=gcp_in(GCP_REGION))
    assert not stopped, stopped
    gke = result.one("gcp:container/cluster:Cluster")
    assert (gke.inputs["network"], gke.inputs["subnetwork"]) == ("research-vpc", "research-nodes")
    assert result.one("gcp:compute/firewall:Firewall").inputs["network"] == "research-vpc"
    assert result.one("gcp:filestore/instance:Instance").inputs["networks"][0]["network"] == "research-vpc"
    assert on_mine(result) == []


# GcpStack's registry asks once more, for the access token its image push signs in with (artifact_registry.py).
@pytest.mark.parametrize(("part", "asks"), [("GkeCluster", 1), ("GcpStack", 2)])
def test_a_part_asks_the_given_provider_for_its_settings_once(part, asks):
    # gcp_settings asked getClientConfig for the project and region, then settings_known asked it again for the
    # same answer: one synchronous invoke more per part on every preview and update.
    from tests.gcp import stack_runs as gcp_runs

    asked: list[str] = []
    answers = gcp_in(GCP_REGION)

    def calls(token: str, args: dict) -> dict:
        asked.append(token)
        return answers(token, args)

    result, stopped = run(gcp_part(part, PROJECT, GCP_REGION), calls=calls)
    assert not stopped, stopped
    assert asked.count(gcp_runs.GET_CLIENT_CONFIG) == asks
