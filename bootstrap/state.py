"""Where every stack keeps its state and its secrets: the S3 bucket and the KMS keys.

The bucket: versioned (every state write can be rolled back), SSE-KMS under its own key with S3
Bucket Keys, public access blocked, ACLs off, TLS-only, old state versions expired after
`stateVersionRetentionDays`, and every request to it logged by S3 server access logging into a log
bucket of its own (`state.accessLogRetentionDays`; components/data/access_logs.py: SSE-S3, ACLs
off, S3 log delivery admitted by bucket policy for this source bucket and account only, as the
S3 User Guide, "Enabling Amazon S3 server access logging", prescribes). One secrets-provider key
per environment, so a stack's config secrets are readable only by the roles of its environment;
each key's policy names its users (bootstrap/policies/keys.py secrets_key_policy, state_key_policy). All of
it is `protect`ed: `pulumi destroy` of the bootstrap stops before deleting any of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from bootstrap import policies
from bootstrap.config import BootstrapConfig
from components.common.kms import KEY_DELETION_WINDOW_DAYS
from components.data.access_logs import access_log_bucket, log_access
from components.data.bucket_controls import abort_incomplete_uploads_rule, expire_noncurrent_versions_rule, secure_bucket

# The log bucket's prefix for the state bucket's logs (components/data/access_logs.log_prefix).
STATE_LOG_PURPOSE = "state"


@dataclass(frozen=True)
class StateBackendArgs:
    config: BootstrapConfig
    account_id: pulumi.Output[str]


class StateBackend(pulumi.ComponentResource):
    bucket: aws.s3.Bucket
    state_key: aws.kms.Key
    secrets_keys: dict[str, aws.kms.Key]
    """Secrets-provider key per environment name."""

    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:bootstrap:StateBackend", name, None, opts)
        self._name, self._args = name, args
        config = args.config
        self.state_key = self._key(f"{name}-state-key", policies.state_key_alias(config.stacks_project),
                                   "Pulumi state bucket (SSE-KMS)", {},
                                   lambda account: policies.state_key_policy(config, account))
        self.secrets_keys = {
            env.name: self._key(f"{name}-secrets-{env.name}", policies.secrets_key_alias(config.stacks_project, env.name),
                                f"Pulumi secrets provider of the {env.name} stacks", {"ci-environment": env.name},
                                lambda account, env=env.name: policies.secrets_key_policy(config, env, account))
            for env in config.environments
        }
        self.bucket = self._bucket()
        self.register_outputs({"bucket": self.bucket.bucket})

    def _key(self, resource_name: str, alias: str, description: str, tags: dict[str, str],
             policy: Callable[[str], dict[str, Any]]) -> aws.kms.Key:
        """`policy`: the key policy for the account id (bootstrap/policies/keys.py: it names the key's users)."""
        key = aws.kms.Key(
            resource_name,
            description=f"{self._args.config.stacks_project}: {description}",
            enable_key_rotation=True,
            deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
            policy=self._args.account_id.apply(lambda account: json.dumps(policy(account), sort_keys=True)),
            tags=tags,
            # Losing this key loses every secret in every stack's config: never deleted by a destroy.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        aws.kms.Alias(resource_name, name=alias, target_key_id=key.key_id, opts=pulumi.ResourceOptions(parent=self))
        return key

    def _bucket(self) -> aws.s3.Bucket:
        config, name = self._args.config, f"{self._name}-bucket"
        # checkov, over the plan: CKV_AWS_144 (cross-region replication) and CKV2_AWS_62 (event
        # notifications) stay unmet here and on the log bucket, on purpose. There is no second
        # region the stacks run in; the state is versioned (an overwritten or deleted state file
        # is recoverable for `state.versionRetentionDays`) and `protect`ed (a destroy stops before
        # it). Nothing consumes S3 events: who read or wrote what is in the access logs below.
        bucket = aws.s3.Bucket(
            name,
            bucket=self._args.account_id.apply(lambda account: policies.state_bucket_name(config.stacks_project, account)),
            force_destroy=False,
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        versioning = secure_bucket(name, bucket, key_arn=self.state_key.arn, parent=self)
        aws.s3.BucketLifecycleConfiguration(
            name, bucket=bucket.id,
            rules=[
                expire_noncurrent_versions_rule("expire-old-state-versions", config.state_version_retention_days),
                abort_incomplete_uploads_rule(),
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]))
        self._log_requests(bucket)
        return bucket

    def _log_requests(self, bucket: aws.s3.Bucket) -> None:
        """Server access logs of the state bucket (FSBP S3.9, checkov CKV_AWS_18): who read or wrote
        which stack's state, with the caller's identity. CloudTrail logs object reads only as
        paid data events; these are best effort and free but for their storage."""
        config, name = self._args.config, f"{self._name}-access-logs"
        sources = bucket.bucket.apply(lambda source: [(source, f"{STATE_LOG_PURPOSE}/")])
        log_bucket = access_log_bucket(
            name, bucket_name=self._args.account_id.apply(
                lambda account: policies.state_log_bucket_name(config.stacks_project, account)),
            sources=sources, account_id=self._args.account_id,
            retention_days=config.state_access_log_retention_days, parent=self)
        log_access(f"{self._name}-bucket", bucket=bucket, log_bucket=log_bucket, purpose=STATE_LOG_PURPOSE, parent=self)
