"""The Kubernetes namespaces the stacks install into, named once: the job's namespace must be none of them.

The stack creates the job's namespace (unless it is `default`) and deletes it on destroy, so a job
namespace that is also one of these would be created twice (the API server answers AlreadyExists) and,
on destroy, deleted with everything the stack installed there.
"""

from __future__ import annotations

# The namespace and release name of the Kueue installation docs (`helm install kueue ... -n kueue-system`).
KUEUE = "kueue-system"
# The NVIDIA device plugin's own namespace (its chart refuses `default`); the EFA device plugin shares it.
NVIDIA_DEVICE_PLUGIN = "nvidia-device-plugin"
# The cluster autoscaler's own: the preview role may read Helm release Secrets here without kube-system's.
CLUSTER_AUTOSCALER = "cluster-autoscaler"

# "Avoid creating namespaces with the prefix kube-, since it is reserved for Kubernetes system
# namespaces" (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/); every cluster
# has kube-system, kube-public and kube-node-lease.
KUBERNETES_RESERVED_PREFIX = "kube-"
# GKE's own: Managed Service for Prometheus creates gmp-system and gmp-public ("do not modify or deploy
# anything in this namespace", cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed), and
# GKE's managed components live in gke-* namespaces (gke-managed-system, gke-managed-filestorecsi,
# gke-gmp-system on Autopilot). Refused on every cloud: a job namespace should not depend on where it runs.
CLOUD_RESERVED_PREFIXES = ("gke-",)
CLOUD_RESERVED = ("gmp-system", "gmp-public")


def platform_namespaces(device_plugin: bool) -> dict[str, str]:
    """What the training platform installs, by namespace: Kueue, and the NVIDIA device plugin unless the
    cloud runs its own (GKE does)."""
    installed = {KUEUE: "Kueue"}
    if device_plugin:
        installed[NVIDIA_DEVICE_PLUGIN] = "the NVIDIA device plugin"
    return installed
