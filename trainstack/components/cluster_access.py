"""How a hosted component reaches a cluster it did not create: the kubernetes provider the caller gives it
(opts.provider/providers, or its parent's), else one made from its kubeconfig input; never an ambient one."""

import pulumi
import pulumi_kubernetes as k8s

from trainstack.components.providers import given_provider
from trainstack.components.stack_config import InputError


def check_cluster_access(opts: pulumi.ResourceOptions | None, kubeconfig: pulumi.Input[str] | None) -> None:
    """Refuse a part that has neither a kubernetes provider nor a kubeconfig (before it registers anything)."""
    if kubeconfig is None and given_provider(opts, "kubernetes") is None:
        raise InputError("kubeconfig: not set, and no kubernetes provider is given. Fix: set the input kubeconfig "
                         "(the cluster's, as text), or pass your kubernetes.Provider in the resource options")


def cluster_provider(name: str, kubeconfig: pulumi.Input[str] | None, cluster_name: pulumi.Input[str] | None,
                     parent: pulumi.Resource) -> k8s.Provider:
    """A provider for `kubeconfig` when the input is set (the caller's explicit choice), with `cluster_name`
    replaced only when the cluster changes (not when the kubeconfig's text does); else the kubernetes provider
    `parent` was given or inherited (check_cluster_access made sure there is one). Every object names this
    provider. The kubeconfig is kept as a secret in the state whether or not the caller marked it (it may
    hold a token)."""
    if kubeconfig is None:
        return parent._providers["kubernetes"]  # noqa: SLF001 - what Pulumi's own lookup reads
    return k8s.Provider(f"{name}-k8s", kubeconfig=pulumi.Output.secret(kubeconfig), cluster_identifier=cluster_name,
                        opts=pulumi.ResourceOptions(parent=parent))


def given(**fields: object) -> dict[str, object]:
    """The fields a caller set: an unset (None) optional input keeps the infra component's own default."""
    return {key: value for key, value in fields.items() if value is not None}


def stand_in_provider() -> k8s.Provider:
    """An unregistered Provider object: lets an infra Args' validate() (which insists on an explicit provider)
    run before the façade registers anything, so bad input stops the program with nothing created."""
    return k8s.Provider.__new__(k8s.Provider)
