"""The price table in prices.yaml, looked up by cloud and region.

A figure that is not in the table is `None`, never a guess: the estimate lists it as not included.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PRICES_FILE = Path(__file__).with_name("prices.yaml")
HOURS_PER_MONTH = 730  # the month both clouds bill monthly rates by


@dataclass(frozen=True)
class Rate:
    """An hourly price, on demand and (where there is one) typical spot."""

    on_demand: float
    spot: float | None

    def __add__(self, other: Rate) -> Rate:
        spot = None if self.spot is None or other.spot is None else self.spot + other.spot
        return Rate(self.on_demand + other.on_demand, spot)

    def __mul__(self, count: float) -> Rate:
        return Rate(self.on_demand * count, None if self.spot is None else self.spot * count)


@functools.cache
def _table() -> Mapping[str, Any]:
    return yaml.safe_load(PRICES_FILE.read_text())


@dataclass(frozen=True)
class PriceTable:
    cloud: str
    region: str

    @property
    def _entries(self) -> Mapping[str, Any]:
        return _table().get(self.cloud, {}).get(self.region, {})

    def _rate(self, section: str, name: str) -> Rate | None:
        entry = self._entries.get(section, {}).get(name)
        return None if entry is None else Rate(float(entry["on_demand"]), entry.get("spot"))

    def instance(self, name: str) -> Rate | None:
        """An AWS instance type's price, or a GCP machine type's host part (vCPU + memory)."""
        return self._rate("instances" if self.cloud == "aws" else "machines", name)

    def accelerator(self, name: str) -> Rate | None:
        """A GCP GPU's price per GPU-hour."""
        return self._rate("accelerators", name)

    def hourly(self, name: str) -> float | None:
        """A flat hourly figure: control_plane_per_hour, nat_gateway_per_hour, ..."""
        entry = self._entries.get(name)
        return None if entry is None else float(entry["value"])

    def monthly_per_gib(self, name: str, kind: str | None = None) -> float | None:
        """A per-GiB-month figure, e.g. ("disk_per_gib_month", "gp3"), as a per-GiB-hour rate."""
        entry = self._entries.get(name)
        if entry is not None and kind is not None:
            entry = entry.get(kind)
        return None if entry is None else float(entry["value"]) / HOURS_PER_MONTH
