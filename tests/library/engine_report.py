"""What the engine prints for an error a provider's Construct raised (pulumi 3.272, pulumi/provider/server.py).

A property error arrives as an INVALID_ARGUMENT status whose details the engine renders `<path>: <reason>`
(sdk/go/common/util/errors, InputPropertiesError.Error); any other exception arrives with the component's
Python traceback appended by ProviderServicer.Construct.
"""

from pulumi.errors import InputPropertiesError, InputPropertyError


def reported(error: BaseException) -> str:
    if isinstance(error, InputPropertyError):
        return f"{error.property_path}: {error.reason}"
    if isinstance(error, InputPropertiesError):
        return error.message
    return f"{error}:\n  File ... (the component's traceback)"
