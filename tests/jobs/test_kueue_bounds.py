"""How long an admitted job may hold its GPU nodes without all its pods ready (issue 29 item 1).

Kueue v0.19.2 turns waitForPodsReady on by default (apis/config/v1beta2/defaults.go
sets `WaitForPodsReady = cmp.Or(cfg.WaitForPodsReady, &WaitForPodsReady{})`, Timeout 30m, RecoveryTimeout =
Timeout, and leaves RequeuingStrategy.BackoffLimitCount nil, which configuration_types.go documents as "the
workloads will repeatedly and endless re-queueing". The stack bounds the time each admission may hold nodes
(timeout) and keeps the endless requeue: a limit deactivates queued spot jobs in a capacity shortage.
"""

from __future__ import annotations

import json
import re

from trainstack.infra.kubernetes.kueue import manager_config_yaml

# The JSON names of configapi.WaitForPodsReady and RequeuingStrategy at v0.19.2 (configuration_types.go).
WAIT_FIELDS = {"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
REQUEUE_FIELDS = {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, duration
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def test_not_ready_time_is_bounded_and_a_capacity_shortage_never_deactivates():
    config = json.loads(manager_config_yaml("training"))
    wait = config["waitForPodsReady"]
    assert set(wait) <= WAIT_FIELDS and set(wait["requeuingStrategy"]) <= REQUEUE_FIELDS
    strategy = wait["requeuingStrategy"]
    assert wait["blockAdmission"] is False  # one slow job must not hold up every other admission
    timeout = _seconds(wait["timeout"])
    assert timeout >= 30 * 60  # a GPU node scale-up plus a multi-GB image pull fit; Kueue's own default is 30m
    assert _seconds(wait["recoveryTimeout"]) > 0  # "0s" would disable it: a lost pod never replaced holds for ever
    # A queued job on a spot pool during a capacity shortage: its pods wait for nodes that do not come (no
    # cost), Kueue evicts it every `timeout` and requeues it after base*2^(n-1) s, capped at backoffMaxSeconds.
    # Kueue v0.19.2 workload_controller.go deactivates it once requeueState.count reaches backoffLimitCount
    # (never, when the count is null). A shortage of a day must leave it queued, not deactivated.
    base, cap = strategy["backoffBaseSeconds"], strategy["backoffMaxSeconds"]
    elapsed, requeues = 0, 0
    while elapsed < 24 * 3600:
        elapsed += timeout
        requeues += 1
        limit = strategy.get("backoffLimitCount")
        assert limit is None or requeues < limit, f"deactivated after {elapsed / 3600:.1f} h of waiting for capacity"
        elapsed += min(base * 2 ** (requeues - 1), cap)
    # Between two admissions the nodes (if any came) are freed for at least the backoff: an image that never
    # pulls holds a node at most timeout / (timeout + cap) of the time, and `list` names it meanwhile.
    assert cap >= 60 * 60
