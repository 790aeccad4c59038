"""The in-cluster side of storage: CSI drivers and the volumes a training pod mounts.

Checkpoints (/workspace/checkpoints): EFS CSI driver, static provisioning. The access point is
made by Pulumi (storage/file_system.py) with its POSIX user and root directory enforced; one
PersistentVolume names it (`fs-id::fsap-id`) and is reserved (claimRef) for the one PVC of the
training namespace. Why static, not dynamic (`provisioningMode: efs-ap`): the driver then needs
no right to create or delete access points, a PVC deletion can never take checkpoints with it
(reclaim Retain, no `deleteAccessPointRootDir`), and the reviewed plan shows exactly which
directory each workload gets. The StorageClass `efs-static` exists so the PV/PVC pair reads as
EFS and nothing else binds it; it has no provisioning parameters.
A team's namespace has only its claims from its team stack: its volumes, cluster-scoped, and its
access point are the platform's (workload/team_volumes.py), which a team's deploy role may not make.

With FSx for Lustre (`storage.lustre`, the environment's training namespace only) both volumes
come from the Lustre file system instead, through the FSx CSI driver, statically too. The
checkpoints volume is the file system's root, and every pod mounts only its `checkpoints`
directory (`subPath`, `checkpoints_sub_path` below): the linked datasets at /_datasets sit beside
that directory, outside anything a pod can write through its checkpoint mount. The kubelet creates
the directory on the first mount with the mode of the root, which on a fresh FSx for Lustre file
system is world-writable with the sticky bit, so the trainer's user makes its own job directories
in it. Datasets mount /_datasets (the linked datasets bucket) read-only: ReadWriteMany as the
driver requires, mounted `ro`. The driver needs no AWS
credentials for static volumes: the node plugin only mounts `<dnsname>@tcp:/<mountname>`.

Datasets (/workspace/data): the datasets bucket through the Mountpoint for Amazon S3 CSI driver,
read-only, with pod-level credentials (`authenticationSource: pod`): Mountpoint reads as the
trainer's own Pod Identity role, so the driver itself has no S3 access and a namespace without
that role cannot read the data. S3 stays the single copy of the data (no sync job into EFS, no
EFS per-GB read charges for multi-epoch reads of large datasets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common.eks_addons import managed_addon
from components.common.renames import renamed_from
from components.data import training_data
from components.data.file_system import TRAINER_GID, TRAINER_UID
from components.data.lustre import CHECKPOINTS_DIR, DATASETS_PATH
from components.identity.workload_roles import EFS_CSI_SERVICE_ACCOUNT

EFS_CSI_DRIVER = "efs.csi.aws.com"
S3_CSI_DRIVER = "s3.csi.aws.com"
EFS_STORAGE_CLASS = "efs-static"
EFS_CSI_ADDON = "aws-efs-csi-driver"
S3_CSI_ADDON = "aws-mountpoint-s3-csi-driver"
FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CSI_ADDON = "aws-fsx-csi-driver"
# POSIX locks work across nodes (the FSx CSI driver's static-provisioning example mounts with it).
LUSTRE_MOUNT_OPTIONS = ["flock"]
# Every volume is ReadWriteMany, the datasets too: the kubelet hands the CSI driver ReadOnlyMany as
# MULTI_NODE_READER_ONLY (kubernetes pkg/volume/csi/csi_client.go asCSIAccessModeV1), which neither
# the FSx nor the EFS driver supports (aws-fsx-csi-driver v1.9.0 pkg/driver/controller.go volumeCaps,
# node.go "Volume capability not supported"; aws-efs-csi-driver v3.4.1 pkg/driver/node.go
# volumeCapAccessModes: SINGLE_NODE_WRITER and MULTI_NODE_MULTI_WRITER only): such a volume never
# mounts. Read-only comes from the mount instead: the pod's `readOnly: true` (the FSx node plugin adds
# `ro` for it, node.go NodePublishVolume) and, on the PV itself, `ro` among the mount options, which
# the plugin passes to `mount -t lustre` as they are.
LUSTRE_READ_ONLY_MOUNT_OPTIONS = [*LUSTRE_MOUNT_OPTIONS, "ro"]
# Required by the PV/PVC API, ignored by both drivers (EFS and S3 are elastic).
NOMINAL_CAPACITY = "1Ti"


@dataclass(frozen=True)
class LustreVolume:
    """An FSx for Lustre file system as the CSI driver mounts it."""

    file_system_id: pulumi.Input[str]
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]


@dataclass(frozen=True)
class VolumeSources:
    """What a namespace's EFS checkpoints and S3 datasets volumes mount."""

    file_system_id: pulumi.Input[str]
    """The EFS file system of the checkpoint volume."""
    checkpoint_access_point_id: pulumi.Input[str]
    """The EFS access point the checkpoint volume mounts (the workload's own directory)."""
    datasets_bucket: pulumi.Input[str]
    """The S3 bucket the datasets volume mounts, read-only."""


