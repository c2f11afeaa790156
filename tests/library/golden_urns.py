"""The engine's URNs of a golden graph (tests/*/golden/*.json), whose entries name a resource and its parent as
`<type>::<name>` (tests/stack_runs.py short): the engine writes a resource's type after its parent's whole
chain of types (`<parent type>$...$<type>`), a top-level resource's type alone.

    python -m tests.library.golden_urns > tests/library/fixtures/urns-before-modules.json

wrote the fixture the alias test compares with (test_type_aliases.py): the goldens of d7c6ba9, the last
commit before the components moved from trainstack:index to their modules.
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Each stack's golden, as tests/golden_graphs.py names them.
GOLDENS = {"aws": "tests/aws/golden/aws-stack.json", "aws-p5": "tests/aws/golden/aws-p5-stack.json",
           "gcp": "tests/gcp/golden/gcp-stack.json", "gcp-a3": "tests/gcp/golden/gcp-a3-stack.json",
           "gcp-a4": "tests/gcp/golden/gcp-a4-stack.json"}


def engine_urns(entries: list[dict]) -> list[str]:
    """`<qualified type>::<name>` of every entry (short forms are unique within a golden: asserted)."""
    by_short = {entry["resource"]: entry for entry in entries}
    assert len(by_short) == len(entries), "two golden entries share a <type>::<name>"

    def qualified(short: str) -> str:
        parent, own_type = by_short[short]["parent"], short.split("::")[0]
        return f"{qualified(parent)}${own_type}" if parent in by_short else own_type

    return sorted(f"{qualified(short)}::{short.split('::', 1)[1]}" for short in by_short)


def main() -> None:
    urns = {stack: engine_urns(json.loads((REPO / path).read_text())) for stack, path in GOLDENS.items()}
    sys.stdout.write(json.dumps(urns, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
