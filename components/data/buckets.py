"""S3 buckets of one environment: datasets (read by training) and artifacts (checkpoints, models).

Every bucket: SSE-KMS under the environment's data key with S3 Bucket Keys (FSBP S3.17),
versioning, all public access blocked (S3.1/S3.8), TLS-only bucket policy (S3.5), object
ownership enforced (ACLs off), and a lifecycle that aborts stale multipart uploads and expires
old versions. Old checkpoints under `checkpoints/` expire after `checkpointRetentionDays`.
Server access logs of both go to the environment's access-log bucket (access_logs.py).
With FSx for Lustre linked to the datasets bucket, the data key also lets FSx's S3 access role
use it, for that bucket only (data/lustre.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common import iam
from components.common.kms import customer_key
from components.common.renames import renamed_from
from components.config.storage import StorageConfig, bucket_name
from components.data.access_logs import ACCESS_LOGS_PURPOSE, access_log_bucket, log_access, log_prefix
from components.data.bucket_controls import abort_incomplete_uploads_rule, expire_noncurrent_versions_rule, secure_bucket
from components.identity import policies


@dataclass(frozen=True)
class DataBucketsArgs:
    config: StorageConfig
    """The storage section: existing datasets bucket, retention days, Lustre."""
    project: str
    """First part of every bucket name (<project>-<environment>-<purpose>-<account>)."""
    environment: str
    """Second part of every bucket name."""
    name_prefix: str
    """Names the data key's alias and description."""
    account_id: pulumi.Input[str]
    """Last part of every bucket name (bucket names are global), and the account the data key trusts."""
    region: str = ""
    """Needed when FSx for Lustre reads the datasets bucket (storage.lustre)."""
    lustre_exports_checkpoints: bool = False
    """FSx for Lustre also writes checkpoints to the artifacts bucket (multiKueue: data/replication.py)."""


class DataBuckets(pulumi.ComponentResource):
    data_key: aws.kms.Key
    datasets_bucket: pulumi.Output[str]
    """Name of the bucket training reads datasets from (ours, or the configured existing one)."""
    artifacts_bucket: pulumi.Output[str]

    def __init__(self, name: str, args: DataBucketsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:DataBuckets", name, None,
                         renamed_from("gpu-training:storage:DataBuckets", opts))
        self._name, self._args = name, args
        config = args.config
        self.data_key = customer_key(f"{name}-data-key", alias=f"{args.name_prefix}-data",
                                     description=f"{args.name_prefix}: S3 datasets and artifacts",
                                     account_id=args.account_id, parent=self, policy=self._key_policy())
        self._access_logs = self._access_log_bucket()
        if config.datasets_bucket:
            # An existing bucket: we only read it; its owner manages its controls.
            self.datasets_bucket = pulumi.Output.from_input(config.datasets_bucket)
        else:
            self.datasets_bucket = self._bucket("datasets", checkpoint_expiry=False).bucket
        self.artifacts_bucket = self._bucket("artifacts", checkpoint_expiry=True).bucket

        self.register_outputs({"datasetsBucket": self.datasets_bucket, "artifactsBucket": self.artifacts_bucket})

    def _access_log_bucket(self) -> aws.s3.Bucket:
        """Where the access logs of the buckets made here go (not of an existing datasets bucket:
        its owner manages its logging)."""
        args = self._args
        logged = ["artifacts"] if args.config.datasets_bucket else ["datasets", "artifacts"]
        account = pulumi.Output.from_input(args.account_id)
        return access_log_bucket(
            f"{self._name}-{ACCESS_LOGS_PURPOSE}",
            bucket_name=account.apply(lambda a: bucket_name(args.project, args.environment, ACCESS_LOGS_PURPOSE, a)),
            sources=account.apply(lambda a: [(bucket_name(args.project, args.environment, purpose, a), log_prefix(purpose))
                                             for purpose in logged]),
            account_id=args.account_id, retention_days=args.config.access_log_retention_days, parent=self)

    def _key_policy(self) -> Callable[[str, str], str]:
        """The account-root policy, plus FSx's access to our datasets bucket when it is linked to
        FSx for Lustre (an existing bucket's key is its owner's to extend)."""
        args = self._args
        if args.config.lustre is None or args.config.datasets_bucket:
            return iam.key_policy
        return lambda account, partition: iam.key_policy(account, partition, policies.fsx_datasets_key_statement(
            account_id=account, region=args.region,
            bucket=bucket_name(args.project, args.environment, "datasets", account),
            also=[bucket_name(args.project, args.environment, "artifacts", account)] if args.lustre_exports_checkpoints else []))

    def _bucket(self, purpose: str, *, checkpoint_expiry: bool) -> aws.s3.Bucket:
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        name = f"{self._name}-{purpose}"
        # checkov CKV_AWS_144 (cross-region replication) and CKV2_AWS_62 (event notifications)
        # stay unmet on purpose (docs/upgrading-and-pins.md, "Security checks we deliberately do
        # not meet").
        bucket = aws.s3.Bucket(
            name,
            bucket=pulumi.Output.from_input(args.account_id).apply(
                lambda account: bucket_name(args.project, args.environment, purpose, account)),
            force_destroy=False,  # `pulumi destroy` must never delete data
            tags={"purpose": purpose},
            opts=child,
        )
        versioning = secure_bucket(name, bucket, key_arn=self.data_key.arn, parent=self)
        aws.s3.BucketLifecycleConfiguration(
            name, bucket=bucket.id, rules=self._lifecycle_rules(checkpoint_expiry),
            # Rules on noncurrent versions need versioning on first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]))
        log_access(name, bucket=bucket, log_bucket=self._access_logs, purpose=purpose, parent=self)
        return bucket

    def _lifecycle_rules(self, checkpoint_expiry: bool) -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
        config = self._args.config
        rules = [
            abort_incomplete_uploads_rule(),
            expire_noncurrent_versions_rule("expire-noncurrent-versions", config.noncurrent_version_retention_days),
        ]
        if checkpoint_expiry:
            rules.append(aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="expire-old-checkpoints", status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=policies.CHECKPOINT_PREFIX),
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=config.checkpoint_retention_days),
                # Pruned and superseded checkpoints, here and as replicas in every other region:
                # days, not noncurrentVersionRetentionDays. Of two overlapping expirations S3 honours
                # the shorter (S3 User Guide, "How Amazon S3 handles conflicts in lifecycle configurations").
                noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                    noncurrent_days=config.checkpoint_version_retention_days)))
        return rules
