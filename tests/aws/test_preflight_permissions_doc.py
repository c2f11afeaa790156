"""docs/cost.md's preflight table names every AWS API that preflight asks: a preview role built from the
table (narrower than ReadOnlyAccess) must not fail a read the table left out."""

import re
from pathlib import Path

from trainstack.infra.aws import preflight

REPO = Path(__file__).resolve().parents[2]
API = re.compile(r"\b(?:ec2|eks|ssm|sts|servicequotas):[A-Z][A-Za-z]+")


def test_the_cost_doc_preflight_table_names_every_api_preflight_asks():
    asked = set(API.findall(preflight.__doc__ or ""))
    table = "\n".join(line for line in (REPO / "docs" / "cost.md").read_text().splitlines()
                      if line.startswith("|") and line.rstrip().endswith("| credentials |"))
    assert asked, "preflight.py's docstring names the APIs it asks"
    assert sorted(asked - set(API.findall(table))) == []
