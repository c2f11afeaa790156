"""GPUDirect inside the cluster: the GPU VPCs as GKE networks, the NCCL plugin installer and the device injector.

- One `GKENetworkParamSet` + `Network` (device mode) per GPU VPC, named vpc1..vpcN: the names the
  training chart's `gpuNetworking.<mode>.networks` puts in each pod's interface annotation.
- The NCCL TCPX/TCPXO plugin installer DaemonSet on the A3 nodes (copies NCCL and the plugin to
  /home/kubernetes/bin/nvidia/lib64, which the chart mounts); its version is the chart's pin.
- The NRI device injector DaemonSet, which honours the chart's `devices.gke.io/container.*`
  annotation (the RxDM sidecar gets the GPU devices without being privileged).
- On TCPX (A3 High) nodes, upstream's optmem_max tuning DaemonSet.
- RDMA (A3 Ultra, A4): one `GKENetworkParamSet` + `Network` per extra gVNIC (gvnic-1.., NetDevice) and
  per RDMA NIC subnet (rdma-0..rdma-7, deviceMode RDMA), cluster-toolkit v1.95.0's names
  (modules/scheduler/gke-cluster k8s_network_names); the gIB installer DaemonSet; no injector or
  optmem tuning (no RxDM).
All of it on the cluster's provider, created after the cluster; the job waits for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.core import versions
from trainstack.infra.core.resource_options import child_options
from trainstack.infra.gcp.machine_types import GpuDirectProfile
from trainstack.infra.kubernetes.training_job import chart_default_values

NETWORKING_API = "networking.gke.io/v1"
SYSTEM_NAMESPACE = "kube-system"


def gke_network_names(count: int, mode: str = "tcpx") -> list[str]:
    """The chart's default `gpuNetworking.<mode>.networks`, in NIC order: vpc1..vpcN (TCPX/TCPXO) or
    rdma-0..rdma-<N-1> (RDMA)."""
    return [f"rdma-{index}" for index in range(count)] if mode == "rdma" else [
        f"vpc{index}" for index in range(1, count + 1)]


def gvnic_network_names(count: int) -> list[str]:
    """gvnic-1..gvnic-N: the extra gVNICs' GKE networks (cluster-toolkit's gvnic_start_index 1)."""
    return [f"gvnic-{index}" for index in range(1, count + 1)]


def plugin_image(mode: str) -> str:
    plugin = chart_default_values()["gpuNetworking"][mode]["plugin"]
    return f"{plugin['repository']}:{plugin['tag']}"


def _affinity(accelerator_label: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "In",
                               "values": [accelerator_label]}]}]}}}


def installer_spec(profile: GpuDirectProfile, accelerator: str) -> dict[str, Any]:
    """The installer DaemonSet's pod spec (container-engine-accelerators gpudirect-tcpx(o)/nccl-*-installer.yaml)."""
    mode = profile.mode
    install = [
        "set -ex",
        "chmod 755 /scripts/container_entry.sh",
        "/scripts/container_entry.sh install --install-nccl",
        "mkdir -p /usr/local/nvidia/lib64",
        f"cp -r /var/lib/{mode}/lib64/. /usr/local/nvidia/lib64",
        'echo "installation finishes"',
    ]
    init_containers = [{
        "name": f"nccl-{mode}-installer",
        "image": plugin_image(mode),
        "command": ["/bin/sh", "-c"],
        "args": ["\n".join(install) + "\n"],
        "resources": {"requests": {"cpu": "150m"}},
        "securityContext": {"privileged": True},  # writes the host's library directory
        "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"},
                         {"name": "library-dir-host", "mountPath": "/usr/local"}],
    }]
    if mode == "tcpxo":
        # Bind-mounts the NICs' aperture devices for the plugin and loads the import-helper module.
        preinstall = "\n".join([
            "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper",
            "mkdir -p /dev/aperture_devices",
            "while IFS= read -r line; do",
            "  BDF=$( echo \"$line\" | awk '{print $1}' );",
            "  target_aperture_path=\"/dev/aperture_devices/$BDF\"",
            "  host_aperture_device=$(readlink -f \"/sys/bus/pci/devices/$BDF\");",
            "  mkdir -p $target_aperture_path;",
            "  umount -R $target_aperture_path;",
            "  mount --bind $host_aperture_device $target_aperture_path;",
            "done < <(lspci -nn -D | grep '1ae0:0084')",
            "if [ -d /dev/aperture_devices ]; then",
            "  chmod -R a+r /dev/aperture_devices/",
            "  chmod a+rw /dev/aperture_devices/*/resource*",
            "fi",
        ])
        init_containers.insert(0, {
            "name": "pre-installation",
            "image": versions.TCPXO_PREINSTALL_IMAGE,
            "command": ["nsenter", "-at", "1", "--", "bash", "-c", preinstall + "\n"],
            "securityContext": {"privileged": True},
        })
    return _node_installer(accelerator, [{"name": "var-lib", "hostPath": {"path": "/var/lib"}},
                                         {"name": "library-dir-host", "hostPath": {"path": "/home/kubernetes/bin"}}],
                           init_containers)


