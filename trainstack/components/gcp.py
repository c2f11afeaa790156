"""GcpStack, hosted: the whole GKE training stack from typed Args (the keys of `Pulumi.gcp.yaml`).

Its Args are the GCP stack's one typed model (trainstack/infra/gcp/settings.py), which a stack file loads into
too: each field checked as it is loaded, then resolved by resolve_gcp and the budget check exactly as `pulumi up`
of this repository's program does, so the same settings build the same resources (tests/library/test_facades.py
compares the graphs), as children of the infra component. Network names that are other resources' outputs (your
own Network and Subnetwork in existingNetwork) go to the infra stack as they are: GCP checks them.
"""

import dataclasses
from typing import Any

import pulumi

from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.stack_config import (
    FROM_ROOT,
    checked_stack,
    publish_stack_outputs,
    stack_errors_as_inputs,
)
from trainstack.components.tokens import moved_from_index, token
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp import GcpStack as InfraGcpStack
from trainstack.infra.gcp import GcpStackArgs as InfraGcpStackArgs
from trainstack.infra.gcp.config import GcpStackConfig, resolve_gcp
from trainstack.infra.gcp.cost import estimate_gcp_cost
from trainstack.infra.gcp.settings import (
    PROVIDER_FIELDS,
    Filestore,
    GcpExistingNetwork,
    GcpStackArgs,
    GkeGpuPool,
    GkeNetwork,
    GkeSystemNodes,
)

__all__ = ["Filestore", "GcpExistingNetwork", "GcpStack", "GcpStackArgs", "GkeGpuPool", "GkeNetwork", "GkeSystemNodes"]

# Settings that configure the Google provider rather than trainstack (gcp:project, gcp:region).
PROVIDER_KEYS = PROVIDER_FIELDS


class GcpStack(pulumi.ComponentResource):
    """The GKE GPU training stack: network, cluster, GPU pools, [GPUDirect], Filestore, bucket, registry, image, identity and the training platform."""

    cluster_name: pulumi.Output[str]
    """The GKE cluster's name."""
    kubeconfig: pulumi.Output[str]
    """The cluster's kubeconfig (secret; tokens from gke-gcloud-auth-plugin)."""
    image_ref: pulumi.Output[str]
    """The training image by digest."""
    bucket_name: pulumi.Output[str]
    """The snapshot bucket: data set, checkpoints and exports."""
    stack_outputs: pulumi.Output[dict[str, Any]]
    """Every output this repository's gcp stack exports, by the same camelCase names, except the kubeconfig (its own output)."""

    def __init__(self, name: str, args: GcpStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # The stack file's program (__main__.py) hands over the config it loaded and resolved, in the stack
        # file's terms; its infra stack sat at the stack's root before this component existed (FROM_ROOT).
        from_stack_file = isinstance(args, GcpStackConfig)
        if from_stack_file:
            given, config, known = None, args, True
        else:
            args = checked_args(args)
            given, project, region, known = gcp_settings(opts, args.project, args.region, args.labels)
            located = dataclasses.replace(args, project=project, region=region)
            config = checked_stack(f"GcpStack {name!r}", PROVIDER_KEYS,
                                   lambda: resolve_gcp(located, pulumi.get_stack()), estimate_gcp_cost)
        super().__init__(token("GcpStack"), name, None, moved_from_index("GcpStack", opts))

        stack = InfraGcpStack(name, InfraGcpStackArgs(config=config, provider=given, provider_settings_known=known), opts=pulumi.ResourceOptions(
            parent=self, aliases=FROM_ROOT if from_stack_file else None))
        self.outputs = stack.outputs  # Python: the stack file's exports, kubeconfig included
        publish_stack_outputs(self, stack.outputs)


def checked_args(args: Any) -> GcpStackArgs:
    """The caller's Args (or the provider's dict of them), each field checked, in the caller's terms. Names that
    are other resources' outputs (your own Network and Subnetwork) go through as they are: GCP checks them."""
    with stack_errors_as_inputs(PROVIDER_KEYS):
        return from_inputs(GcpStackArgs, args, key=NAMESPACE)
