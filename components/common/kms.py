"""Customer-managed KMS keys: one per data store, so each grant names exactly one store's key.

Every key gets an explicit key policy and an alias (checkov CKV2_AWS_64 and the plan's
readability): `customer_key` is the only place keys are made.

Who may use a key, in the key policy itself (not only in IAM): the account root keeps the
statement AWS requires so the key stays manageable (AWS KMS Developer Guide, "Default key
policy": "Allows access to the AWS account and enables IAM policies"), and `users_by_tag` names
the key's users by the tags every principal of the stacks carries: a role tagged for another
environment or another project (`environment`, `project`: the provider's default tags) is
refused every use of the key, whatever its IAM policies grant. AWS services acting through their
grants (EKS, ECR, EFS, Secrets Manager, S3, CloudWatch Logs) carry no principal tags and are not
refused; people (untagged) stay with IAM.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pulumi
import pulumi_aws as aws

from components.common import iam
from components.common.partition import provider_partition

# Scheduled deletion waits this long: a key deleted by mistake can be recovered in that window,
# and everything encrypted under a deleted key is lost for good.
KEY_DELETION_WINDOW_DAYS = 30
# What CloudWatch Logs needs on a key that encrypts log groups (CloudWatch Logs user guide,
# "Encrypt log data in CloudWatch Logs using AWS KMS", key policy example).
# What using a key is (AWS KMS Developer Guide, "Permissions for AWS KMS: cryptographic
# operations"), and handing that use to another principal through a grant.
KEY_USE_ACTIONS = ["kms:CreateGrant", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"]
# The principal tags a key's users must share with the key (components/common/tags.py).
USER_TAGS = ("environment", "project")
LOGS_KEY_ACTIONS = ["kms:Decrypt*", "kms:Describe*", "kms:Encrypt*", "kms:GenerateDataKey*", "kms:ReEncrypt*"]


def users_by_tag() -> list[dict[str, object]]:
    """Key policy statements: a principal carrying an `environment` or `project` tag other than
    the key's own may not use the key. The key's tags are the stack's (the provider's default
    tags), compared through a policy variable (IAM User Guide, "IAM policy elements: Variables
    and tags"; AWS KMS supports aws:ResourceTag in key policies: "ABAC for AWS KMS")."""
    return [{
        "Sid": f"OnlyPrincipalsOfThisKeys{tag.capitalize()}",
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": KEY_USE_ACTIONS,
        "Resource": "*",
        "Condition": {"StringNotEquals": {f"aws:PrincipalTag/{tag}": f"${{aws:ResourceTag/{tag}}}"},
                      "Null": {f"aws:PrincipalTag/{tag}": "false"}},
    } for tag in USER_TAGS]


def with_users_by_tag(document: str) -> str:
    """`document` (a key policy) with the `users_by_tag` statements added."""
    parsed = json.loads(document)
    return iam.policy(*parsed["Statement"], *users_by_tag())


def customer_key(resource_name: str, *, alias: str, description: str, account_id: pulumi.Input[str],
                 parent: pulumi.Resource, policy: Callable[[str, str], str] = iam.key_policy) -> aws.kms.Key:
    """A symmetric key with yearly rotation (FSBP KMS.4), an explicit key policy (by default the
    account root's: roles get use of the key through their own IAM policies, and only roles of
    the key's environment and project may: `users_by_tag`) and an alias.

    `policy` maps the account id and the provider's ARN partition to the key policy document."""
    key = aws.kms.Key(
        resource_name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
        policy=pulumi.Output.all(account_id, provider_partition(parent)).apply(
            lambda v: with_users_by_tag(policy(v[0], v[1]))),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.kms.Alias(resource_name, name=f"alias/{alias}", target_key_id=key.key_id,
                  opts=pulumi.ResourceOptions(parent=parent))
    return key


def log_group_pattern(name_prefix: str) -> str:
    """The name pattern every CloudWatch log group of an environment follows:
    /aws/<service>/<name_prefix>/<what> (VPC flow logs, EKS control plane, Container Insights).
    A team's prefix (<name_prefix>-<team>) does not match it."""
    return f"/aws/*/{name_prefix}/*"


def logs_key_policy(account_id: str, partition: str, *, region: str, name_prefix: str) -> str:
    """The account root (as for every key) plus CloudWatch Logs of this region, for this
    environment's log groups only: the encryption context names the log group each use is for."""
    root = json.loads(iam.key_policy(account_id, partition))["Statement"]
    log_groups = f"arn:{partition}:logs:{region}:{account_id}:log-group:{log_group_pattern(name_prefix)}"
    return iam.policy(*root, {
        "Sid": "CloudWatchLogsOfThisEnvironment",
        "Effect": "Allow",
        "Principal": {"Service": f"logs.{region}.amazonaws.com"},
        "Action": LOGS_KEY_ACTIONS,
        "Resource": "*",
        "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
    })


class LogsKey(pulumi.ComponentResource):
    """The environment's key for every CloudWatch log group it creates (checkov CKV_AWS_158):
    flow logs, the control plane's logs, Container Insights. Made first: the groups need it."""

    key: aws.kms.Key

    def __init__(self, name: str, *, name_prefix: str, region: str, account_id: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:common:LogsKey", name, None, opts)
        self.key = customer_key(
            f"{name}-key", alias=f"{name_prefix}-logs",
            description=f"{name_prefix}: CloudWatch log groups (flow logs, control plane, Container Insights)",
            account_id=account_id, parent=self,
            policy=lambda account, partition: logs_key_policy(account, partition, region=region, name_prefix=name_prefix))
        self.register_outputs({"keyArn": self.key.arn})
