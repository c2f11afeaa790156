"""GcpStack, hosted: the whole GKE training stack from typed Args (the keys of `Pulumi.gcp.yaml`).

A façade over trainstack.infra.gcp.GcpStack. Its Args are the stack file's settings, typed; they become stack config
again and go through parse_gcp_config and the budget check exactly as `pulumi up` of this repository's
program does, so the same settings build the same resources (tests/library/test_facades.py compares the
graphs), as children of the infra component.
"""

import dataclasses
from typing import Any

import pulumi

from trainstack.components.args_from_inputs import args_from_inputs
from trainstack.components.gcp_provider import gcp_settings
from trainstack.components.part_config import checkable_id
from trainstack.components.stack_config import FROM_ROOT, checked_stack_config, publish_stack_outputs
from trainstack.infra.gcp import GcpStack as InfraGcpStack
from trainstack.infra.gcp import GcpStackArgs as InfraGcpStackArgs
from trainstack.infra.gcp import GcpStackConfig, parse_gcp_config
from trainstack.infra.gcp.cost import estimate_gcp_cost
from trainstack.infra.gcp.settings import (
    Filestore,
    GcpExistingNetwork,
    GcpStackArgs,
    GkeGpuPool,
    GkeNetwork,
    GkeSystemNodes,
)

__all__ = ["Filestore", "GcpExistingNetwork", "GcpStack", "GcpStackArgs", "GkeGpuPool", "GkeNetwork", "GkeSystemNodes"]

# Settings that configure the Google provider rather than trainstack (gcp:project, gcp:region).
PROVIDER_KEYS = {"project": "gcp:project", "region": "gcp:region"}


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
        # The stack file's program (__main__.py) hands over the config it parsed and checked, in the stack
        # file's terms; its infra stack sat at the stack's root before this façade existed (FROM_ROOT).
        from_stack_file = isinstance(args, GcpStackConfig)
        if from_stack_file:
            given, config = None, args
        else:
            args = args_from_inputs(GcpStackArgs, args)
            given, project, region = gcp_settings(opts, args.project, args.region, args.labels)
            config = checked_config(name, dataclasses.replace(args, project=project, region=region))
        super().__init__("trainstack:index:GcpStack", name, None, opts)

        stack = InfraGcpStack(name, InfraGcpStackArgs(config=config, provider=given), opts=pulumi.ResourceOptions(
            parent=self, aliases=FROM_ROOT if from_stack_file else None))
        self.outputs = stack.outputs  # Python: the stack file's exports, kubeconfig included
        publish_stack_outputs(self, stack.outputs)


def checked_config(name: str, args: GcpStackArgs) -> GcpStackConfig:
    """`args` through the stack's parser and budget check, in the caller's terms. Names that are outputs (your
    own Network and Subnetwork) are checked by GCP: the parser sees stand-ins, the stack gets the names."""
    existing = args.existing_network
    checkable = dataclasses.replace(args, existing_network=existing and dataclasses.replace(
        existing, network=checkable_id(existing.network, "network"),
        subnetwork=checkable_id(existing.subnetwork, "subnetwork")))
    config = checked_stack_config(f"GcpStack {name!r}", checkable, PROVIDER_KEYS, parse_gcp_config, estimate_gcp_cost)
    if existing is None:
        return config
    return dataclasses.replace(config, network=dataclasses.replace(config.network, existing=dataclasses.replace(
        config.network.existing, network=existing.network, subnetwork=existing.subnetwork)))
