"""The EFA node group's user data: an AL2023 NodeConfig that lifts the containers' locked-memory limit.

libfabric's EFA provider registers its packet pools and NCCL's buffers with the device, which pins them:
under a small RLIMIT_MEMLOCK that fails with "(-12) Cannot allocate memory" (libfabric
prov/efa/docs/overview.md; awslabs/awsome-distributed-ai issue #647). The trainer runs as a non-root
user, so CAP_IPC_LOCK would not lift the limit either; it must come from the container runtime.

On AL2023 containerd builds every container from a base runtime spec that nodeadm writes, and the EKS
AMI's default lists only RLIMIT_NOFILE (awslabs/amazon-eks-ami@81fec2e
nodeadm/internal/containerd/base-runtime-spec.json). NodeConfig's `spec.containerd.baseRuntimeSpec`
(nodeadm/api/v1alpha1/nodeconfig_types.go ContainerdOptions.BaseRuntimeSpec) is merged into that default,
lists replaced whole (util.Merge: mergo WithOverride; the e2e case
nodeadm/test/e2e/cases/containerd-base-runtime-spec), so the rlimits here repeat the default's NOFILE.

The memlock value is not RLIM_INFINITY (18446744073709551615): nodeadm merges the spec through Go's
encoding/json into map[string]interface{} (base_runtime_spec.go, util/merge.go), which makes every number a
float64, and that value comes back as 18446744073709552000 (the float64 nearest it, 2**64 written the
way encoding/json writes floats), which no longer fits the uint64 of the OCI spec's rlimit. 2**53 bytes survives the float64 round trip exactly and is far above any instance's memory.

For a managed node group with an AMI type, EKS merges a launch template's MIME multipart user data with
its own NodeConfig (cluster name, endpoint, CA), so this part names no cluster (EKS user guide
launch-templates.html; nodeadm/doc/examples.md "Merging multiple configuration objects").
"""

from __future__ import annotations

import base64

import yaml

NODECONFIG_CONTENT_TYPE = "application/node.eks.aws"
MIME_BOUNDARY = "TRAINSTACK-EFA"
# The EKS AMI's own container NOFILE (base-runtime-spec.json above).
NOFILE_SOFT, NOFILE_HARD = 65536, 1048576
# Effectively unlimited; see the module docstring for why not RLIM_INFINITY.
MEMLOCK_BYTES = 2**53


def efa_node_config() -> dict:
    """The NodeConfig document: the containers' rlimits, nothing else."""
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"containerd": {"baseRuntimeSpec": {"process": {"rlimits": [
            {"type": "RLIMIT_NOFILE", "soft": NOFILE_SOFT, "hard": NOFILE_HARD},
            {"type": "RLIMIT_MEMLOCK", "soft": MEMLOCK_BYTES, "hard": MEMLOCK_BYTES},
        ]}}}},
    }


def efa_node_user_data() -> str:
    """The launch template's user_data: base64 of a one-part MIME multipart document holding the NodeConfig."""
    document = yaml.safe_dump(efa_node_config(), sort_keys=False)
    mime = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        f"Content-Type: {NODECONFIG_CONTENT_TYPE}\n"
        "\n"
        "---\n"
        f"{document}"
        "\n"
        f"--{MIME_BOUNDARY}--\n"
    )
    return base64.b64encode(mime.encode()).decode()
