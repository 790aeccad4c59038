"""S3 server access logs of the environment's buckets (FSBP S3.9, checkov CKV_AWS_18).

Who read or changed which dataset or checkpoint, with the caller's identity: the audit trail of
the data (CloudTrail logs S3 object calls only as paid data events). S3 delivers the logs, best
effort, into a separate bucket that must differ from the data buckets in three ways
(S3 user guide, "Enabling Amazon S3 server access logging"):
- default encryption SSE-S3: log delivery cannot write into an SSE-KMS bucket, which every data
  bucket is (checkov CKV_AWS_145 stays unmet here, deliberately);
- no access logging of its own (logging the log bucket would log its own deliveries);
- ACLs off (BucketOwnerEnforced), so the logging service is admitted by bucket policy only, for
  our source buckets and account (aws:SourceArn, aws:SourceAccount: no confused deputy).
Its lifecycle is its own: logs expire after `accessLogRetentionDays`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components.common import iam
from components.common.partition import provider_partition
from components.data.bucket_controls import (
    abort_incomplete_uploads_rule,
    expire_noncurrent_versions_rule,
    owner_only,
    versioned,
)
from components.identity import policies

ACCESS_LOGS_PURPOSE = "access-logs"
LOGGING_SERVICE = "logging.s3.amazonaws.com"
# Deleted or overwritten log objects stay recoverable this long.
NONCURRENT_LOG_RETENTION_DAYS = 30


def log_prefix(source_bucket_purpose: str) -> str:
    """Where one source bucket's logs go in the log bucket."""
    return f"{source_bucket_purpose}/"


def access_log_bucket_policy(log_bucket: str, sources: Sequence[tuple[str, str]], account_id: str, partition: str) -> str:
    """TLS only (FSBP S3.5), like every bucket; and S3 log delivery may write, under each source's
    prefix, only logs of our own source buckets. `sources`: (source bucket name, prefix)."""
    tls_only = json.loads(policies.tls_only_bucket_policy(log_bucket, partition))["Statement"]
    return iam.policy(*tls_only, {
        "Sid": "S3ServerAccessLogDelivery",
        "Effect": "Allow",
        "Principal": {"Service": LOGGING_SERVICE},
        "Action": "s3:PutObject",
        "Resource": [f"{policies.bucket_arn(log_bucket, partition)}/{prefix}*" for _, prefix in sources],
        "Condition": {
            "ArnLike": {"aws:SourceArn": [policies.bucket_arn(source, partition) for source, _ in sources]},
            "StringEquals": {"aws:SourceAccount": account_id},
        },
    })


def access_log_bucket(resource_name: str, *, bucket_name: pulumi.Input[str], sources: pulumi.Input[list[tuple[str, str]]],
                      account_id: pulumi.Input[str], retention_days: int, parent: pulumi.Resource) -> aws.s3.Bucket:
    """The log bucket: SSE-S3, no public access, ACLs off, TLS only, its own lifecycle."""
    child = pulumi.ResourceOptions(parent=parent)
    # checkov CKV_AWS_18 and CKV_AWS_145 (see above), CKV_AWS_144 and CKV2_AWS_62 (as the data
    # buckets: docs/upgrading-and-pins.md) stay unmet here on purpose.
    bucket = aws.s3.Bucket(resource_name, bucket=bucket_name, force_destroy=False, tags={"purpose": ACCESS_LOGS_PURPOSE},
                           opts=child)
    public_access = owner_only(resource_name, bucket, child)
    aws.s3.BucketServerSideEncryptionConfiguration(
        resource_name, bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                sse_algorithm="AES256"))],  # SSE-S3: the only default encryption log delivery supports
        opts=child)
    versioning = versioned(resource_name, bucket, child)
    aws.s3.BucketPolicy(
        resource_name, bucket=bucket.id,
        policy=pulumi.Output.all(bucket.bucket, sources, account_id, provider_partition(parent)).apply(
            lambda values: access_log_bucket_policy(values[0], values[1], values[2], values[3])),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[public_access]))
    aws.s3.BucketLifecycleConfiguration(
        resource_name, bucket=bucket.id,
        rules=[
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="expire-access-logs", status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=retention_days)),
            expire_noncurrent_versions_rule("expire-noncurrent-versions", NONCURRENT_LOG_RETENTION_DAYS),
            abort_incomplete_uploads_rule(),
        ],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[versioning]))
    return bucket


def log_access(resource_name: str, *, bucket: aws.s3.Bucket, log_bucket: aws.s3.Bucket, purpose: str,
               parent: pulumi.Resource) -> aws.s3.BucketLogging:
    """Turn on server access logging of `bucket` into the log bucket, one prefix per bucket,
    partitioned by event date (s3://<log bucket>/<purpose>/<account>/<region>/<bucket>/YYYY/MM/DD/)."""
    return aws.s3.BucketLogging(
        resource_name, bucket=bucket.id, target_bucket=log_bucket.id, target_prefix=log_prefix(purpose),
        target_object_key_format=aws.s3.BucketLoggingTargetObjectKeyFormatArgs(
            partitioned_prefix=aws.s3.BucketLoggingTargetObjectKeyFormatPartitionedPrefixArgs(
                partition_date_source="EventTime")),
        opts=pulumi.ResourceOptions(parent=parent))
