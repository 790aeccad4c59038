"""Controls every bucket of ours has, whatever it holds."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.common.partition import provider_partition
from components.identity import policies

# A multipart upload that has not finished in a week never will; its parts still cost money.
ABORT_INCOMPLETE_UPLOADS_DAYS = 7


def abort_incomplete_uploads_rule() -> aws.s3.BucketLifecycleConfigurationRuleArgs:
    """The lifecycle rule that drops the parts of a multipart upload unfinished after a week."""
    return aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="abort-incomplete-multipart-uploads", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
        abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
            days_after_initiation=ABORT_INCOMPLETE_UPLOADS_DAYS))


def expire_noncurrent_versions_rule(rule_id: str, days: pulumi.Input[int]) -> aws.s3.BucketLifecycleConfigurationRuleArgs:
    """The lifecycle rule that deletes an object's old versions `days` after they stop being current,
    and the delete markers left once every old version is gone."""
    return aws.s3.BucketLifecycleConfigurationRuleArgs(
        id=rule_id, status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
        noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
            noncurrent_days=days),
        expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True))


def versioned(resource_name: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions) -> aws.s3.BucketVersioning:
    """Versioning on: an overwritten or deleted object stays as an old version (the lifecycle rules
    expire them). Returned so that what acts on versions can wait for it."""
    return aws.s3.BucketVersioning(
        resource_name, bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"), opts=opts)


def owner_only(resource_name: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions) -> aws.s3.BucketPublicAccessBlock:
    """ACLs off (the bucket owner owns every object; access is by policy only) and all public
    access blocked (FSBP S3.1/S3.8). The returned block must exist before any bucket policy, or
    AWS evaluates the policy without it."""
    aws.s3.BucketOwnershipControls(
        resource_name, bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"), opts=opts)
    return aws.s3.BucketPublicAccessBlock(
        resource_name, bucket=bucket.id, block_public_acls=True, block_public_policy=True,
        ignore_public_acls=True, restrict_public_buckets=True, opts=opts)


def secure_bucket(name: str, bucket: aws.s3.Bucket, *, key_arn: pulumi.Input[str],
                  parent: pulumi.Resource) -> aws.s3.BucketVersioning:
    """The controls every bucket holding data gets (the state bucket of bootstrap/ too): owner
    only, SSE-KMS under `key_arn` with bucket keys, versioning, TLS-only policy. Returns the
    versioning: lifecycle rules on noncurrent versions must wait for it."""
    child = pulumi.ResourceOptions(parent=parent)
    public_access = owner_only(name, bucket, child)
    aws.s3.BucketServerSideEncryptionConfiguration(
        name, bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                sse_algorithm="aws:kms", kms_master_key_id=key_arn),
            bucket_key_enabled=True,  # one KMS call per bucket key, not per object: cheaper, faster
        )],
        opts=child)
    versioning = versioned(name, bucket, child)
    aws.s3.BucketPolicy(
        name, bucket=bucket.id,
        policy=pulumi.Output.all(bucket.bucket, provider_partition(parent)).apply(
            lambda v: policies.tls_only_bucket_policy(v[0], v[1])),
        # The public access block must exist first, or AWS evaluates the policy without it.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[public_access]))
    return versioning
