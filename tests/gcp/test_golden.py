"""The mocked resource graph of the GCP stack, compared with the committed tests/gcp/golden/gcp-stack.json.

After an intended change, regenerate it and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/gcp/test_golden.py

Config: Pulumi.gcp.yaml plus gcp:project, with the job switched on (the complete graph).
"""

from __future__ import annotations

from pathlib import Path

from tests.gcp.stack_runs import ACCESS_TOKEN, JOB_ENABLED, config_with, run_main
from tests.golden import assert_matches_golden

GOLDEN = Path(__file__).parent / "golden" / "gcp-stack.json"


def test_resource_graph_matches_the_golden_file():
    assert_matches_golden(run_main(config_with(JOB_ENABLED)), GOLDEN)


def test_golden_file_holds_no_secret_values():
    text = GOLDEN.read_text()
    assert ACCESS_TOKEN not in text
    assert '"kubeconfig": "[secret]"' in text
