"""Small pure helpers for IAM policy documents, so policies are plain data a test can parse."""

from __future__ import annotations

import json
from typing import Any


def managed_policy_arn(partition: str, name: str) -> str:
    """An AWS managed policy: owned by the account `aws`, but one copy per partition."""
    return f"arn:{partition}:iam::aws:policy/{name}"


def statement(actions: list[str], resources: list[Any], *, sid: str | None = None,
              effect: str = "Allow", conditions: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"Effect": effect, "Action": sorted(actions), "Resource": resources}
    if sid:
        result["Sid"] = sid
    if conditions:
        result["Condition"] = conditions
    return result


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)}, sort_keys=True)


def service_trust_policy(service: str, *, account_id: str | None = None, actions: tuple[str, ...] = ("sts:AssumeRole",)) -> str:
    """Trust policy letting one AWS service assume a role (optionally only for our account)."""
    trust: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions)}
    if account_id:
        # Confused-deputy guard: the service may act for this account only.
        trust["Condition"] = {"StringEquals": {"aws:SourceAccount": account_id}}
    return json.dumps({"Version": "2012-10-17", "Statement": [trust]}, sort_keys=True)


def pod_identity_trust_policy(account_id: str) -> str:
    """Trust policy for an EKS Pod Identity role (the agent also tags the session)."""
    return service_trust_policy("pods.eks.amazonaws.com", account_id=account_id,
                                actions=("sts:AssumeRole", "sts:TagSession"))


def key_policy(account_id: str, partition: str, *extra: dict[str, Any]) -> str:
    """The key policy every customer key gets: the account (through IAM policies) may use and
    administer it. Without this statement a key can become unmanageable; permissions to use
    the key are then granted, narrowly, by the roles' own IAM policies. `extra` statements are
    for AWS services that are not granted through IAM (FSx's S3 access role)."""
    return policy({
        "Sid": "EnableIamPolicies",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }, *extra)
