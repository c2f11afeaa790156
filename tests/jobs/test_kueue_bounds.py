"""How long an admitted job may hold its GPU nodes without all its pods ready (issue 29 item 1).

Kueue v0.19.2 turns waitForPodsReady on by default, but with no requeue limit: apis/config/v1beta2/defaults.go
sets `WaitForPodsReady = cmp.Or(cfg.WaitForPodsReady, &WaitForPodsReady{})`, Timeout 30m, RecoveryTimeout =
Timeout, and leaves RequeuingStrategy.BackoffLimitCount nil, which configuration_types.go documents as "the
workloads will repeatedly and endless re-queueing". The stack's configuration must bound it.
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


def test_not_ready_time_is_bounded_by_a_requeue_limit():
    config = json.loads(manager_config_yaml("training"))
    wait = config["waitForPodsReady"]
    assert set(wait) <= WAIT_FIELDS and set(wait["requeuingStrategy"]) <= REQUEUE_FIELDS
    strategy = wait["requeuingStrategy"]
    assert isinstance(strategy["backoffLimitCount"], int) and strategy["backoffLimitCount"] >= 0
    assert wait["blockAdmission"] is False  # one slow job must not hold up every other admission
    timeout = _seconds(wait["timeout"])
    assert timeout >= 30 * 60  # a GPU node scale-up plus a multi-GB image pull fit; Kueue's own default is 30m
    # The most node time a job whose pods never become ready can hold: (limit + 1) admissions of `timeout`.
    worst = (strategy["backoffLimitCount"] + 1) * timeout
    assert worst <= 6 * 3600, worst
    assert _seconds(wait["recoveryTimeout"]) > 0  # "0s" would disable it: a lost pod never replaced holds for ever
