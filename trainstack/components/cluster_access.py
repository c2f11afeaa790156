"""The one way a hosted component reaches a cluster it did not create: a kubeconfig, as an explicit provider."""

import pulumi
import pulumi_kubernetes as k8s


def cluster_provider(name: str, kubeconfig: pulumi.Input[str], cluster_name: str | None,
                     parent: pulumi.Resource) -> k8s.Provider:
    """A Kubernetes provider for `kubeconfig`; with `cluster_name`, replaced only when the cluster changes (not
    when the kubeconfig's text does). Never the ambient kubeconfig: every object names this provider. The
    kubeconfig is kept as a secret in the state whether or not the caller marked it (it may hold a token)."""
    return k8s.Provider(f"{name}-k8s", kubeconfig=pulumi.Output.secret(kubeconfig), cluster_identifier=cluster_name,
                        opts=pulumi.ResourceOptions(parent=parent))


def given(**fields: object) -> dict[str, object]:
    """The fields a caller set: an unset (None) optional input keeps the infra component's own default."""
    return {key: value for key, value in fields.items() if value is not None}


def stand_in_provider() -> k8s.Provider:
    """An unregistered Provider object: lets an infra Args' validate() (which insists on an explicit provider)
    run before the façade registers anything, so bad input stops the program with nothing created."""
    return k8s.Provider.__new__(k8s.Provider)
