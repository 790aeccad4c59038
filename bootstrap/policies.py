"""Names and IAM documents of the bootstrap: pure functions of the config, tested as data.

Least privilege, written down (docs/delivery.md repeats it for readers):

- preview role (pull requests): lists the state bucket, reads the state files of its
  environment's stacks, decrypts their config secrets. `pulumi preview` compares the program with
  the state and takes no lock in the DIY backend, so it needs nothing else from AWS. No write.
- deploy role (protected branch + GitHub environment): writes the state files of its
  environment's stacks only; manages the services the stacks use in its region; creates and
  changes IAM roles only when they carry its `environment` tag, attaches only the AWS managed
  policies the stacks attach; never touches anything tagged with another environment.
- neither role can change the bootstrap: the state bucket's settings, the bootstrap's own state,
  the KMS keys (beyond using them), the OIDC provider and the CI roles are denied explicitly.

The roles' trust follows GitHub's `sub` claim (see bootstrap/config.py, SUBJECT_CLAIMS).
"""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig, EnvironmentCi, GithubConfig

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
# The audience aws-actions/configure-aws-credentials asks for by default (its README, v6.2.3).
GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com"
# Organisation segment of every DIY-backend stack reference and lock path (pulumi/pulumi
# pkg/backend/diy/store.go: "org-name must always be organization").
DIY_ORGANIZATION = "organization"

# The AWS services the stacks' resources live in, by Pulumi type prefix. The deploy role may use
# these services and no other; tests/test_bootstrap.py checks every type of every plan is here.
MANAGED_SERVICES = {
    "aws:autoscaling/": "autoscaling",
    "aws:cloudwatch/logGroup:": "logs",
    "aws:cloudwatch/": "cloudwatch",
    "aws:ec2/": "ec2",
    "aws:vpc/": "ec2",
    "aws:ecr/": "ecr",
    "aws:efs/": "elasticfilesystem",
    "aws:eks/": "eks",
    "aws:kms/": "kms",
    "aws:secretsmanager/": "secretsmanager",
    "aws:sns/": "sns",
    "aws:s3/": "s3",
    "aws:iam/": "iam",
    # Global services (their API is in us-east-1 whatever the stack's region): scoped by name below.
    "aws:budgets/": "budgets",
    "aws:costexplorer/": "ce",
}
GLOBAL_SERVICES = ("budgets", "ce")
# AWS managed policies the stacks attach to their roles (the deploy role may attach no other, so
# it cannot hand a role AdministratorAccess); tests check every plan's attachments are listed.
ATTACHABLE_MANAGED_POLICIES = (
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonEKSClusterPolicy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonSSMManagedInstanceCore",
    "CloudWatchAgentServerPolicy",
)
# Service-linked roles AWS creates on first use of these services in an account.
SERVICE_LINKED_ROLES = ("autoscaling.amazonaws.com", "eks.amazonaws.com", "eks-nodegroup.amazonaws.com",
                        "elasticfilesystem.amazonaws.com", "spot.amazonaws.com")
# Role actions the deploy role may use on roles of its own environment.
ROLE_ACTIONS = (
    "iam:DeleteRole", "iam:DeleteRolePolicy", "iam:GetRole", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole", "iam:ListRolePolicies", "iam:PassRole", "iam:PutRolePolicy", "iam:TagRole",
    "iam:UntagRole", "iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription",
)
ENVIRONMENT_TAG = "environment"
"""The tag the stacks' AWS provider puts on every resource (components/common/tags.py)."""


# --- names (stable: they become ARNs the workflows and stack files name) -----------------------

def preview_role_name(stacks_project: str, environment: str) -> str:
    return f"{stacks_project}-ci-preview-{environment}"


def deploy_role_name(stacks_project: str, environment: str) -> str:
    return f"{stacks_project}-ci-deploy-{environment}"


def ci_role_pattern(stacks_project: str) -> str:
    return f"{stacks_project}-ci-*"


def state_bucket_name(stacks_project: str, account_id: str) -> str:
    """Globally unique through the account id; never matches `<project>-<env>-*` (the stacks' buckets)."""
    return f"{stacks_project}-pulumi-state-{account_id}"


def state_key_alias(stacks_project: str) -> str:
    return f"alias/{stacks_project}-pulumi-state"


def secrets_key_alias(stacks_project: str, environment: str) -> str:
    return f"alias/{stacks_project}-pulumi-secrets-{environment}"


