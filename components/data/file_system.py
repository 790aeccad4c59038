"""EFS for shared checkpoints: every rank of a multi-node job writes to and resumes from one tree.

- Encrypted with the environment's own key (FSBP EFS.1/EFS.8); TLS-only file system policy; no
  client may act as root.
- Elastic throughput: checkpoint writes are bursts (all ranks at once, then quiet), which
  elastic absorbs without provisioning for the peak or draining burst credits.
- One mount target per private subnet (never a public one, EFS.6), guarded by the EFS security
  group (NFS from nodes only).
- One access point per workload that enforces POSIX user 1000:1000 (the trainer image's user)
  and a root directory of its own (EFS.3/EFS.4): a workload sees only its tree.
- Daily AWS Backup of the file system where `storage.efsBackups` is on (prod, enforced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common.kms import customer_key
from components.common.renames import renamed_from
from components.data import training_data
from components.identity import policies

# The trainer image runs as 1000:1000 (trainer/Dockerfile); files on EFS are written as that user.
# The same constants as the training pods' runAsUser/runAsGroup, so the two cannot drift apart.
TRAINER_UID = training_data.RUN_AS_USER
TRAINER_GID = training_data.RUN_AS_GROUP
# Files unread for a week move to Infrequent Access ($0.016 instead of $0.30 per GB-month,
# docs/cost.md) and come back on first read. A running job writes a checkpoint every hour or
# so and keeps the last few, so what ages past a week belongs to a job that waits or has finished:
# it stays cheap until the nightly cleanup removes it (storage.checkpointCleanup.afterDays). A
# resume from such a checkpoint pays the IA read charge once ($0.01/GB).
TRANSITION_TO_IA = "AFTER_7_DAYS"


def access_point_root(workload: str) -> str:
    return f"/workloads/{workload}"


def access_point(resource_name: str, *, file_system_id: pulumi.Input[str], workload: str, name_prefix: str,
                 opts: pulumi.ResourceOptions) -> aws.efs.AccessPoint:
    """One workload's view of the file system: its own root directory, always as the trainer's user."""
    return aws.efs.AccessPoint(
        resource_name,
        file_system_id=file_system_id,
        posix_user=aws.efs.AccessPointPosixUserArgs(uid=TRAINER_UID, gid=TRAINER_GID),
        root_directory=aws.efs.AccessPointRootDirectoryArgs(
            path=access_point_root(workload),
            # EFS creates the directory on first mount, owned by the workload's user, closed to others.
            creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                owner_uid=TRAINER_UID, owner_gid=TRAINER_GID, permissions="0750"),
        ),
        tags={"Name": f"{name_prefix}-{workload}", "workload": workload},
        opts=opts,
    )


@dataclass(frozen=True)
class CheckpointFileSystemArgs:
    name_prefix: str
    """Names the file system, its key alias and its access points."""
    account_id: pulumi.Input[str]
    """The account the file system's key trusts."""
    private_subnet_ids: Mapping[str, pulumi.Input[str]]
    """Availability zone -> private subnet id; one mount target each."""
    security_group_id: pulumi.Input[str]
    """The security group of the mount targets (NFS from the nodes)."""
    workloads: tuple[str, ...]
    """One access point (and root directory) per workload, e.g. ("training",)."""
    backups: bool
    """Turns on AWS Backup's daily backups of the file system."""


class CheckpointFileSystem(pulumi.ComponentResource):
    key: aws.kms.Key
    file_system: aws.efs.FileSystem
    access_points: dict[str, aws.efs.AccessPoint]
    mount_targets: list[aws.efs.MountTarget]

    def __init__(self, name: str, args: CheckpointFileSystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:CheckpointFileSystem", name, None,
                         renamed_from("gpu-training:storage:CheckpointFileSystem", opts))
        child = pulumi.ResourceOptions(parent=self)
        self.key = customer_key(f"{name}-key", alias=f"{args.name_prefix}-checkpoints-efs",
                                description=f"{args.name_prefix}: EFS checkpoints", account_id=args.account_id,
                                parent=self)
        self.file_system = aws.efs.FileSystem(
            f"{name}-fs",
            creation_token=f"{args.name_prefix}-checkpoints",
            encrypted=True,
            kms_key_id=self.key.arn,
            performance_mode="generalPurpose",  # elastic throughput requires it
            throughput_mode="elastic",
            lifecycle_policies=[
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_ia=TRANSITION_TO_IA),
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_primary_storage_class="AFTER_1_ACCESS"),
            ],
            tags={"Name": f"{args.name_prefix}-checkpoints"},
            opts=child,
        )
        aws.efs.BackupPolicy(
            f"{name}-backup", file_system_id=self.file_system.id,
            backup_policy=aws.efs.BackupPolicyBackupPolicyArgs(status="ENABLED" if args.backups else "DISABLED"),
            opts=child)
        aws.efs.FileSystemPolicy(
            f"{name}-policy", file_system_id=self.file_system.id,
            policy=self.file_system.arn.apply(policies.file_system_policy), opts=child)
        self.mount_targets = [
            aws.efs.MountTarget(f"{name}-mount-{zone}", file_system_id=self.file_system.id, subnet_id=subnet_id,
                                security_groups=[args.security_group_id], opts=child)
            for zone, subnet_id in args.private_subnet_ids.items()
        ]
        self.access_points = {workload: access_point(f"{name}-ap-{workload}", file_system_id=self.file_system.id,
                                                     workload=workload, name_prefix=args.name_prefix, opts=child)
                              for workload in args.workloads}

        self.register_outputs({"fileSystemId": self.file_system.id})
