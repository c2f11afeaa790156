"""Python field names as the schema spells them (`gpus_per_node` -> `gpusPerNode`): the loader's rule
(trainstack/infra/config/loader.py camel_case), which is pulumi.provider.experimental.util.camel_case's.

Not imported from the SDK because importing pulumi.provider.experimental registers Pulumi's copy of
google.rpc.Status in protobuf's default pool, and google-api-core (gcsfs) then fails to import in that
process with "duplicate symbol 'google.rpc.Status'".
"""

from trainstack.infra.config.loader import camel_case

__all__ = ["camel_case"]
