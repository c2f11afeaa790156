"""Every chart version, image version and Kubernetes API version the infrastructure uses, in one place.

Bump a version here only together with the source it was checked against (named next to it), and
run `pytest tests/infra`: the tests read these names, not copies of the values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChartPin:
    """A Helm chart at an exact version: `chart` is an OCI URL or a name inside `repo`."""

    chart: str
    version: str
    repo: str | None = None  # a classic (index.yaml) chart repository; None for OCI or local charts


# Kueue: chart location and command from the Kueue installation docs ("Install by Helm"):
#   helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version=<chart_version>
# kubernetes-sigs/kueue site/content/en/docs/installation/_index.md; chart_version 0.19.2 /
# version v0.19.2 in site/hugo.toml (tag v0.19.2, the newest release). Needs Kubernetes >= 1.29.
KUEUE_VERSION = "v0.19.2"
KUEUE_CHART = ChartPin(chart="oci://registry.k8s.io/kueue/charts/kueue", version="0.19.2")
# v1beta2 has been the CRDs' storage version since Kueue v0.16; in v0.19.2 v1beta1 is still served
# but marked `deprecated: true` (charts/kueue/templates/crd/kueue.x-k8s.io_*.yaml at tag v0.19.2).
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"

# NVIDIA device plugin: repository and chart name from the project's README ("helm repo add nvdp
# https://nvidia.github.io/k8s-device-plugin"); 0.20.0 is the newest tag of NVIDIA/k8s-device-plugin
# and is listed in the repository's index.yaml (gh-pages branch). The chart's appVersion picks the
# image nvcr.io/nvidia/k8s-device-plugin:v0.20.0.
NVIDIA_DEVICE_PLUGIN_VERSION = "v0.20.0"
NVIDIA_DEVICE_PLUGIN_CHART = ChartPin(
    chart="nvidia-device-plugin",
    version="0.20.0",
    repo="https://nvidia.github.io/k8s-device-plugin",
)


# --- AWS (owned by trainstack/infra/aws/; appended by the AWS stack) ------------------------------------------
# EKS Kubernetes version: 1.35 has been on EKS since 2026-01-28 with standard support to 2027-03
# (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html; endoflife.date/amazon-eks).
# 1.34 leaves standard support on 2026-12-02 (extended support costs $0.60/h instead of $0.10/h).
# Add a version to the supported set only after checking its release notes against our objects
# (batch/v1 Job with podFailurePolicy, storage.k8s.io/v1, apps/v1) and the add-on below.
EKS_KUBERNETES_VERSION = "1.35"
EKS_SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35")
# Managed node group AMI types (EKS API Nodegroup.amiType). AL2023 NVIDIA ships the driver and the
# container toolkit, not the device plugin (that is NvidiaDevicePlugin).
EKS_GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
EKS_SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# EFS CSI driver as an EKS add-on: v3.3.0-eksbuild.1 is the add-on build that
# ministryofjustice/modernisation-platform-environments#17347 (2026-06-24) and
# zalando-incubator/kubernetes-on-aws#11666 (2026-07-15) moved to (driver v3.3.0,
# kubernetes-sigs/aws-efs-csi-driver CHANGELOG-3.x.md). Check with
# `aws eks describe-addon-versions --addon-name aws-efs-csi-driver --kubernetes-version 1.35`.
EFS_CSI_ADDON_VERSION = "v3.3.0-eksbuild.1"
# cluster-autoscaler: chart repository and name from the chart's README (kubernetes/autoscaler,
# cluster-autoscaler/charts/cluster-autoscaler). Chart 9.59.0 (tag cluster-autoscaler-chart-9.59.0,
# 2026-07-21) has appVersion 1.35.0; the autoscaler's minor must match the cluster's (1.35). The image
# follows the cluster's minor (the autoscaler's scheduler simulation is built against one Kubernetes
# minor): the newest patch of each, tags cluster-autoscaler-1.35.2 (2026-07-22) and -1.34.5.
# A version added to EKS_SUPPORTED_KUBERNETES_VERSIONS needs its entry here (tests/aws check it).
CLUSTER_AUTOSCALER_CHART = ChartPin(
    chart="cluster-autoscaler",
    version="9.59.0",
    repo="https://kubernetes.github.io/autoscaler",
)
# EFA Kubernetes device plugin (EFA GPU groups only): aws/eks-charts stable/aws-efa-k8s-device-plugin,
# chart v0.5.30 (appVersion v0.5.20, image 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/
# aws-efa-k8s-device-plugin:v0.5.20; eks-charts commit 5239609, 2026-08-03), repository and name from
# its README ("helm repo add eks https://aws.github.io/eks-charts"). Its supportedInstanceLabels list
# has p5.48xlarge, p5e.48xlarge, p5en.48xlarge and p6-b200.48xlarge.
EFA_DEVICE_PLUGIN_CHART = ChartPin(
    chart="aws-efa-k8s-device-plugin",
    version="v0.5.30",
    repo="https://aws.github.io/eks-charts",
)
CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGE_TAGS = {"1.34": "v1.34.5", "1.35": "v1.35.2"}


# --- GCP (owned by trainstack/infra/gcp/) ----------------------------------------------------------------------
# GKE: the stack asks GKE (container.getEngineVersions, version_prefix "<minor>.") for the newest
# patch of this minor and starts the cluster there; the release channel upgrades it afterwards.
# 1.34 is on GKE's REGULAR channel through 2027 (cloud.google.com/kubernetes-engine/docs/release-schedule);
# the oldest minor we accept is the first whose Filestore CSI driver serves ZONAL 1-9.75 TiB shares
# (Filestore "csi-driver" page, supported tiers table); native sidecars (1.29) and Kueue 0.19 (1.29)
# are older still.
GKE_MIN_KUBERNETES_VERSION = "1.34"
GKE_OLDEST_KUBERNETES_VERSION = "1.31"
# APIs the stack needs (projects.Service); never disabled on destroy (other workloads may use them).
GCP_SERVICES = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "file.googleapis.com",
    "artifactregistry.googleapis.com",
    "storage.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    # Image streaming (the cluster's gcfs_config) needs the Container File System API
    # (cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements").
    "containerfilesystem.googleapis.com",
)
# GPUDirect on A3 (TCPX / TCPXO): the NCCL plugin installer's version is the chart's
# gpuNetworking.<mode>.plugin pin (workloads/charts/training-job/values.yaml), paired there with its
# RxDM daemon; trainstack/infra/gcp/gpu_direct.py reads it from the chart so the two cannot drift. The NRI device
# injector and the pause image are pinned by digest as container-engine-accelerators
# nri_device_injector/nri-device-injector.yaml and gpudirect-tcpxo/nccl-tcpxo-installer.yaml have them.
NRI_DEVICE_INJECTOR_IMAGE = (
    "gcr.io/gke-release/nri-device-injector@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970")
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
# TCPXO's pre-installation step (aperture devices, import-helper module) runs host tools through
# nsenter; the upstream manifest uses an unpinned `ubuntu`. Pinned by tag only, not by digest: no
# digest of ubuntu:24.04 is recorded anywhere in this repository and none can be resolved offline;
# add `@sha256:...` (`crane digest ubuntu:24.04`) to make a re-pushed tag unable to change it.
TCPXO_PREINSTALL_IMAGE = "ubuntu:24.04"
# TCPX's optmem_max tuning (container-engine-accelerators gpudirect-tcpx/optmem-max-ds.yaml) writes a
# sysctl from a shell; upstream's gke.gcr.io/gke-distroless/bash carries no tag, so the same
# Ubuntu (tag only, see above) serves.
OPTMEM_MAX_IMAGE = TCPXO_PREINSTALL_IMAGE


@dataclass(frozen=True)
class UpstreamInstallerPin:
    """The GPUDirect NCCL plugin installer (and its RxDM daemon) tags upstream's manifests name at `commit`."""

    commit: str  # container-engine-accelerators, full hash
    manifests: tuple[str, ...]  # the files at that commit that name the tags
    plugin: str
    rxdm: str | None = None  # RDMA (gIB) has no RxDM


