"""Cloud-neutral Pulumi components that the AWS and GCP stacks compose.

Each takes an explicit Kubernetes provider (TrainingImage: a registry) in its Args dataclass,
parents every child to itself and registers its outputs last. Versions live in infra.versions.
"""

from infra.kueue import Kueue, KueueArgs
from infra.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from infra.training_image import TrainingImage, TrainingImageArgs
from infra.training_job import SecretEnv, TrainingJob, TrainingJobArgs
from infra.validation import InvalidArgsError

__all__ = [
    "InvalidArgsError",
    "Kueue",
    "KueueArgs",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "SecretEnv",
    "TrainingImage",
    "TrainingImageArgs",
    "TrainingJob",
    "TrainingJobArgs",
]
