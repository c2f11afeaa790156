"""Kubernetes shapes every hosted component that places pods takes."""

from dataclasses import dataclass


@dataclass(kw_only=True)
class TolerationArgs:
    """A Kubernetes toleration for the GPU nodes' taint."""

    key: str | None = None
    """The taint's key, e.g. nvidia.com/gpu."""
    operator: str | None = None
    """Exists or Equal (Kubernetes' default: Equal)."""
    value: str | None = None
    """The taint's value, with operator Equal."""
    effect: str | None = None
    """NoSchedule, PreferNoSchedule or NoExecute; unset tolerates every effect."""
