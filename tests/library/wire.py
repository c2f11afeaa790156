"""Component inputs as the engine delivers them to the provider's Construct, for in-process tests.

A consumer's inputs cross the wire as a google.protobuf Struct, where every number is a double (2 arrives as
2.0), and the provider server decodes them with rpc.deserialize_properties(keep_unknowns=True)
(pulumi 3.272, pulumi/provider/server.py, ProviderServicer.Construct). Tests that hand Construct a
Python dict directly skip that and miss what a TypeScript or YAML program sends.
"""

import re
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi.runtime import rpc


def over_the_wire(inputs: dict[str, Any]) -> dict[str, Any]:
    """`inputs` encoded as the engine sends them and decoded as the provider server does."""
    struct = struct_pb2.Struct()
    json_format.ParseDict(inputs, struct)
    return rpc.deserialize_properties(struct, keep_unknowns=True)


def resolved(value: Any, variables: dict[str, Any]) -> Any:
    """A Pulumi YAML property with its `${name}` interpolations replaced from `variables` (tests only)."""
    if isinstance(value, dict):
        return {key: resolved(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [resolved(item, variables) for item in value]
    if isinstance(value, str) and (match := re.fullmatch(r"\$\{([^}]+)\}", value)):
        return variables[match.group(1)]
    return value
