"""The mocked resource graph of the AWS stack, compared with the committed tests/aws/golden/aws-stack.json.

Any infrastructure change shows up as a readable diff of that file in the pull request: each resource's
type, name, parent, provider, dependencies, resource options and inputs (secrets masked).

After an intended change, regenerate it and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/aws/test_golden.py

Config: Pulumi.aws.yaml with the job switched on (the complete graph).
"""

from __future__ import annotations

from pathlib import Path

from tests.aws.stack_runs import JOB_ENABLED, config_with, run_main
from tests.golden import assert_matches_golden

GOLDEN = Path(__file__).parent / "golden" / "aws-stack.json"


def test_resource_graph_matches_the_golden_file():
    assert_matches_golden(run_main(config_with(JOB_ENABLED)), GOLDEN)


def test_golden_file_holds_no_secret_values():
    text = GOLDEN.read_text()
    assert "ecr-token-that-must-stay-secret" not in text
    assert '"kubeconfig": "[secret]"' in text
