"""S3 buckets: SSE-KMS, versioning, public access fully blocked, a TLS-only bucket policy.

pulumi-aws 7 splits a bucket's settings into resources of their own (encryption, versioning,
public access block, policy, logging), each pointing at the bucket through its `bucket` input.
So these are stack policies: they gather a bucket's settings through the engine's property
dependencies (which stay known during a preview, when the bucket's id is not). The deprecated
inline settings on the bucket count only where they satisfy a rule: a stack policy reads outputs,
and there the bucket may report what AWS applies by default (SSE-S3, versioning off), not what
the separate resources set.

One documented exception: a bucket that receives S3 server access logs (the target of a
BucketLogging) may use SSE-S3 (AES256), because AWS documents log delivery into SSE-S3 buckets
(Amazon S3 User Guide, "Enabling Amazon S3 server access logging"). It still needs encryption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpu_training_policy.resources import Report, as_list, describe, get, is_set, json_document, known, statements, truthy
from gpu_training_policy.rules import resource_rule

BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
ENCRYPTION_TYPES = ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2")
VERSIONING_TYPES = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
PUBLIC_ACCESS_BLOCK_TYPE = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
POLICY_TYPE = "aws:s3/bucketPolicy:BucketPolicy"
ACL_TYPES = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
LOGGING_TYPES = ("aws:s3/bucketLogging:BucketLogging", "aws:s3/bucketLoggingV2:BucketLoggingV2")
KMS_ALGORITHMS = ("aws:kms", "aws:kms:dsse")
SSE_S3 = "AES256"
# The AWS managed key: no key policy or rotation of our own, shared by every bucket of the account.
AWS_MANAGED_KEY_IDS = ("alias/aws/s3", "aws/s3")
PUBLIC_ACCESS_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")


@dataclass
class BucketSettings:
    """A bucket and the resources that configure it."""

    bucket: PolicyResource
    settings: dict[str, list[PolicyResource]] = field(default_factory=dict)
    receives_access_logs: bool = False

    def of(self, types: tuple[str, ...] | str) -> list[PolicyResource]:
        wanted = (types,) if isinstance(types, str) else types
        return [r for t in wanted for r in self.settings.get(t, [])]

    @property
    def what(self) -> str:
        return describe(self.bucket.name, self.bucket.resource_type)


def buckets_of(resources: list[PolicyResource]) -> list[BucketSettings]:
    """Every bucket of the stack with its settings, related through property dependencies."""
    by_urn = {r.urn: BucketSettings(r) for r in resources if r.resource_type in BUCKET_TYPES}
    for resource in resources:
        for dependency in resource.property_dependencies.get("bucket", []):
            if dependency.urn in by_urn:
                by_urn[dependency.urn].settings.setdefault(resource.resource_type, []).append(resource)
        if resource.resource_type in LOGGING_TYPES:
            for dependency in resource.property_dependencies.get("targetBucket", []):
                if dependency.urn in by_urn:
                    by_urn[dependency.urn].receives_access_logs = True
    return list(by_urn.values())


def _bucket_policy(check: Callable[[BucketSettings], str | None], name: str, description: str,
                   severity: Severity) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: Report) -> None:
        for bucket in buckets_of(list(args.resources)):
            problem = check(bucket)
            if problem:
                report(f"{bucket.what} {problem}", bucket.bucket.urn)

    return StackValidationPolicy(name=name, description=description, enforcement_level=EnforcementLevel.MANDATORY,
                                 severity=severity, validate=validate)


# --- encryption -------------------------------------------------------------------------------

def _default_encryptions(configs: list[PolicyResource]) -> list[object]:
    """Every `applyServerSideEncryptionByDefault` block of the bucket's encryption resources."""
    return [get(rule, "applyServerSideEncryptionByDefault") for config in configs for rule in as_list(get(config.props, "rules"))]


