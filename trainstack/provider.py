"""The component provider that `pulumi package add` runs (provider/PulumiPlugin.yaml, provider/__main__.py).

The SDK's ComponentProvider infers the schema from the components' annotations and serves Construct; the
engine's address arrives in argv. Ours differs in one thing: a bad input reaches the user as one line.
ComponentProvider.construct wraps whatever a component raises in ComponentInitError, and
ProviderServicer.Construct turns that into an error carrying the Python traceback; only an
InputPropertyError (or InputPropertiesError) becomes a plain invalid-properties status, which the engine
prints as `<property path>: <reason>` (pulumi 3.272: pulumi/provider/experimental/component.py,
ComponentProvider.construct; pulumi/provider/server.py, ProviderServicer.Construct; the engine's rendering
in sdk/go/common/util/errors InputPropertiesError). So a component's own refusal of its inputs (an
InputError from a part's checks, an InvalidArgsError from an infra component's) is re-raised as that.
"""

import difflib
import json
import re
from typing import Any

import pulumi
from pulumi.errors import InputPropertiesError, InputPropertyError
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ComponentInitError

from trainstack.components.stack_config import InputError
from trainstack.components.tokens import TOKENS, component_of, index_token
from trainstack.infra.config.loader import NOT_PLAIN
from trainstack.infra.core.validation import InvalidArgsError
from trainstack.package_metadata import VERSION, with_package_metadata

NAME = "trainstack"

# `[<Component> '<name>': ]<property path>: <reason>`, as InputErrors are written: the path runs to the first
# ": " (a tag key such as `tags.aws:owner` keeps its own colon).
_COMPONENT_PREFIX = re.compile(r"[A-Z]\w* '[^']*': ")
_PATH_AND_REASON = re.compile(r"([A-Za-z][\w.\[\]/:-]*?): (.+)", re.S)
WHOLE_OUTPUT = ("takes a plain object, not an output or a secret as a whole. Fix: write the object out (a secret "
                "or another resource's output may go in its fields that take outputs)")


PLAIN_OUTPUT = ("takes a plain value, not an output or a secret. Fix: pass the value itself (a literal or stack "
                "config), not another resource's output")


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def unknown_property(name: str, properties: Any) -> str:
    """The reason for a property the schema does not have, with the closest one it has."""
    close = difflib.get_close_matches(name, sorted(properties), n=1, cutoff=0.5)
    hint = f"rename it to {close[0]}" if close else f"remove it (the properties here: {', '.join(sorted(properties))})"
    return f"unknown property. Fix: {hint}"


def as_property_error(message: str) -> InputPropertyError | InputPropertiesError:
    """An InputError's one line as the property error the provider server reports without a traceback."""
    message = _COMPONENT_PREFIX.sub("", message.strip(), count=1)
    found = _PATH_AND_REASON.fullmatch(message)
    if found is None:
        return InputPropertiesError(message)
    return InputPropertyError(found.group(1), found.group(2))


DEPRECATED = "Deprecated: "
SECRET_PROPERTIES = ("kubeconfig",)  # secret in the state whatever the caller marks (they hold cluster access)


def polished(schema: dict[str, Any]) -> dict[str, Any]:
    """The inferred schema with what Pulumi's inference cannot say from annotations (pulumi 3.272,
    pulumi/provider/experimental/schema.py Property has neither): `secret` on the kubeconfigs, and a
    `deprecationMessage` on each input whose description starts with "Deprecated: " (codegen then marks
    it deprecated in every language's SDK)."""
    def polish(properties: dict[str, Any]) -> None:
        for name, prop in properties.items():
            if name in SECRET_PROPERTIES:
                prop["secret"] = True
            description = prop.get("description", "")
            if description.startswith(DEPRECATED):
                message = description.removeprefix(DEPRECATED)
                prop["deprecationMessage"] = message[:1].upper() + message[1:]

    for resource in schema.get("resources", {}).values():
        polish(resource.get("inputProperties", {}))
        polish(resource.get("properties", {}))
    for type_ in schema.get("types", {}).values():
        polish(type_.get("properties", {}))
    return in_modules(schema)


