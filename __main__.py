"""trainstack's Pulumi program: pick the stack's cloud, check its config, build it, export its outputs.

Thin on purpose: everything else lives in infra/.
"""

import pulumi

from infra.aws import AwsStack, AwsStackArgs, ConfigError, parse_aws_config, raw_config

CLOUDS = ("aws",)  # gcp comes with the GCP stack
# The exit code that tells Pulumi's Python language host "the user has been told": it then adds no
# "program exited with non-zero exit code" line (pulumi-language-python's
# pythonProcessExitedAfterShowingUserActionableMessage; the runtime uses it the same way).
USER_TOLD_EXIT_CODE = 32


def selected_cloud(raw: dict[str, str], stack: str) -> str:
    """trainstack:cloud, or else the stack's name when it names a cloud (`aws`, `aws-dev`)."""
    cloud = raw.get("trainstack:cloud") or stack.split("-", 1)[0]
    if cloud not in CLOUDS:
        problem = (f"{cloud!r} is not a cloud trainstack can build yet (it can: {', '.join(CLOUDS)})"
                   if "trainstack:cloud" in raw else f"not set, and the stack name {stack!r} names no cloud")
        raise ConfigError("trainstack:cloud", problem, "pulumi stack select aws, or pulumi config set trainstack:cloud aws")
    return cloud


def main() -> None:
    raw = raw_config()
    selected_cloud(raw, pulumi.get_stack())
    config = parse_aws_config(raw)  # every key checked before any resource is registered
    platform = AwsStack("trainstack", AwsStackArgs(config=config))
    for output_name, value in platform.outputs.items():
        pulumi.export(output_name, value)


try:
    main()
except ConfigError as error:
    # Bad config: one line naming the key and the fix, no traceback, no second generic line.
    pulumi.log.error(str(error))
    raise SystemExit(USER_TOLD_EXIT_CODE) from None
