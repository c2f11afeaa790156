"""Values inside our types but outside what Google Cloud documents (trainstack/infra/gcp/limits.py): each family is
refused in one line before any resource."""

from __future__ import annotations

import pytest

from tests import stack_runs
from tests.gcp.stack_runs import (
    REPO,
    config_with,
    provider_calls,
    provider_outputs,
    run_main,
    run_main_expecting_error,
)
from tests.stack_runs import assert_one_config_error_line
from trainstack.infra.gcp.limits import (
    GOOGLE_NODE_LABELS,
    MAX_AUTHORIZED_NETWORKS,
    MAX_LABELS,
    MAX_NODES_PER_POOL_ZONE,
)

NETWORKS = "trainstack:apiAuthorizedNetworks"
LABELS = "trainstack:labels"
SHARE = "trainstack:sharedFilesystem"
T4 = "trainstack:gpuPools.t4"
RESERVED = {"capacity": "RESERVATION", "placement": "ANY"}

# (case id, overrides, the key the message must name, a fragment of the message)
OUTSIDE_GCP_LIMITS = [
    # 64 labels per resource, counting the 3 trainstack may add and the 5 the provider and GKE add to a node VM.
    ("too many labels", {LABELS: {f"team{i}": "ml" for i in range(MAX_LABELS - 7)}}, LABELS,
     "57 labels: GCP allows 64 per resource, and a GPU node's VM carries up to 8 more (app, pulumi-stack, "
     "trainstack-capacity, goog-pulumi-provisioned, goog-gke-node"),
    # A private cluster takes 100 authorized networks.
    ("too many authorized networks", {NETWORKS: [f"203.0.{i}.0/24" for i in range(MAX_AUTHORIZED_NETWORKS + 1)]},
     NETWORKS, "101 blocks: a private GKE cluster takes at most 100"),
    ("loopback as an authorized network", {NETWORKS: ["127.0.0.0/8"]}, NETWORKS, "loopback (127.0.0.0/8)"),
    ("link-local as an authorized network", {NETWORKS: ["169.254.0.0/16"]}, NETWORKS, "link-local"),
    # Filestore Zonal capacities come in steps.
    ("zonal share between 256 GiB steps", {SHARE: {"tier": "ZONAL", "capacityGb": 1100}}, f"{SHARE}.capacityGb",
     "1100 lies between them. Fix: pulumi config set --path 'trainstack:sharedFilesystem.capacityGb' 1280"),
    ("zonal share between the two ranges", {SHARE: {"tier": "ZONAL", "capacityGb": 10000}}, f"{SHARE}.capacityGb",
     "10000 lies between them"),
    # Regional and Enterprise shares grow in the same steps.
    ("regional share between 256 GiB steps", {SHARE: {"tier": "REGIONAL", "capacityGb": 1100}}, f"{SHARE}.capacityGb",
     "a REGIONAL Filestore share grows in steps of 256 GiB up to 9984 and of 2560 GiB from 10240; 1100 lies between "
     "them. Fix: pulumi config set --path 'trainstack:sharedFilesystem.capacityGb' 1280"),
    ("enterprise share between 256 GiB steps", {SHARE: {"tier": "ENTERPRISE", "capacityGb": 2000}},
     f"{SHARE}.capacityGb", "a ENTERPRISE Filestore share grows in steps of 256 GiB"),
    # Reservation names are Compute Engine names.
    ("reservation name with capitals", {"trainstack:gpuPools": {"t4": {**RESERVED, "reservation": "My_Reservation"}}},
     f"{T4}.reservation", "'My_Reservation' is not a reservation name"),
    ("reservation name too long", {"trainstack:gpuPools": {"t4": {**RESERVED, "reservation": "r" * 64}}},
     f"{T4}.reservation", "is not a reservation name"),
    ("reservation block with capitals", {"trainstack:gpuPools": {"t4": {**RESERVED,
                                                                      "reservation": "r1/reservationBlocks/Block"}}},
     f"{T4}.reservation", "is not a reservation name"),
    # 1,000 nodes per node pool per zone.
    ("GPU pool over the per-zone node limit", {"trainstack:gpuPools": {"t4": {"max": MAX_NODES_PER_POOL_ZONE + 1}}},
     f"{T4}.max", "must be at most 1000"),
    ("system pool over the per-zone node limit", {"trainstack:systemNodes": {"max": 1001}},
     "trainstack:systemNodes.max", "must be at most 1000"),
    ("authorized networks equal but for whitespace", {"trainstack:apiAuthorizedNetworks": ["203.0.113.7/32",
                                                                                     " 203.0.113.7/32"]},
     NETWORKS, "lists a value twice"),
    # Regions: named as unknown, not as a missing price or a missing default zone.
    ("unknown region", {"gcp:region": "us-central9"}, "gcp:region", "'us-central9' is not a Google Cloud region"),
    ("region typo", {"gcp:region": "us-cetnral1"}, "gcp:region", "(did you mean us-central1?)"),
]


@pytest.mark.parametrize(("overrides", "key", "fragment"), [case[1:] for case in OUTSIDE_GCP_LIMITS],
                         ids=[case[0] for case in OUTSIDE_GCP_LIMITS])
def test_a_value_google_would_refuse_stops_before_any_resource_with_one_line(overrides, key, fragment):
    assert_one_config_error_line(*run_main_expecting_error(config_with(overrides)), key, fragment)


@pytest.mark.parametrize("reservation", ["t4-pool", "projects/ml-research-123/reservations/t4-pool",
                                         "t4-pool/reservationBlocks/t4-pool-block-0001",
                                         "projects/ml-research-123/reservations/t4-pool/reservationBlocks/b1"])
def test_a_reservation_its_shared_path_or_one_of_its_blocks_is_accepted(reservation):
    result = run_main(config_with({"trainstack:gpuPools": {"t4": {**RESERVED, "reservation": reservation}},
                                   "trainstack:maxHourlyUsd": 5}))
    pool = next(r for r in result.registrations if r.type == "gcp:container/nodePool:NodePool"
                and r.name.endswith("-t4"))
    assert pool.inputs["nodeConfig"]["reservationAffinity"]["values"] == [reservation]


def test_values_at_the_limits_pass():
    assert len(GOOGLE_NODE_LABELS) == 5
    result = run_main(config_with({
        SHARE: {"tier": "REGIONAL", "capacityGb": 1280},
        LABELS: {f"team{i}": "ml" for i in range(MAX_LABELS - 8)},
        "trainstack:gpuPools": {"t4": {**RESERVED, "reservation": "projects/ml-research-123/reservations/t4-pool"}},
        "trainstack:maxHourlyUsd": 5,  # reserved capacity bills at the on-demand rate
    }))
    assert result.registrations
    a3 = stack_runs.config_with(REPO / "Pulumi.gcp-a3.yaml", {"gcp:project": "ml-research-123",
                                                              SHARE: {"capacityGb": 12800}})
    assert stack_runs.run_main(a3, stack="gcp-a3", outputs=provider_outputs, calls=provider_calls).registrations
