"""The aws-p5 stack (Pulumi.aws-p5.yaml: EFA GPU nodes) under the AWS stack's mocks (tests/aws/stack_runs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests import stack_runs
from tests.aws.stack_runs import API_ACCESS, provider_calls, provider_outputs
from tests.aws.stack_runs import run_main as run_aws_main
from tests.pulumi_harness import ProgramResult

STACK = "aws-p5"
STACK_FILE = stack_runs.REPO / "Pulumi.aws-p5.yaml"
GPU = "trainstack:gpuNodes"
GOLDEN = Path(__file__).parent / "golden" / "aws-p5-stack.json"
JOB_ENABLED = {"trainstack:job": {"enabled": True}}  # the complete graph, as the aws golden has it


def p5_config(overrides: Mapping[str, Any] | None = None, remove: tuple[str, ...] = ()) -> dict[str, str]:
    """Pulumi.aws-p5.yaml plus the API allow-list, with `overrides` merged in key by key."""
    return stack_runs.config_with(STACK_FILE, {**API_ACCESS, **(overrides or {})}, remove)


def run_p5(config: Mapping[str, str] | None = None, *, preview: bool = False, calls: Any = provider_calls
           ) -> ProgramResult:
    return run_aws_main(p5_config() if config is None else config, stack=STACK, preview=preview, calls=calls)


def run_p5_expecting_error(config: Mapping[str, str]) -> tuple[BaseException, list[str], ProgramResult]:
    return stack_runs.run_main_expecting_error(config, stack=STACK, outputs=provider_outputs, calls=provider_calls)