@dataclass(frozen=True)
class StaticVolume:
    """One statically provisioned volume: its PersistentVolume's spec, less the claim it is reserved for."""

    volume: training_data.TrainingVolume
    storage_class: pulumi.Input[str]
    access_mode: str
    csi: k8s.core.v1.CSIPersistentVolumeSourceArgs | None
    """None: only its claim is made here (its sources are another stack's, which made the volume)."""
    mount_options: list[str] | None = None


def volume_name(volume: training_data.TrainingVolume, namespace: pulumi.Input[str]) -> pulumi.Output[str]:
    """The PersistentVolume of `volume` for `namespace` (cluster-scoped, so the namespace is in its name)."""
    return pulumi.Output.concat(volume.claim_name, "-", namespace)


def efs_checkpoints(sources: VolumeSources | None, storage_class: pulumi.Input[str] = EFS_STORAGE_CLASS) -> StaticVolume:
    return StaticVolume(
        training_data.CHECKPOINTS,
        storage_class=storage_class,
        access_mode="ReadWriteMany",
        csi=None if sources is None else k8s.core.v1.CSIPersistentVolumeSourceArgs(
            driver=EFS_CSI_DRIVER,
            volume_handle=pulumi.Output.concat(sources.file_system_id, "::", sources.checkpoint_access_point_id),
            volume_attributes={"encryptInTransit": "true"},  # TLS, as the file system policy demands
        ),
    )


def s3_datasets(sources: VolumeSources | None, *, namespace: pulumi.Input[str], region: str) -> StaticVolume:
    return StaticVolume(
        training_data.DATASETS,
        storage_class="",  # Mountpoint supports static provisioning only
        access_mode="ReadOnlyMany",
        mount_options=[
            "read-only",
            # Nodes allow IMDS to the node only (hop limit 1): Mountpoint pods cannot look the
            # region up there, so it is given.
            f"region {region}",
            f"uid={TRAINER_UID}",
            f"gid={TRAINER_GID}",
            "allow-other",
        ],
        csi=None if sources is None else k8s.core.v1.CSIPersistentVolumeSourceArgs(
            driver=S3_CSI_DRIVER,
            volume_handle=pulumi.Output.concat("s3-datasets-", namespace),  # unique per volume
            volume_attributes={
                "bucketName": sources.datasets_bucket,
                "authenticationSource": "pod",
                "stsRegion": region,
            },
        ),
    )


def _labels(volume: training_data.TrainingVolume) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": "gpu-training", "gpu-training/volume": volume.name}


def persistent_volume(resource_name: str, static: StaticVolume, *, namespace: pulumi.Input[str],
                      opts: pulumi.ResourceOptions) -> k8s.core.v1.PersistentVolume:
    """The volume, reserved (claimRef) for its one claim in `namespace`."""
    assert static.csi is not None, "a volume needs its sources"
    return k8s.core.v1.PersistentVolume(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name(static.volume, namespace), labels=_labels(static.volume)),
        spec=k8s.core.v1.PersistentVolumeSpecArgs(
            capacity={"storage": NOMINAL_CAPACITY},
            access_modes=[static.access_mode],
            persistent_volume_reclaim_policy="Retain",
            storage_class_name=static.storage_class,
            mount_options=static.mount_options,
            # Reserved for exactly one claim: no other PVC can bind this volume.
            claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=namespace, name=static.volume.claim_name),
            csi=static.csi,
        ),
        opts=opts,
    )


@dataclass(frozen=True)
class StorageMountsArgs:
    cluster_name: pulumi.Input[str]
    """The cluster the CSI drivers and their Pod Identity associations belong to."""
    namespace: pulumi.Input[str]
    """The training namespace that gets the checkpoint and dataset volume claims."""
    region: str
    """The datasets bucket's region, given to Mountpoint: its pods cannot look it up (IMDS hop limit 1)."""
    kubernetes_version: str
    """Picks the add-on builds pinned in eks_versions.ADDON_VERSIONS."""
    sources: VolumeSources | None
    """What the namespace's PersistentVolumes mount. None (team stacks): its platform made them from
    its registry of teams (workload/team_volumes.py), and only the claims are made here."""
    efs_csi_role_arn: pulumi.Input[str] | None = None
    """Given (platform stacks): install the CSI drivers and the storage class. Team stacks leave it
    out and only add their namespace's volumes."""
    addons_depend_on: Sequence[pulumi.Resource] = ()
    """E.g. the Pod Identity agent add-on: the EFS CSI association needs it."""
    lustre: LustreVolume | None = None
    """Given: checkpoints and datasets come from this FSx for Lustre file system."""

    @property
    def drivers(self) -> bool:
        return self.efs_csi_role_arn is not None