def in_modules(schema: dict[str, Any]) -> dict[str, Any]:
    """Each component under its module's token (trainstack/components/tokens.py), with an alias from its index
    token, and the index token kept as a deprecated resource of the same shape. The SDK's inference puts every
    component in `index` (pulumi 3.272, pulumi/provider/experimental/schema.py generate_schema). The alias lets an
    SDK generated from this schema take over resources made under the old token; the deprecated resource lets a
    YAML program written against the old schema resolve its type at all (pulumi-yaml, pkg/pulumiyaml/packages.go
    ResolveResource: a token that is not a resource of the schema is an error; aliases are not looked up).
    The types stay in `index`: the schema has no alias for a type (pkg/codegen/schema/pulumi.json,
    objectTypeSpec), so a moved type would be a renamed class in every SDK, and a program that names one (Go, C#,
    Java, typed Python) would break."""
    resources = schema.get("resources", {})
    for component, new_token in TOKENS.items():
        old_token = index_token(component)
        if old_token not in resources:
            continue
        resources[new_token] = {**resources[old_token], "aliases": [{"type": old_token}]}
        resources[old_token] = {**resources[old_token], "deprecationMessage": (
            f"{old_token} is now {new_token}: use that token (the same inputs and outputs; a resource made under "
            f"this one is taken over through the alias, not replaced)")}
    return schema


class TrainstackProvider(ComponentProvider):
    """ComponentProvider whose components' input errors become property errors (see the module's docstring);
    its schema is polished() (secret kubeconfigs, deprecation messages) and carries the package metadata
    (trainstack/package_metadata.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schema = json.dumps(with_package_metadata(polished(json.loads(self.schema))))

    def map_input_properties(self, inputs: Any, properties: Any, mapping: Any, component_name: str,
                             property_path: str) -> Any:
        """The SDK's mapping, refusing an object input (a schema type) that arrives as a whole Output: a secret
        (fn::secret, a secret config object) or another resource's output. The SDK maps it as {} (pulumi
        3.272, ComponentProvider.map_input_properties: `input_val if isinstance(input_val, dict) else {}`),
        so the component would silently build its defaults instead of what the caller wrote."""
        if isinstance(inputs, NOT_PLAIN):
            raise InputPropertyError(property_path, WHOLE_OUTPUT)
        for name in sorted(set(inputs) - set(properties)) if isinstance(inputs, dict) else ():
            # The SDK would drop it: a typo (gpuCount for gpusPerNode) would silently build the default.
            raise InputPropertyError(_joined(property_path, name), unknown_property(name, properties))
        for schema_name, prop in properties.items():
            value = inputs.get(schema_name) if isinstance(inputs, dict) else None
            if not isinstance(value, NOT_PLAIN):
                continue
            if prop.ref:
                type_def = self.get_type_definition(prop)
                if type_def is not None and not type_def.enum:
                    raise InputPropertyError(_joined(property_path, schema_name), WHOLE_OUTPUT)
            elif prop.plain:
                # A plain scalar: the SDK would call int() on the Output and answer with a Python traceback.
                raise InputPropertyError(_joined(property_path, schema_name), PLAIN_OUTPUT)
        return super().map_input_properties(inputs, properties, mapping, component_name, property_path)

    def construct(self, name: str, resource_type: str, inputs: Any, options: Any = None) -> Any:
        """The component `resource_type` names, by its module token or its index token (a program written
        against the schema before modules). The SDK's ComponentProvider takes `index` tokens only and finds the
        component by the token's last part, its class's name (pulumi 3.272, component.py construct,
        validate_resource_type): it is given that."""
        component = component_of(resource_type)
        if component is not None:
            if resource_type == index_token(component):
                # pulumi-yaml never shows the schema's deprecationMessage (it resolves the token silently).
                pulumi.log.warn(f"{resource_type} is deprecated: use {TOKENS[component]} (the same inputs and "
                                "outputs; docs/library.md, Type tokens)")
            resource_type = index_token(component)
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            if isinstance(error.inner, (InputError, InvalidArgsError)):
                raise as_property_error(str(error.inner)) from None
            raise


def main() -> None:
    import sys

    from pulumi.provider import main as serve

    from trainstack.components import HOSTED

    # component_provider_host, with our provider in place of ComponentProvider (pulumi 3.272,
    # pulumi/provider/experimental/host.py): the plugin's argv is its folder, then the engine's address.
    serve(TrainstackProvider(HOSTED, NAME, version=VERSION), sys.argv[1:])