def _kms_block_problem(block: object, bucket: BucketSettings) -> str | None:
    algorithm = get(block, "sseAlgorithm")
    if algorithm == SSE_S3 and bucket.receives_access_logs:
        return None
    if algorithm not in KMS_ALGORITHMS:
        exception = " (SSE-S3 is accepted only on a bucket that receives server access logs)" if algorithm == SSE_S3 else ""
        return f"is encrypted with {algorithm}{exception}; use SSE-KMS (aws:kms) with a customer managed key."
    if not is_set(block, "kmsMasterKeyId"):
        return "uses SSE-KMS with the AWS managed key aws/s3; name a customer managed key (kms_master_key_id)."
    key = known(block, "kmsMasterKeyId")  # unknown in a preview: the ARN of a key made here
    if key in AWS_MANAGED_KEY_IDS:
        return f"uses the AWS managed key {key}; name a customer managed key (kms_master_key_id)."
    return None


def encryption_problem(bucket: BucketSettings) -> str | None:
    blocks = _default_encryptions(bucket.of(ENCRYPTION_TYPES))
    if not blocks:
        inline = get(bucket.bucket.props, "serverSideEncryptionConfiguration")
        inline_blocks = [get(rule, "applyServerSideEncryptionByDefault") for rule in as_list(get(inline, "rule"))]
        if inline_blocks and not any(_kms_block_problem(b, bucket) for b in inline_blocks):
            return None
        return ("has no SSE-KMS default encryption. Add an aws.s3.BucketServerSideEncryptionConfiguration with "
                "sse_algorithm aws:kms and the environment's data key.")
    problems = [p for p in (_kms_block_problem(b, bucket) for b in blocks) if p]
    return problems[0] if problems else None


# --- versioning -------------------------------------------------------------------------------

def versioning_problem(bucket: BucketSettings) -> str | None:
    statuses = [get(get(v.props, "versioningConfiguration"), "status") for v in bucket.of(VERSIONING_TYPES)]
    if not statuses:
        if truthy(get(get(bucket.bucket.props, "versioning"), "enabled")):
            return None
        return "has no versioning. Add an aws.s3.BucketVersioning with status Enabled."
    bad = [s for s in statuses if s != "Enabled"]
    return f"has versioning {bad[0]}; set it to Enabled." if bad else None


# --- public access ----------------------------------------------------------------------------

def public_access_problem(bucket: BucketSettings) -> str | None:
    blocks = bucket.of(PUBLIC_ACCESS_BLOCK_TYPE)
    if not blocks:
        return "has no public access block. Add an aws.s3.BucketPublicAccessBlock with all four settings true."
    for block in blocks:
        off = [flag for flag in PUBLIC_ACCESS_FLAGS if not truthy(get(block.props, flag))]
        if off:
            return f"does not fully block public access ({', '.join(off)} not true)."
    acls = [get(a.props, "acl") for a in bucket.of(ACL_TYPES)] + [get(bucket.bucket.props, "acl")]
    public = [a for a in acls if a in PUBLIC_CANNED_ACLS]
    return f"has the public ACL {public[0]}." if public else None


# --- TLS only ---------------------------------------------------------------------------------

def _denies_plain_http(statement: object) -> bool:
    """Deny, to everyone, every S3 action on the bucket and its objects when aws:SecureTransport
    is false (AWS Foundational Security Best Practices S3.5)."""
    if get(statement, "Effect") != "Deny":
        return False
    principal = get(statement, "Principal")
    if principal != "*" and get(principal, "AWS") not in ("*", ["*"]):
        return False
    if not {"s3:*", "*"} & {str(a) for a in as_list(get(statement, "Action"))}:
        return False
    secure = get(get(get(statement, "Condition"), "Bool"), "aws:SecureTransport")
    if str(secure).lower() != "false" and secure != ["false"]:
        return False
    resources = [str(r) for r in as_list(get(statement, "Resource"))]
    return any(r.endswith("/*") for r in resources) and any("/" not in r.split(":::", 1)[-1] for r in resources)


