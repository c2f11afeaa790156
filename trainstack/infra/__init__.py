"""The neutral layer: what every cloud's stack composes, and the conventions all components follow.

Layout.
- `aws/`, `gcp/`: what only that cloud has (network, cluster, node pools, filesystem, bucket, identity,
  registry), handed to the neutral layer as small typed handles (`core.contracts`: GpuPlacement,
  SharedStorage, ObjectStore, WorkloadIdentity).
- `kubernetes/`: the in-cluster half both clouds share: `TrainingPlatform` (kubernetes.platform)
  composes the device plugin, Kueue and its queues (sized by kubernetes.pod_requests), the job's
  service account and the training job (the Helm release of the chart).
- `image/`: the training image, built and pushed by the same program.
- `config/`: stack config readers, ConfigError and the `job` section; `cost/`: prices, the estimate
  and the budget guard; `audit/`: the orphan audit (`python -m trainstack.infra.audit`).
- `core/`: what every component uses: pinned versions, Args validation, resource options, the typed
  handles, repository paths, shell commands for outputs.

Dependency rule (tests/infra/test_layering.py): files under `aws/` or `gcp/` may import the rest;
nothing outside a cloud's folder imports it (neither `trainstack.infra.<cloud>` nor that cloud's
provider SDK). `__main__.py` is the one place that knows every cloud, and imports only the selected
one.

Component conventions:
- Args: a frozen, keyword-only dataclass `<Component>Args`, typed. Where a caller can get an
  argument wrong in a way the types do not show, `Args.validate(component)` checks it and
  `__init__` calls it before `super().__init__`, so nothing is registered for bad arguments
  (trainstack.infra.core.validation: one-line InvalidArgsError). Args built only from parsed stack config are
  already checked by the config parser and need no validate().
- Handles, not loose fields: a component takes what it builds on (`cluster: EksCluster`,
  `gpu: GpuPlacement`) and reads the outputs it needs from it.
- Providers are explicit. The cloud provider is created once by the cloud's stack component and
  reaches every child through `providers=` in the stack's options (children are parented, so they
  inherit it). The Kubernetes provider is an Args field (`provider: k8s.Provider`), validated,
  because the cluster creates it mid-program and an in-cluster object must never fall back to the
  ambient kubeconfig.
- Every child has `parent=self`; `register_outputs` comes last; no resource is created inside
  `Output.apply`. Output keys (register_outputs and stack exports) are camelCase.
- Versions, charts and images are pinned in trainstack.infra.core.versions, each with its source.
"""

from typing import TYPE_CHECKING

from trainstack.infra.core.contracts import GpuPlacement, ObjectStore, SharedStorage, WorkloadIdentity
from trainstack.infra.core.validation import InvalidArgsError
from trainstack.infra.kubernetes.kueue import Kueue, KueueArgs, PoolQueue
from trainstack.infra.kubernetes.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from trainstack.infra.kubernetes.platform import TrainingPlatform, TrainingPlatformArgs
from trainstack.infra.kubernetes.training_job import SecretEnv, TrainingJob, TrainingJobArgs

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from trainstack.infra.image.training_image import TrainingImage, TrainingImageArgs, tensorboard_image_args

# The training image needs pulumi_docker_build, which only the cloud extras ([aws], [gcp]) install: imported on
# first use, so `[kubernetes]` alone (TrainingPlatform on your own cluster) imports this package.
_IMAGE_NAMES = ("TrainingImage", "TrainingImageArgs", "tensorboard_image_args")


def _lazy_attribute(name: str):
    if name in _IMAGE_NAMES:
        from trainstack.infra.image import training_image

        return getattr(training_image, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not TYPE_CHECKING:  # a module __getattr__ would tell mypy that any name exists
    __getattr__ = _lazy_attribute


__all__ = [
    "GpuPlacement",
    "InvalidArgsError",
    "Kueue",
    "KueueArgs",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "ObjectStore",
    "PoolQueue",
    "SecretEnv",
    "SharedStorage",
    "TrainingImage",
    "TrainingImageArgs",
    "tensorboard_image_args",
    "TrainingJob",
    "TrainingJobArgs",
    "TrainingPlatform",
    "TrainingPlatformArgs",
    "WorkloadIdentity",
]