def backend_url(bucket: str, region: str) -> str:
    """What `pulumi login` takes (DIY backend on S3)."""
    return f"s3://{bucket}?region={region}"


def secrets_provider_url(stacks_project: str, environment: str, region: str) -> str:
    """What `pulumi stack init --secrets-provider` takes for a stack of `environment`."""
    return f"awskms://{secrets_key_alias(stacks_project, environment)}?region={region}"


def environment_stacks(environment: str) -> tuple[str, str]:
    """The platform stack of an environment and the pattern of its team stacks."""
    return environment, f"team-*-{environment}"


# --- the DIY backend's object layout (pulumi/pulumi pkg/backend/diy/store.go, lock.go) ----------

def stack_checkpoints(bucket_arn: str, project: str, stack: str) -> list[str]:
    """The stack's state file: <stack>.json, .json.gz, .json.zst and their .bak copies."""
    return [f"{bucket_arn}/.pulumi/stacks/{project}/{stack}.json*"]


def stack_objects(bucket_arn: str, project: str, stack: str) -> list[str]:
    """Everything `pulumi up` writes for one stack: state, history, backups, journal, lock."""
    return [
        *stack_checkpoints(bucket_arn, project, stack),
        *(f"{bucket_arn}/.pulumi/{kind}/{project}/{stack}/*" for kind in ("history", "backups", "journal")),
        f"{bucket_arn}/.pulumi/locks/{DIY_ORGANIZATION}/{project}/{stack}/*",
    ]


def state_metadata(bucket_arn: str) -> str:
    return f"{bucket_arn}/.pulumi/meta.yaml"


# --- trust -------------------------------------------------------------------------------------

def preview_subject(github: GithubConfig) -> tuple[str, str]:
    """(condition operator, `sub` value) a pull request's token carries."""
    repository = github.subject_repository
    if github.subject_claims == "repo-context-ref":
        # The ref of a pull_request run is refs/pull/<number>/merge; the wildcard stands for the
        # number only (GitHub writes any `:` inside a claim value as %3A).
        return "StringLike", f"repo:{repository}:pull_request:ref:refs/pull/*/merge"
    return "StringEquals", f"repo:{repository}:pull_request"


def deploy_subject(github: GithubConfig, environment: EnvironmentCi) -> str:
    """The `sub` of a deploy job: it names its GitHub environment (and, with the ref template, the branch)."""
    subject = f"repo:{github.subject_repository}:environment:{environment.github_environment}"
    if github.subject_claims == "repo-context-ref":
        subject += f":ref:refs/heads/{environment.deploy_branch}"
    return subject


def github_trust_policy(provider_arn: str, operator: str, subject: str) -> dict[str, Any]:
    """Only tokens of the GitHub OIDC provider, for AWS, with exactly this subject."""
    conditions: dict[str, dict[str, str]] = {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": GITHUB_OIDC_AUDIENCE}}
    conditions.setdefault(operator, {})[f"{GITHUB_OIDC_HOST}:sub"] = subject
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "GitHubActionsOidc",
        "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": conditions,
    }]}


# --- permissions -------------------------------------------------------------------------------

def _via_s3(region: str) -> dict[str, Any]:
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}


def preview_policy(config: BootstrapConfig, environment: str, *, bucket_arn: str, state_key_arn: str,
                   secrets_key_arn: str) -> dict[str, Any]:
    project = config.stacks_project
    checkpoints = [arn for stack in environment_stacks(environment) for arn in stack_checkpoints(bucket_arn, project, stack)]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "ReadStateOfEnvironment", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [state_metadata(bucket_arn), *checkpoints]},
        {"Sid": "ReadStateThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [state_key_arn],
         "Condition": _via_s3(config.region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [secrets_key_arn]},
    ]}


