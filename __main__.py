"""trainstack's Pulumi program: pick the stack's cloud, check its config, build it, export its outputs.

Thin on purpose: the first user of the library. It checks the stack file's config in the stack file's terms
(`trainstack:job.podsMax ... Fix: pulumi config set ...`) and builds the stack through the hosted component a
library user builds (trainstack.components AwsStack/GcpStack), which aliases the resources the program built
before it existed: nothing is replaced. This is the one place that knows every cloud.
"""

from collections.abc import Callable
from typing import Any

import pulumi

from trainstack.infra.config import NAMESPACE, ConfigError, raw_config
from trainstack.infra.cost import check_budget


def build_aws(raw: dict[str, str]) -> dict[str, Any]:
    from trainstack.components.aws import AwsStack
    from trainstack.infra.aws import parse_aws_config
    from trainstack.infra.aws.cost import estimate_aws_cost

    config = parse_aws_config(raw)  # every key checked before any resource is registered
    check_budget(estimate_aws_cost(config), config.budget, config.job.enabled)  # and the budget
    return AwsStack("trainstack", config).outputs


def build_gcp(raw: dict[str, str]) -> dict[str, Any]:
    from trainstack.components.gcp import GcpStack
    from trainstack.infra.gcp import parse_gcp_config
    from trainstack.infra.gcp.cost import estimate_gcp_cost

    config = parse_gcp_config(raw)
    check_budget(estimate_gcp_cost(config), config.budget, config.job.enabled)
    return GcpStack("trainstack", config).outputs


# `pulumi stack select aws|gcp|gcp-a3`: the stack's outputs, built from its raw config.
STACKS: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {"aws": build_aws, "gcp": build_gcp}
# The exit code that tells Pulumi's Python language host "the user has been told": it then adds no
# "program exited with non-zero exit code" line (pulumi-language-python's
# pythonProcessExitedAfterShowingUserActionableMessage; the runtime uses it the same way).
USER_TOLD_EXIT_CODE = 32


def selected_cloud(raw: dict[str, str], stack: str) -> str:
    """trainstack:cloud, or else the stack's name when it names a cloud (`aws`, `gcp-a3`, `aws-dev`)."""
    cloud = raw.get(f"{NAMESPACE}:cloud") or stack.split("-", 1)[0]
    if cloud not in STACKS:
        problem = (f"{cloud!r} is not a cloud trainstack can build (it can: {', '.join(STACKS)})"
                   if f"{NAMESPACE}:cloud" in raw else f"not set, and the stack name {stack!r} names no cloud")
        raise ConfigError(f"{NAMESPACE}:cloud", problem,
                          "pulumi stack select aws (or gcp), or pulumi config set trainstack:cloud aws")
    return cloud


# Adopting a log group EKS recreated (trainstack/infra/aws/cluster.py) imports it and applies our settings in the
# same update: the engine does that since pulumi/pulumi#19339, first released in v3.174.0; an older CLI
# would refuse the import's diff. Refused up front instead, by the CLI itself.
MINIMUM_PULUMI_CLI = ">=3.174.0"


def main() -> None:
    pulumi.require_pulumi_version(MINIMUM_PULUMI_CLI)
    raw = raw_config()
    outputs = STACKS[selected_cloud(raw, pulumi.get_stack())](raw)
    for output_name, value in outputs.items():
        pulumi.export(output_name, value)


try:
    main()
except ConfigError as error:
    # Bad config: one line naming the key and the fix, no traceback, no second generic line.
    pulumi.log.error(str(error))
    raise SystemExit(USER_TOLD_EXIT_CODE) from None
