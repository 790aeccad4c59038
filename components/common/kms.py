"""Customer-managed KMS keys: one per data store, so each grant names exactly one store's key."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.common import iam

# Scheduled deletion waits this long: a key deleted by mistake can be recovered in that window,
# and everything encrypted under a deleted key is lost for good.
KEY_DELETION_WINDOW_DAYS = 30


def customer_key(resource_name: str, *, alias: str, description: str, account_id: pulumi.Input[str],
                 parent: pulumi.Resource) -> aws.kms.Key:
    """A symmetric key with yearly rotation (FSBP KMS.4) and the account-root key policy."""
    key = aws.kms.Key(
        resource_name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
        policy=pulumi.Output.from_input(account_id).apply(iam.key_policy),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.kms.Alias(resource_name, name=f"alias/{alias}", target_key_id=key.key_id,
                  opts=pulumi.ResourceOptions(parent=parent))
    return key
