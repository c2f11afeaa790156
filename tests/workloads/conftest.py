"""Shared fixtures: every value set under values/ rendered once per test session."""

from __future__ import annotations

from typing import Any

import pytest

from .chart import VALUE_SETS, load_values, render


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Value-set name -> the objects the chart renders for it (release gpt2-run, namespace ml)."""
    return {name: render(load_values(name)) for name in VALUE_SETS}
