"""The key policies of the bootstrap's KMS keys: each names its users."""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig
from bootstrap.policies.names import ci_role_name, ci_role_pattern
from bootstrap.policies.scope import PROJECT_TAG
from bootstrap.policies.teams import team_deploy_role_name
from components.facts.regions import arn_partition

# What using a key is (components/common/kms.py KEY_USE_ACTIONS).
KEY_USE = ("kms:CreateGrant", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*")


def _key_users_only(sid: str, users: list[str], project_roles: str, arn_operator: str) -> list[dict[str, Any]]:
    """Two Denies: no principal carrying a `project` tag (every role of the stacks and the
    bootstrap) and no role named like the project's (`project_roles`) uses the key, unless it
    is one of `users` (`arn_operator`: ArnNotEquals for ARNs, ArnNotLike for a pattern)."""
    not_a_user = {arn_operator: {"aws:PrincipalArn": users}}
    return [
        {"Sid": f"{sid}AmongTaggedPrincipals", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {**not_a_user, "Null": {f"aws:PrincipalTag/{PROJECT_TAG}": "false"}}},
        {"Sid": f"{sid}AmongTheProjectsRoles", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {**not_a_user, "ArnLike": {"aws:PrincipalArn": project_roles}}},
    ]


def _root_statement(account_id: str, partition: str) -> dict[str, Any]:
    """The statement AWS requires in every key policy so the key stays manageable (AWS KMS
    Developer Guide, "Default key policy", "Allows access to the AWS account and enables IAM
    policies"): the account's administrators administer the key through IAM."""
    return {"Sid": "EnableIamPolicies", "Effect": "Allow", "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
            "Action": "kms:*", "Resource": "*"}


def secrets_key_policy(config: BootstrapConfig, environment: str, account_id: str) -> dict[str, Any]:
    """The environment's secrets-provider key names its users: among the project's roles only the
    environment's preview and deploy roles and its team deploy roles (`pulumi preview`/`up`
    decrypt the stacks' config secrets). People who set config secrets stay with IAM: they carry no project tag."""
    project, partition = config.stacks_project, arn_partition(config.region)
    roles = f"arn:{partition}:iam::{account_id}:role"
    users = [*(f"{roles}/{ci_role_name(project, job, environment)}" for job in ("preview", "deploy")),
             # Each team's deploy role of the environment: its team stack's config secrets.
             *(f"{roles}/{team_deploy_role_name(project, team.name, environment)}" for team in config.teams
               if environment in team.environments)]
    return {"Version": "2012-10-17", "Statement": [
        _root_statement(account_id, partition),
        *_key_users_only("OnlyTheEnvironmentsCiRoles", users, f"{roles}/{project}-*", "ArnNotEquals"),
    ]}


def state_key_policy(config: BootstrapConfig, account_id: str) -> dict[str, Any]:
    """The state bucket's key names its users: among the project's roles only the CI roles, and
    those only through S3 in the bootstrap's region (SSE-KMS of the state objects)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    ci_roles = f"arn:{partition}:iam::{account_id}:role/{ci_role_pattern(project)}"
    return {"Version": "2012-10-17", "Statement": [
        _root_statement(account_id, partition),
        *_key_users_only("OnlyCiRoles", [ci_roles], f"arn:{partition}:iam::{account_id}:role/{project}-*", "ArnNotLike"),
        {"Sid": "CiRolesOnlyThroughS3", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {"ArnLike": {"aws:PrincipalArn": ci_roles},
                                        "StringNotEquals": {"kms:ViaService": f"s3.{config.region}.amazonaws.com"}}},
    ]}