def deploy_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                  secrets_key_arns: dict[str, str], oidc_provider_arn: str) -> dict[str, Any]:
    """`secrets_key_arns`: every environment's secrets-provider key (the others are denied)."""
    project, region = config.stacks_project, config.region
    role_arns = f"arn:aws:iam::{account_id}:role/*"
    own_objects = [arn for stack in environment_stacks(environment) for arn in stack_objects(bucket_arn, project, stack)]
    services = sorted(set(MANAGED_SERVICES.values()) - {"iam", "s3", *GLOBAL_SERVICES})
    own_tag = {"StringEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment}}
    attachable = [f"arn:aws:iam::aws:policy/{name}" for name in ATTACHABLE_MANAGED_POLICIES]
    other_keys = [arn for env, arn in sorted(secrets_key_arns.items()) if env != environment]
    statements: list[dict[str, Any]] = [
        # The state of this environment's stacks, nothing else in the bucket.
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "ReadStateMetadata", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [state_metadata(bucket_arn)]},
        {"Sid": "WriteStateOfEnvironment", "Effect": "Allow", "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
         "Resource": own_objects},
        {"Sid": "UseStateKeyThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [state_key_arn], "Condition": _via_s3(region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"],
         "Resource": [secrets_key_arns[environment]]},
        # The services the stacks create resources in, in the stacks' region only.
        {"Sid": "ManagePlatformServices", "Effect": "Allow", "Action": [f"{service}:*" for service in services],
         "Resource": ["*"], "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
        # The environment's budgets (named <project>-<environment>[-<team>]-monthly) and the
        # account's cost-allocation tag activation (components/observability/budget.py).
        {"Sid": "ManageEnvironmentBudgets", "Effect": "Allow", "Action": ["budgets:*"],
         "Resource": [f"arn:aws:budgets::{account_id}:budget/{project}-{environment}-*"]},
        {"Sid": "ActivateCostAllocationTags", "Effect": "Allow",
         "Action": ["ce:ListCostAllocationTags", "ce:UpdateCostAllocationTagsStatus"], "Resource": ["*"]},
        {"Sid": "ManageEnvironmentBuckets", "Effect": "Allow", "Action": ["s3:*"],
         "Resource": [f"arn:aws:s3:::{project}-{environment}-*"]},
        # IAM: roles of this environment only (they carry its tag from the stacks' provider).
        {"Sid": "CreateEnvironmentRoles", "Effect": "Allow", "Action": ["iam:CreateRole", "iam:TagRole"],
         "Resource": [role_arns], "Condition": {"StringEquals": {f"aws:RequestTag/{ENVIRONMENT_TAG}": environment}}},
        {"Sid": "ManageEnvironmentRoles", "Effect": "Allow", "Action": list(ROLE_ACTIONS), "Resource": [role_arns],
         "Condition": own_tag},
        {"Sid": "AttachListedManagedPolicies", "Effect": "Allow", "Action": ["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
         "Resource": [role_arns], "Condition": {
             **own_tag, "ArnEquals": {"iam:PolicyARN": attachable}}},
        {"Sid": "ReadManagedPolicies", "Effect": "Allow", "Action": ["iam:GetPolicy", "iam:GetPolicyVersion"],
         "Resource": ["arn:aws:iam::aws:policy/*"]},
        {"Sid": "CreateServiceLinkedRoles", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": ["*"], "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}}},
        # Never: another environment's resources, the bootstrap, other roles by chaining.
        {"Sid": "DenyOtherEnvironments", "Effect": "Deny", "Action": ["*"], "Resource": ["*"], "Condition": {
            "StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment},
            "Null": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": "false"}}},
        {"Sid": "DenyStateBucketSettings", "Effect": "Deny", "NotAction": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "DenyBootstrapState", "Effect": "Deny", "Action": ["s3:*"],
         "Resource": [f"{bucket_arn}/.pulumi/*/{config.project}/*"]},
        {"Sid": "DenyManagingBootstrapKeys", "Effect": "Deny", "NotAction": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [state_key_arn, secrets_key_arns[environment]]},
        {"Sid": "DenyBootstrapAliases", "Effect": "Deny", "Action": ["kms:*"],
         "Resource": [f"arn:aws:kms:*:{account_id}:alias/{project}-pulumi-*"]},
        {"Sid": "DenyCiIdentity", "Effect": "Deny", "Action": ["iam:*"],
         "Resource": [f"arn:aws:iam::{account_id}:role/{ci_role_pattern(project)}", oidc_provider_arn]},
        {"Sid": "DenyRoleChaining", "Effect": "Deny", "Action": ["sts:AssumeRole"], "Resource": ["*"]},
    ]
    if other_keys:
        statements.append({"Sid": "DenyOtherEnvironmentsSecrets", "Effect": "Deny", "Action": ["kms:*"], "Resource": other_keys})
    return {"Version": "2012-10-17", "Statement": statements}
