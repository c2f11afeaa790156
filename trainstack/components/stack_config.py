"""What the stack components (GcpStack, AwsStack) share: their settings resolved and budget-checked in the
caller's terms, their typed outputs, and the alias that keeps the resources `__main__.py` built before them.

The stack components take the same settings as `Pulumi.<stack>.yaml` as the stack's one typed model; the
stack's resolver checks them: one set of rules and one set of error messages for a stack file and for a
library caller, whose errors name input paths instead of config keys (as_input_terms).
"""

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pulumi

from trainstack.components.spelling import camel_case
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.errors import ConfigError, InputError
from trainstack.infra.cost import check_budget

# The repository's own stacks built their infra stack at the root before __main__.py built them through the
# façades: this alias keeps every existing resource (the engine aliases each child through its parent's
# alias: pulumi/pulumi pkg/resource/deploy/step_generator.go, generateAliases and inheritedChildAlias).
FROM_ROOT = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]


@contextlib.contextmanager
def stack_errors_as_inputs(provider_keys: Mapping[str, str], renames: Mapping[str, str] | None = None
                           ) -> Iterator[None]:
    """Re-raise the stack's loader's or resolver's ConfigError in the caller's terms: property paths, not config keys.

    The resolvers speak to a stack file's owner (`trainstack:job.podsMax`, `pulumi config set --path ...`); a
    TypeScript, YAML or Python caller of the component sets `job.podsMax` in its inputs instead (as_input_terms).
    """
    try:
        yield
    except ConfigError as error:
        raise InputError(as_input_terms(str(error), provider_keys, renames)) from None


def as_input_terms(message: str, provider_keys: Mapping[str, str], renames: Mapping[str, str] | None = None) -> str:
    """`message` with config commands and keys rewritten as component inputs (see stack_errors_as_inputs).

    `provider_keys` maps an input to the provider key it sets (project: gcp:project); a part that takes a few of a
    stack's settings also gives `renames`, from a config path as the rest of this leaves it (`gpuPools.t4`,
    `network.masterCidr`) to the part's input that stands for it (`pool`, `masterCidr`).
    """
    paths = {full_key: camel_case(name) for name, full_key in provider_keys.items()}
    key = r"'?([\w.:\[\]<>-]+)'?"
    message = re.sub(rf"pulumi config set (?:--path )?{key} ", r"set the input \1 to ", message)
    message = re.sub(rf"pulumi config rm (?:--path )?{key}", r"remove the input \1", message)
    for full_key, path in paths.items():
        message = re.sub(rf"\b{re.escape(full_key)}\b", path, message)
    message = re.sub(rf"\b{NAMESPACE}:(?=\w)", "", message)
    for path, name in sorted((renames or {}).items(), key=lambda item: -len(item[0])):
        message = re.sub(rf"(?<![\w.]){re.escape(path)}(?![\w])", name, message)
    return message


def publish_stack_outputs(component: pulumi.ComponentResource, outputs: Mapping[str, Any]) -> None:
    """Set a stack façade's typed outputs from the wrapped stack's outputs, then register them.

    The kubeconfig is its own secret output and is left out of `stack_outputs`: in there it would make
    the whole map secret.
    """
    component.cluster_name = pulumi.Output.from_input(outputs["clusterName"])
    component.kubeconfig = pulumi.Output.secret(outputs["kubeconfig"])
    component.image_ref = pulumi.Output.from_input(outputs["imageRef"])
    component.bucket_name = pulumi.Output.from_input(outputs["bucketName"])
    component.stack_outputs = pulumi.Output.from_input({key: value for key, value in outputs.items()
                                                        if key != "kubeconfig"})
    component.register_outputs({"clusterName": component.cluster_name, "kubeconfig": component.kubeconfig,
                                "imageRef": component.image_ref, "bucketName": component.bucket_name,
                                "stackOutputs": component.stack_outputs})


def checked_stack(label: str, provider_keys: Mapping[str, str], resolve: Callable[[], Any],
                  estimate: Callable[[Any], Any]) -> Any:
    """A stack component's settings resolved (`resolve()`) and through the budget check, and the training image's
    build context confirmed, all before anything is registered (`label` names the component), in its terms."""
    with stack_errors_as_inputs(provider_keys):
        config = resolve()
        check_budget(estimate(config), config.budget, config.job.enabled)
    from trainstack.infra.image.training_image import missing_build_context  # [aws]/[gcp] only

    missing = missing_build_context()  # the stack builds the training image from the checkout
    if missing:
        raise InputError(f"{label}: {missing}")
    return config
