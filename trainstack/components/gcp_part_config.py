"""A GCP part's few settings resolved as the GKE stack's (resolve_gcp), its errors in the part's input terms.

The parts (GkeCluster, GkeGpuNodePool, FilestoreShare, GcsSnapshotBucket) take some of GcpStackArgs' fields; the rest
keep the stack's defaults, except that a part runs no job and makes no Filestore share unless it says so. Every
field is checked by its declared reader as a stack file's would be, then the stack's resolver applies its rules, so
a bad value gets the stack's one line, naming the part's input (stack_config.as_input_terms).
"""

from collections.abc import Mapping
from typing import Any

import pulumi

from trainstack.components.stack_config import stack_errors_as_inputs
from trainstack.infra.config import NAMESPACE
from trainstack.infra.config.job_settings import Job
from trainstack.infra.config.loader import from_inputs
from trainstack.infra.gcp.config import GcpStackConfig, resolve_gcp
from trainstack.infra.gcp.settings import Filestore, GcpStackArgs

# What a part leaves out of the stack: its job and its shared filesystem are another part's.
NOT_THE_PARTS = {"job": Job(enabled=False), "shared_filesystem": Filestore(enabled=False)}


def part_config(provider_keys: Mapping[str, str], renames: Mapping[str, str], **settings: Any) -> GcpStackConfig:
    """`settings` (GcpStackArgs' fields, by their Python names) checked and resolved; `provider_keys` and `renames`
    as for as_input_terms (project: gcp:project; sharedFilesystem.tier: tier)."""
    with stack_errors_as_inputs(provider_keys, renames):
        args = from_inputs(GcpStackArgs, {**NOT_THE_PARTS, **settings}, key=NAMESPACE)
        return resolve_gcp(args, pulumi.get_stack())
