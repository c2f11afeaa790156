"""Python field names as the schema spells them (`gpus_per_node` -> `gpusPerNode`).

The same rule as pulumi.provider.experimental.util.camel_case (pulumi 3.272), which the schema inference
uses; not imported from there because importing pulumi.provider.experimental registers Pulumi's copy of
google.rpc.Status in protobuf's default pool, and google-api-core (gcsfs) then fails to import in that
process with "duplicate symbol 'google.rpc.Status'". A Pulumi program never needs it; tests that run the
stacks and the trainer in one process would.
"""


def camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word[:1].upper() + word[1:] for word in rest)
