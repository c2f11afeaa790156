"""Re-check 6 (L): secretEnv fields that YAML reads as numbers or booleans (key 1, secretName 1234, a
variable named ON) reach the Job as the strings they are."""

from __future__ import annotations

from tests.workloads.chart import deep_merge, load_values, one, render

GOOD = load_values("gpu-4x8-queue-pvc")


def test_secret_env_fields_stay_strings():
    values = deep_merge(GOOD, {"secretEnv": [{"name": "ON", "secretName": "1234", "key": "1"},
                                             {"name": "MY_FLAG", "secretName": "s", "key": "true"}],
                               "env": [{"name": "NO", "value": "x"}]})
    job = one(render(values), "Job")
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ON"]["valueFrom"]["secretKeyRef"] == {"name": "1234", "key": "1"}
    assert env["MY_FLAG"]["valueFrom"]["secretKeyRef"]["key"] == "true"
    assert "NO" in env and env["NO"]["value"] == "x"