class StorageMounts(pulumi.ComponentResource):
    checkpoints_sub_path: str | None
    """What pods mount of the checkpoints volume: None, all of it (an EFS access point is already
    the workload's own directory); on Lustre, the checkpoints directory beside the datasets."""

    def __init__(self, name: str, args: StorageMountsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:StorageMounts", name, None,
                         renamed_from("gpu-training:storage:StorageMounts", opts))
        self._name, self._args = name, args
        self.checkpoints_sub_path = CHECKPOINTS_DIR if args.lustre is not None else None
        if args.efs_csi_role_arn is not None:
            self._create_addons(args.efs_csi_role_arn)
        efs_storage_class = self._efs_storage_class()
        if args.lustre is not None:
            self._create_lustre_volumes(args.lustre)
        else:
            self._static_pair(efs_checkpoints(args.sources, efs_storage_class))
            self._static_pair(s3_datasets(args.sources, namespace=args.namespace, region=args.region))
        self.register_outputs({})

    def _addon(self, addon_name: str, **extra) -> aws.eks.Addon:
        return managed_addon(f"{self._name}-{addon_name}", cluster_name=self._args.cluster_name, addon_name=addon_name,
                             kubernetes_version=self._args.kubernetes_version,
                             opts=pulumi.ResourceOptions(parent=self, depends_on=list(self._args.addons_depend_on)),
                             **extra)

    def _create_addons(self, efs_csi_role_arn: pulumi.Input[str]) -> None:
        self._addon(EFS_CSI_ADDON, pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
            role_arn=efs_csi_role_arn, service_account=EFS_CSI_SERVICE_ACCOUNT)])
        # No driver-level credentials: every S3 volume here uses the mounting pod's own identity.
        self._addon(S3_CSI_ADDON)
        if self._args.lustre is not None:
            # Static volumes only: the driver makes no FSx API call, so it gets no role.
            self._addon(FSX_CSI_ADDON)

    def _static_pair(self, static: StaticVolume) -> None:
        """The volume (unless another stack made it: no `csi`) and its claim."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        resource_name = f"{self._name}-{static.volume.name}"
        name = volume_name(static.volume, args.namespace)
        if static.csi is not None:
            name = persistent_volume(resource_name, static, namespace=args.namespace, opts=child).metadata.name
        k8s.core.v1.PersistentVolumeClaim(
            resource_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=static.volume.claim_name, namespace=args.namespace,
                                                labels=_labels(static.volume)),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=[static.access_mode],
                storage_class_name=static.storage_class,
                volume_name=name,
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": NOMINAL_CAPACITY}),
            ),
            opts=child,
        )

    def _efs_storage_class(self) -> pulumi.Input[str]:
        """The `efs-static` class (created once, by the platform stack: team stacks use it too)."""
        if not self._args.drivers:
            return EFS_STORAGE_CLASS
        return k8s.storage.v1.StorageClass(
            f"{self._name}-efs",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=EFS_STORAGE_CLASS),
            provisioner=EFS_CSI_DRIVER,
            reclaim_policy="Retain",
            volume_binding_mode="Immediate",
            opts=pulumi.ResourceOptions(parent=self),
        ).metadata.name

    def _create_lustre_volumes(self, lustre: LustreVolume) -> None:
        for volume, mount_name, mount_options in (
            (training_data.CHECKPOINTS, lustre.mount_name, LUSTRE_MOUNT_OPTIONS),
            (training_data.DATASETS, pulumi.Output.concat(lustre.mount_name, DATASETS_PATH),
             LUSTRE_READ_ONLY_MOUNT_OPTIONS),
        ):
            self._static_pair(StaticVolume(
                volume,
                storage_class="",  # static only: nothing provisions or binds it but its claim
                access_mode="ReadWriteMany",  # the only multi-node mode the FSx driver supports (above)
                mount_options=mount_options,
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=FSX_CSI_DRIVER,
                    # Unique per volume: the kubelet tells volumes apart by driver and handle.
                    volume_handle=pulumi.Output.concat(lustre.file_system_id, "::", volume.name),
                    volume_attributes={"dnsname": lustre.dns_name, "mountname": mount_name},
                ),
            ))