def tls_problem(bucket: BucketSettings) -> str | None:
    documents = [json_document(get(p.props, "policy")) for p in bucket.of(POLICY_TYPE)]
    documents.append(json_document(get(bucket.bucket.props, "policy")))
    if any(_denies_plain_http(s) for d in documents for s in statements(d)):
        return None
    return ("has no bucket policy denying requests without TLS. Add a Deny of s3:* for Principal * on the bucket "
            "and bucket/* when aws:SecureTransport is false.")


bucket_sse_kms = _bucket_policy(
    encryption_problem, "bucket-sse-kms",
    "S3 buckets are encrypted by default with SSE-KMS under a customer managed key "
    "(SSE-S3 only for a bucket that receives server access logs).", Severity.HIGH)
bucket_versioning = _bucket_policy(
    versioning_problem, "bucket-versioning", "S3 buckets keep versions (checkpoints and datasets survive a bad "
    "overwrite or delete).", Severity.MEDIUM)
bucket_public_access_blocked = _bucket_policy(
    public_access_problem, "bucket-public-access-blocked",
    "S3 buckets block public access with all four settings and carry no public ACL.", Severity.CRITICAL)
bucket_tls_only = _bucket_policy(
    tls_problem, "bucket-tls-only", "S3 bucket policies deny every request made without TLS.", Severity.HIGH)


# --- access logging (AWSGuard s3-bucket-logging-enabled) -----------------------------------------

def logging_problem(bucket: BucketSettings) -> str | None:
    """A bucket logs its requests unless it is where the logs go (logging into itself loops)."""
    if bucket.of(LOGGING_TYPES) or bucket.receives_access_logs or is_set(bucket.bucket.props, "loggings"):
        return None
    return "has no server access logging. Add an aws.s3.BucketLogging into the environment's access log bucket."


bucket_access_logging = _bucket_policy(
    logging_problem, "bucket-access-logging",
    "S3 buckets log their requests (server access logging), except the bucket that receives the logs.", Severity.MEDIUM)


# Mandatory since the bootstrap's state bucket logs too (issue #28 item 6): every plan passes it.


# --- file systems and keys (AWSGuard efs-encrypted, cmk-backing-key-rotation-enabled) ---------

EFS = "aws:efs/fileSystem:FileSystem"
KMS_KEY = "aws:kms/key:Key"
# Rotation applies to symmetric encryption keys only (KMS Developer Guide, "Rotating AWS KMS keys").
SYMMETRIC_KEY_SPEC = "SYMMETRIC_DEFAULT"


@resource_rule(Severity.HIGH, resource_type=EFS)
def efs_encrypted(args: ResourceValidationArgs, report: Report) -> None:
    """EFS file systems are encrypted at rest with a customer managed key."""
    if not truthy(get(args.props, "encrypted")) or not is_set(args.props, "kmsKeyId"):
        report(f"{describe(args.name, args.resource_type)} is not encrypted with a customer managed key; set "
               "encrypted true and kms_key_id (AWSGuard efs-encrypted, AWS FSBP EFS.1).")


@resource_rule(Severity.MEDIUM, resource_type=KMS_KEY)
def kms_key_rotation(args: ResourceValidationArgs, report: Report) -> None:
    """Symmetric customer managed KMS keys rotate their key material."""
    spec = get(args.props, "customerMasterKeySpec") or get(args.props, "keySpec") or SYMMETRIC_KEY_SPEC
    if spec == SYMMETRIC_KEY_SPEC and not truthy(get(args.props, "enableKeyRotation")):
        report(f"{describe(args.name, args.resource_type)} does not rotate its key material; set enable_key_rotation "
               "true (AWSGuard cmk-backing-key-rotation-enabled, AWS FSBP KMS.4).")


POLICIES = (bucket_sse_kms, bucket_versioning, bucket_public_access_blocked, bucket_tls_only, bucket_access_logging,
            efs_encrypted, kms_key_rotation)
