"""FSx for Lustre for the checkpoints and datasets of large jobs (`storage.lustre`).

- PERSISTENT_2 SSD: the file servers are highly available and the data has a second copy
  within the zone; throughput is provisioned per TiB, so a checkpoint's flush time is known in
  advance (config/training.py checks grace periods against it).
- Encrypted with the environment's own key (alias <prefix>-lustre); metadata performance scales
  with the file system (AUTOMATIC).
- One subnet (FSx for Lustre lives in one zone): the private subnet of `availabilityZone`,
  which should be the GPU pool's, so checkpoint traffic never crosses zones.
- The datasets bucket is linked at /_datasets (data repository association): objects appear as
  files, their contents load on first read, and new, changed and deleted objects follow
  automatically. Nothing is exported back: datasets are read-only here.
- Checkpoints live in /checkpoints, beside it: the pods mount the checkpoint volume (the root)
  with `subPath: checkpoints` (data/mounts.py), so no trainer can reach /_datasets through its
  writable mount.
- Guarded by the Lustre security group (LNET from nodes only, network/security_groups.py).

FSx takes no backups of a file system linked to S3 (FSx for Lustre User Guide, "Using data
repositories"); checkpoints that must outlive the file system belong in the artifacts bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common.kms import customer_key
from components.common.renames import renamed_from
from components.config.storage import LustreConfig
from components.facts.file_systems import LUSTRE_VERSION

# Not a DNS label, so not a job's name; and outside CHECKPOINTS_DIR, so outside everything a pod
# that mounts the checkpoint volume sees.
DATASETS_PATH = "/_datasets"
# The one directory of the file system the training pods and the checkpoint cleanup see (as
# /workspace/checkpoints). The kubelet makes it, with the root's mode, when the first pod mounts it.
CHECKPOINTS_DIR = "checkpoints"
# New, changed and deleted objects of the datasets bucket show up on the file system by themselves.
AUTO_IMPORT_EVENTS = ["NEW", "CHANGED", "DELETED"]


@dataclass(frozen=True)
class LustreFileSystemArgs:
    config: LustreConfig
    """Deployment type, capacity, throughput per TiB and zone of the file system."""
    name_prefix: str
    """Names the file system and its key alias."""
    account_id: pulumi.Input[str]
    """The account the file system's key trusts."""
    subnet_id: pulumi.Input[str]
    """The private subnet of config.availability_zone."""
    security_group_id: pulumi.Input[str]
    """The security group of the file system (Lustre from the nodes)."""
    datasets_bucket: pulumi.Input[str]
    """The bucket the data repository association links the file system to."""
    checkpoints_bucket: pulumi.Input[str] | None = None
    """multiKueue: the artifacts bucket whose checkpoints/ the checkpoint directory is linked to,
    both ways, so checkpoints replicate to the other regions (data/replication.py)."""


class LustreFileSystem(pulumi.ComponentResource):
    key: aws.kms.Key
    file_system: aws.fsx.LustreFileSystem
    datasets: aws.fsx.DataRepositoryAssociation

    def __init__(self, name: str, args: LustreFileSystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:LustreFileSystem", name, None,
                         renamed_from("gpu-training:storage:LustreFileSystem", opts))
        child = pulumi.ResourceOptions(parent=self)
        config = args.config
        self.key = customer_key(f"{name}-key", alias=f"{args.name_prefix}-lustre",
                                description=f"{args.name_prefix}: FSx for Lustre checkpoints and datasets",
                                account_id=args.account_id, parent=self)
        self.file_system = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type=config.deployment_type,
            storage_type="SSD",
            storage_capacity=config.storage_capacity_gib,
            per_unit_storage_throughput=config.throughput_per_tib,
            file_system_type_version=LUSTRE_VERSION,
            metadata_configuration=aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC"),
            kms_key_id=self.key.arn,
            # pulumi-aws 7.x types it as one string: a Lustre file system lives in one subnet.
            subnet_ids=args.subnet_id,
            security_group_ids=[args.security_group_id],
            tags={"Name": f"{args.name_prefix}-lustre"},
            opts=child,
        )
        self.datasets = aws.fsx.DataRepositoryAssociation(
            f"{name}-datasets",
            file_system_id=self.file_system.id,
            file_system_path=DATASETS_PATH,
            data_repository_path=pulumi.Output.concat("s3://", args.datasets_bucket, "/"),
            # Import the listing once at creation; afterwards the events below keep it current.
            batch_import_meta_data_on_create=True,
            delete_data_in_filesystem=False,
            s3=aws.fsx.DataRepositoryAssociationS3Args(
                auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=AUTO_IMPORT_EVENTS)),
            tags={"Name": f"{args.name_prefix}-lustre-datasets"},
            opts=child,
        )
        if args.checkpoints_bucket is not None:
            # Exported as each file is closed, deletions too (a pruned checkpoint goes everywhere);
            # imported as replicas arrive from the other regions.
            aws.fsx.DataRepositoryAssociation(
                f"{name}-checkpoints",
                file_system_id=self.file_system.id,
                file_system_path=f"/{CHECKPOINTS_DIR}",
                data_repository_path=pulumi.Output.concat("s3://", args.checkpoints_bucket, f"/{CHECKPOINTS_DIR}/"),
                batch_import_meta_data_on_create=True,
                delete_data_in_filesystem=False,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=AUTO_IMPORT_EVENTS),
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=AUTO_IMPORT_EVENTS)),
                tags={"Name": f"{args.name_prefix}-lustre-checkpoints"},
                opts=child,
            )
        self.register_outputs({"fileSystemId": self.file_system.id, "mountName": self.file_system.mount_name})