def rdma_installer_spec(accelerator: str) -> dict[str, Any]:
    """The gIB installer DaemonSet's pod spec: container-engine-accelerators gpudirect-rdma/nccl-rdma-installer.yaml
    at 992db81 (2026-06-09). It installs without --install-nccl (upstream dropped it in 2da1c92, 2026-05-06):
    with it, gIB's modified libnccl.so.2 lands in the node's /home/kubernetes/bin/nvidia/lib64, which
    the GPU device plugin mounts into every GPU container as /usr/local/nvidia/lib64, so any other GPU
    workload there would pick it up. It copies gIB's plugin libraries to that directory and its
    libraries, scripts and tuner configurations to /home/kubernetes/bin/gib (the chart mounts it as
    /usr/local/gib, where NCCL_NET_PLUGIN points). Upstream's disable-log-martian init container (an
    unpinned alpine that only quiets kernel logging) is left out."""
    install = [
        "set -ex",
        "/scripts/container_entry.sh install",
        "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64",
        "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib",
        'echo "installation finishes"',
    ]
    return _node_installer(accelerator, [
        {"name": "library-dir-host",
         "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64", "type": "DirectoryOrCreate"}},
        {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}},
    ], [{
        "name": "nccl-rdma-installer",
        "image": plugin_image("rdma"),
        "command": ["/bin/sh", "-c"],
        "args": ["\n".join(install) + "\n"],
        "resources": {"requests": {"cpu": "150m"}},
        "securityContext": {"privileged": True},  # writes the host's library directories
        "volumeMounts": [{"name": "library-dir-host", "mountPath": "/usr/local/home/kubernetes/bin/nvidia/lib64"},
                         {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"}],
    }])


def _node_installer(accelerator: str, volumes: list[dict[str, Any]],
                    init_containers: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod on every GPU node of the machine that installs onto the host in init containers, then idles."""
    return {
        "priorityClassName": "system-node-critical",
        "affinity": _affinity(accelerator),
        "tolerations": [{"operator": "Exists"}],
        "hostNetwork": True,
        "hostPID": True,
        "volumes": volumes,
        "initContainers": init_containers,
        "containers": [{"name": "pause", "image": versions.PAUSE_IMAGE}],
    }


# The socket option memory the TCPX plugin needs per connection: upstream's value
# (container-engine-accelerators gpudirect-tcpx/optmem-max-ds.yaml); the node default is 20480.
TCPX_OPTMEM_MAX = 131072


def optmem_max_spec(accelerator: str) -> dict[str, Any]:
    """container-engine-accelerators gpudirect-tcpx/optmem-max-ds.yaml: raise net.core.optmem_max on A3 High
    nodes once (an init container), then idle.

    What it reaches: it writes the host's network namespace (hostNetwork), where RxDM-less host
    processes and hostNetwork pods live. The trainer and its RxDM sidecar have their own pod
    namespace. On kernels where optmem_max is still one global value that is the same setting; on
    kernels where it is per namespace, every new namespace starts at 128 KiB = TCPX_OPTMEM_MAX
    (linux net/core/net_namespace.c preinit_net_sysctl), so pods get upstream's value either way.
    Only an A3 node shows which case applies (`cat /proc/sys/net/core/optmem_max` in a trainer pod)."""
    return {
        "affinity": _affinity(accelerator),
        "hostNetwork": True,
        "tolerations": [{"operator": "Exists"}],
        "initContainers": [{
            "name": "optmem-max",
            "image": versions.OPTMEM_MAX_IMAGE,
            "command": ["/bin/bash", "-c",
                        f"set -x; cat /proc/sys/net/core/optmem_max; echo {TCPX_OPTMEM_MAX} > /proc/sys/net/core/optmem_max"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            "securityContext": {"privileged": True},  # writes the node's /proc/sys
        }],
        "containers": [{
            "name": "pause",
            "image": versions.PAUSE_IMAGE,
            "securityContext": {"runAsUser": 2023, "runAsGroup": 2023, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
                                "readOnlyRootFilesystem": True},
        }],
    }


def device_injector_spec() -> dict[str, Any]:
    """container-engine-accelerators nri_device_injector/nri-device-injector.yaml, pinned by digest."""
    return {
        "priorityClassName": "system-node-critical",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cloud.google.com/gke-gpu", "operator": "Exists"}]}]}}},
        "tolerations": [{"operator": "Exists"}],
        "hostNetwork": True,
        "hostPID": True,
        "containers": [{
            "name": "device-injector",
            "image": versions.NRI_DEVICE_INJECTOR_IMAGE,
            "resources": {"requests": {"cpu": "150m"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}],
        }],
        "volumes": [{"name": "nri", "hostPath": {"path": "/var/run/nri"}}, {"name": "dev", "hostPath": {"path": "/dev"}}],
    }


@dataclass(frozen=True, kw_only=True)
class GpuDirectArgs:
    provider: k8s.Provider
    profile: GpuDirectProfile
    accelerator: str  # the pool's accelerator label (nvidia-h100-80gb, nvidia-h100-mega-80gb)
    vpc_names: Sequence[pulumi.Input[str]]  # the GPU VPCs (RDMA: the one RDMA VPC, per NIC) and subnets, in NIC order
    subnet_names: Sequence[pulumi.Input[str]]
    # RDMA machines' extra gVNICs: their VPCs and subnets, in NIC order.
    gvnic_vpc_names: Sequence[pulumi.Input[str]] = ()
    gvnic_subnet_names: Sequence[pulumi.Input[str]] = ()


class GpuDirect(pulumi.ComponentResource):
    network_names: list[str]  # for the chart's gpuNetworking.<mode>.networks
    ready: list[pulumi.Resource]  # what a job using GPUDirect must wait for

    def __init__(self, name: str, args: GpuDirectArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainstack:gcp:GpuDirect", name, None, opts)
        child = child_options(self, args.provider, opts)
        mode = args.profile.mode
        self.network_names = gke_network_names(len(args.vpc_names), mode)
        self.ready = []
        networks = [*((network, vpc, subnet, "NetDevice") for network, vpc, subnet in zip(
                        gvnic_network_names(len(args.gvnic_vpc_names)), args.gvnic_vpc_names, args.gvnic_subnet_names,
                        strict=True)),
                    *((network, vpc, subnet, args.profile.device_mode) for network, vpc, subnet in zip(
                        self.network_names, args.vpc_names, args.subnet_names, strict=True))]
        for network_name, vpc, subnet, device_mode in networks:
            params = k8s.apiextensions.CustomResource(
                f"{name}-{network_name}-params", api_version=NETWORKING_API, kind="GKENetworkParamSet",
                metadata={"name": network_name},
                spec={"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode}, opts=child)
            self.ready.append(k8s.apiextensions.CustomResource(
                f"{name}-{network_name}", api_version=NETWORKING_API, kind="Network",
                metadata={"name": network_name},
                spec={"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                          "name": network_name}},
                opts=child_options(self, args.provider, opts, depends_on=[params])))
        if mode == "rdma":  # no RxDM: nothing to inject devices into
            daemon_sets = [("nccl-rdma-installer", rdma_installer_spec(args.accelerator))]
        else:
            daemon_sets = [(f"nccl-{mode}-installer", installer_spec(args.profile, args.accelerator)),
                           ("device-injector", device_injector_spec())]
        if mode == "tcpx":  # upstream tunes A3 High (TCPX) nodes only
            daemon_sets.append(("optmem-max", optmem_max_spec(args.accelerator)))
        for component, spec in daemon_sets:
            labels = {"k8s-app": component}
            self.ready.append(k8s.apps.v1.DaemonSet(
                f"{name}-{component}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=component, namespace=SYSTEM_NAMESPACE, labels=labels),
                spec={"selector": {"matchLabels": labels}, "updateStrategy": {"type": "RollingUpdate"},
                      "template": {"metadata": {"labels": labels}, "spec": spec}},
                opts=child))
        self.register_outputs({"networkNames": self.network_names})
