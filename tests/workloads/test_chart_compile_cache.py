"""The trainer's compiler cache lies on the job's shared volume, so a replacement pod on a new node starts warm."""

from __future__ import annotations

from .chart import load_values, render, trainer


def env_of(container):
    return {e["name"]: e.get("value") for e in container["env"]}


def test_the_compiler_cache_is_on_the_shared_volume(rendered):
    container = trainer(rendered["gpu-4x8-queue-pvc"])
    shared = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "shared")
    assert env_of(container)["TORCHINDUCTOR_CACHE_DIR"] == f"{shared}/compile-cache"


def test_a_moved_volume_moves_the_cache():
    values = load_values("gpu-4x8-queue-pvc")
    values["storage"]["mountPath"] = "/data/team"
    assert env_of(trainer(render(values)))["TORCHINDUCTOR_CACHE_DIR"] == "/data/team/compile-cache"
