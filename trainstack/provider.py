"""The component provider that `pulumi package add` runs (provider/PulumiPlugin.yaml, provider/__main__.py).

component_provider_host infers the schema from the components' annotations and serves Construct; the engine's
address arrives in argv.
"""

NAME = "trainstack"
VERSION = "0.1.0"


def main() -> None:
    from pulumi.provider.experimental import component_provider_host

    from trainstack.components import HOSTED

    component_provider_host(HOSTED, name=NAME, version=VERSION)
