"""Local disk on GKE GPU pools: a pool whose nodes cannot hold the job's pods' ephemeral-storage
request is refused (review finding 1); the estimate follows GKE's documented reservation."""

from __future__ import annotations

from tests.gcp.stack_runs import JOB_ENABLED, config_with, run_main, run_main_expecting_error
from trainstack.infra.gcp.node_disk import gke_allocatable_ephemeral_storage


def test_the_estimate_follows_gkes_reservation():
    # 100 GB boot disk (93.1 GiB): GKE reserves min(50%, 6 GiB + 35%, 100 GiB), evicts below 10% free.
    assert gke_allocatable_ephemeral_storage(100, 0) == "45Gi"
    # 16 local SSDs (A3): the SSDs back ephemeral storage, the reservation caps at 100 GiB.
    assert gke_allocatable_ephemeral_storage(200, 16) == "4929Gi"


def test_the_seed_pool_holds_the_job():
    run_main(config_with(JOB_ENABLED))  # no refusal


def test_a_gpu_disk_too_small_for_the_pod_is_refused():
    stop, _, _ = run_main_expecting_error(config_with({**JOB_ENABLED, "trainstack:gpuPools": {"t4": {"diskSizeGb": 50}}}))
    assert "local disk" in str(stop) and "diskSizeGb" in str(stop), stop


def test_a_data_cache_that_can_outgrow_the_node_is_named_before_the_first_copy(monkeypatch):
    # A 100 GB boot disk leaves ~45Gi; the trainer requests 32Gi of it, and the cache may grow to its
    # 100Gi sizeLimit without requesting any: a large data set would get the trainer evicted.
    import pulumi
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_main(config_with({**JOB_ENABLED, "trainstack:gpuPools": {"t4": {"diskSizeGb": 100}}}))
    assert [w for w in warnings if "storage.cache.sizeLimit 100Gi" in w and "diskSizeGb" in w], warnings


def test_the_shipped_stack_does_not_warn_against_itself(monkeypatch):
    """Issue 30.18: Pulumi.gcp.yaml as shipped (270 GB) holds the trainer's /tmp and the data cache's cap."""
    import pulumi
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_main(config_with(JOB_ENABLED))
    assert not [w for w in warnings if "storage.cache.sizeLimit" in w], warnings


def test_a_disk_that_holds_the_cache_silences_the_warning(monkeypatch):
    import pulumi
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_main(config_with({**JOB_ENABLED, "trainstack:gpuPools": {"t4": {"diskSizeGb": 300}}}))
    assert not [w for w in warnings if "storage.cache.sizeLimit" in w], warnings
