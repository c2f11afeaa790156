"""A PersistentVolume made in advance for one claim (static provisioning), on any cloud's CSI driver.

Pulumi owns the volume and what backs it, so `pulumi destroy` removes them in order (the platform's
claim, this volume, then the cloud's share) and no driver has to clean up behind it. The reclaim
policy is Retain: deleting the claim never deletes the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from trainstack.infra.core.contracts import SharedStorage


def static_volume(name: str, *, claim_namespace: str, claim_name: str, capacity: str, driver: str,
                  volume_handle: pulumi.Input[str], volume_attributes: Mapping[str, pulumi.Input[str]] | None = None,
                  mount_options: Sequence[str] | None = None, ready: Sequence[pulumi.Resource] = (),
                  opts: pulumi.ResourceOptions) -> tuple[k8s.core.v1.PersistentVolume, SharedStorage]:
    """The volume, reserved for `claim_namespace/claim_name`, and the SharedStorage handle for that claim
    (which then waits for the volume and for `ready`)."""
    volume = k8s.core.v1.PersistentVolume(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{claim_namespace}-{claim_name}"),
        spec=k8s.core.v1.PersistentVolumeSpecArgs(
            capacity={"storage": capacity},
            access_modes=["ReadWriteMany"],
            persistent_volume_reclaim_policy="Retain",
            storage_class_name="",  # static: no provisioner may bind something else to the claim
            claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=claim_namespace, name=claim_name),
            mount_options=list(mount_options) if mount_options else None,
            csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(driver=driver, volume_handle=volume_handle,
                                                          volume_attributes=volume_attributes),
        ),
        opts=opts,
    )
    storage = SharedStorage(storage_class_name="", size=capacity, volume_name=volume.metadata.name,
                            ready=[volume, *ready])
    return volume, storage
