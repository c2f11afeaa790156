"""The neutral layer: what every cloud's stack composes, and the conventions all components follow.

Layout. `infra/<cloud>/` (aws, gcp) builds what only that cloud has (network, cluster, node pools,
filesystem, bucket, identity, registry) and hands the results to the neutral layer as small typed
handles (`infra.contracts`: GpuPlacement, SharedStorage, ObjectStore, WorkloadIdentity).
`TrainingPlatform` (infra.platform) turns them into the in-cluster half both clouds share. Config
readers, ConfigError and the `job` section live in `infra.config`.

Dependency rule (tests/infra/test_layering.py): files under `infra/<cloud>/` may import from
`infra/`; nothing outside `infra/<cloud>/` imports a cloud package (neither `infra.<cloud>` nor
that cloud's provider SDK). `__main__.py` is the one place that knows every cloud, and imports
only the selected one.

Component conventions:
- Args: a frozen, keyword-only dataclass `<Component>Args`, typed. Where a caller can get an
  argument wrong in a way the types do not show, `Args.validate(component)` checks it and
  `__init__` calls it before `super().__init__`, so nothing is registered for bad arguments
  (infra.validation: one-line InvalidArgsError). Args built only from parsed stack config are
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
- Versions, charts and images are pinned in infra.versions, each with its source.
"""

from infra.contracts import GpuPlacement, ObjectStore, SharedStorage, WorkloadIdentity
from infra.kueue import Kueue, KueueArgs, PoolQueue
from infra.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from infra.platform import TrainingPlatform, TrainingPlatformArgs
from infra.training_image import TrainingImage, TrainingImageArgs, tensorboard_image_args
from infra.training_job import SecretEnv, TrainingJob, TrainingJobArgs
from infra.validation import InvalidArgsError

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