# The chart's gpuNetworking.<mode>.plugin.tag / .rxdm.tag must equal these (tests/gcp/test_gib_and_upstream_pins.py);
# bump both together, from one commit. Whether the tags exist in us-docker.pkg.dev/gce-ai-infra only a
# registry shows (`crane ls us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev`); docs/a3.md, docs/a4.md.
GPU_DIRECT_UPSTREAM_PINS = {
    # 98c85a6 (README release "Jun 22, 2026") is newer than the snapshot `fetch` returns (992db81,
    # 2026-06-09, still v3.1.9 / v2.0.12); its files were read from the search index's copy.
    "tcpx": UpstreamInstallerPin(
        commit="98c85a6e581d7ec53329f9ab1de5f8626b637dbb", plugin="v3.1.12", rxdm="v2.0.15",
        manifests=("gpudirect-tcpx/nccl-tcpx-installer.yaml", "gpudirect-tcpx/nccl-test-latest.yaml",
                   "gpudirect-tcpx/README.md")),
    "tcpxo": UpstreamInstallerPin(
        commit="992db81257553607f1477945f1b3219632991829", plugin="v1.0.15", rxdm="v1.0.21",
        manifests=("gpudirect-tcpxo/nccl-tcpxo-installer.yaml", "gpudirect-tcpxo/nccl-test-latest.yaml")),
    "rdma": UpstreamInstallerPin(
        commit="992db81257553607f1477945f1b3219632991829", plugin="v1.1.1",
        manifests=("gpudirect-rdma/nccl-rdma-installer.yaml",)),
}
