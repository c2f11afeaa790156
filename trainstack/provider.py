"""The component provider `pulumi package add` runs (PulumiPlugin.yaml at the repository root points here).

Pulumi's Python language host starts this file as a script with the engine's address in argv;
component_provider_host infers the schema from the components' annotations and serves Construct.
"""

import sys
from pathlib import Path

NAME = "trainstack"
VERSION = "0.1.0"


def main() -> None:
    from pulumi.provider.experimental import component_provider_host

    from trainstack.components import HOSTED

    component_provider_host(HOSTED, name=NAME, version=VERSION)


if __name__ == "__main__":
    # Started as a script, Python puts trainstack/ on sys.path, not the checkout that holds the packages.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
