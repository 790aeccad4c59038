"""Data that follows a job across an environment's regions: S3 Cross-Region Replication.

- Datasets: the manager's datasets bucket is replicated whole to each worker's, whose FSx for
  Lustre imports new and changed objects on its own (lustre.py's auto-import), so a dataset put
  in the manager's region appears under /workspace/data in every region.
- Checkpoints: on a stack with Lustre and multiKueue, the Lustre directory the pods mount as
  /workspace/checkpoints is linked to `checkpoints/` of the region's artifacts bucket (export and
  import), and that prefix is replicated to every other cluster of the environment (manager ->
  each worker, each worker -> the manager and each fellow worker). A job that MultiKueue starts
  again in another region finds its checkpoints where it left them; the launcher's checkpoint
  verification skips a checkpoint whose files have not all arrived (S3 replicates objects in no
  guaranteed order) and resumes from the newest complete one.

Each region keeps its Lustre linked to a bucket of its own region: AWS's DRA pages
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html) do not
promise a link to a bucket in another Region, and a same-region link pays no transfer for each
lazy load. Replication needs versioning on both buckets (every bucket here has it) and an IAM role
S3 assumes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html);
SSE-KMS objects are re-encrypted under the destination's data key (`replicaKmsKeyId`, which takes
a key or alias ARN: https://docs.aws.amazon.com/AmazonS3/latest/API/API_EncryptionConfiguration.html).
Replicas are not replicated again: S3 leaves out objects that are replicas made by another
replication rule (S3 User Guide, "What does Amazon S3 replicate?",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-what-is-isnot-replicated.html),
so a worker replicates its checkpoints to each fellow worker itself, one rule each.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.config.multikueue import stack_name_prefix
from components.config.storage import bucket_name

CHECKPOINTS_PREFIX = "checkpoints/"


@dataclass(frozen=True)
class Destination:
    stack: str
    region: str
    purpose: str
    """datasets or artifacts: the bucket of that stack it goes to."""
    prefix: str
    """What of the source is replicated ("" for all of it)."""


def destination_bucket(project: str, destination: Destination, account_id: str) -> str:
    return bucket_name(project, stack_name_prefix(project, destination.stack).removeprefix(f"{project}-"),
                       destination.purpose, account_id)


def destination_key_alias(project: str, destination: Destination, *, partition: str, account_id: str) -> str:
    return f"arn:{partition}:kms:{destination.region}:{account_id}:alias/{stack_name_prefix(project, destination.stack)}-data"


def replication_policy(*, partition: str, account_id: str, region: str, source_buckets: Sequence[str], source_key_arn: str,
                       project: str, destinations: Sequence[Destination]) -> str:
    """What S3 needs as the replication role (the S3 User Guide's permissions page): read the source
    versions, write replicas, decrypt under the source key, encrypt under each destination's key."""
    targets = sorted({destination_bucket(project, d, account_id) for d in destinations})
    aliases = sorted({f"alias/{stack_name_prefix(project, d.stack)}-data" for d in destinations})
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadSource", "Effect": "Allow",
         "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
         "Resource": [f"arn:{partition}:s3:::{b}" for b in source_buckets]},
        {"Sid": "ReadSourceVersions", "Effect": "Allow",
         "Action": ["s3:GetObjectVersionForReplication", "s3:GetObjectVersionAcl", "s3:GetObjectVersionTagging"],
         "Resource": [f"arn:{partition}:s3:::{b}/*" for b in source_buckets]},
        {"Sid": "WriteReplicas", "Effect": "Allow",
         "Action": ["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
         "Resource": [f"arn:{partition}:s3:::{b}/*" for b in targets]},
        {"Sid": "DecryptSource", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": source_key_arn,
         "Condition": {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}},
        {"Sid": "EncryptReplicas", "Effect": "Allow", "Action": ["kms:Encrypt", "kms:GenerateDataKey"],
         "Resource": f"arn:{partition}:kms:*:{account_id}:key/*",
         "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": aliases}}},
    ]})


@dataclass(frozen=True)
class CrossRegionReplicationArgs:
    project: str
    """The Pulumi project: the destination stacks' bucket names and key aliases start with it."""
    name_prefix: str
    """This stack's resource name prefix (the replication role's name)."""
    partition: str
    """The region's ARN partition (aws, aws-us-gov, ...)."""
    region: str
    """This stack's region: the source buckets' and their key's."""
    account_id: pulumi.Output[str]
    """The account every bucket of the environment is in (the destinations' names carry it)."""
    sources: dict[str, pulumi.Input[str]]
    """purpose (datasets, artifacts) -> this stack's bucket of that purpose."""
    source_key_arn: pulumi.Input[str]
    """The KMS key the source objects are encrypted with (the role decrypts under it)."""
    destinations: Sequence[Destination]
    """Where each source's objects are replicated: the other stacks' buckets, one rule each."""
    depends_on: Sequence[pulumi.Resource]
    """The source buckets' versioning (replication refuses an unversioned source)."""


class CrossRegionReplication(pulumi.ComponentResource):
    def __init__(self, name: str, args: CrossRegionReplicationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:CrossRegionReplication", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        trust = args.account_id.apply(lambda account: json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sts:AssumeRole",
            # Only S3 acting for this account's buckets (confused-deputy guard).
            "Condition": {"StringEquals": {"aws:SourceAccount": account}}}]}))
        role = aws.iam.Role(f"{name}-role", name=f"{args.name_prefix}-s3-replication", assume_role_policy=trust,
                            tags={"workload": "s3-replication"}, opts=child)
        sources = pulumi.Output.all(*args.sources.values())
        policy = aws.iam.RolePolicy(f"{name}-access", role=role.id, opts=child, policy=pulumi.Output.all(
            args.account_id, sources, args.source_key_arn).apply(lambda v: replication_policy(
                partition=args.partition, account_id=v[0], region=args.region, source_buckets=v[1], source_key_arn=v[2],
                project=args.project, destinations=args.destinations)))
        for purpose, bucket in args.sources.items():
            mine = [d for d in args.destinations if d.purpose == purpose]
            if not mine:
                continue
            aws.s3.BucketReplicationConfig(
                f"{name}-{purpose}", bucket=bucket, role=role.arn,
                rules=args.account_id.apply(lambda account, mine=mine: list[aws.s3.BucketReplicationConfigRuleArgsDict](
                    _rule(args, d, account, i) for i, d in enumerate(mine, 1))),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, policy]))
        self.register_outputs({})


def _rule(args: CrossRegionReplicationArgs, destination: Destination, account: str,
          priority: int) -> aws.s3.BucketReplicationConfigRuleArgsDict:
    return {
        "id": f"to-{destination.stack}-{destination.purpose}", "status": "Enabled", "priority": priority,
        "filter": {"prefix": destination.prefix},
        # Deletes follow (a pruned checkpoint is gone everywhere); only with a filter (V2 schema).
        "delete_marker_replication": {"status": "Enabled"},
        "source_selection_criteria": {"sse_kms_encrypted_objects": {"status": "Enabled"}},
        "destination": {
            "bucket": f"arn:{args.partition}:s3:::{destination_bucket(args.project, destination, account)}",
            "encryption_configuration": {"replica_kms_key_id": destination_key_alias(
                args.project, destination, partition=args.partition, account_id=account)},
        },
    }
