"""The package schema `pulumi package add` gets from the provider (trainstack/provider.py), as committed JSON.

`make schema` (python -m trainstack.schema) writes it to schema.json; tests/library/test_schema.py runs the
same inference offline and compares, so a change to an Args class shows up in review as a schema diff.
The inference is the SDK's own (pulumi.provider.experimental: Analyzer, generate_schema), as the
provider's ComponentProvider runs it when it starts.
"""

import json
import sys
from pathlib import Path
from typing import Any

from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema

from trainstack.components import HOSTED
from trainstack.package_metadata import with_package_metadata
from trainstack.provider import NAME, VERSION, polished

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema.json"


def inferred_schema() -> dict[str, Any]:
    result = Analyzer(NAME).analyze(HOSTED)
    dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
    schema = generate_schema(NAME, VERSION, None, result["component_definitions"], result["type_definitions"],
                             dependencies)
    return with_package_metadata(polished(schema.to_json()))  # what the provider serves (trainstack/provider.py)


def rendered() -> str:
    return json.dumps(inferred_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        if SCHEMA_FILE.read_text() != rendered():
            print(f"{SCHEMA_FILE.name} is stale: run `make schema` and commit the diff", file=sys.stderr)
            return 1
        return 0
    SCHEMA_FILE.write_text(rendered())
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
