"""The bootstrap, planned offline like every stack: state bucket controls, who may assume the CI
roles (repository, pull request, environment, branch), and what each role may do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import PLATFORM_STACKS, ROOT, raw_config
from iam_eval import ALLOW, DENY, allowed_actions, evaluate
from plan import Plan, synthesize

from bootstrap import policies
from components.config import ConfigError

BOOTSTRAP = ROOT / "bootstrap"
REPO = "example-org/gpu-training"
SUB = "token.actions.githubusercontent.com:sub"
AUD = "token.actions.githubusercontent.com:aud"
ACCOUNT = "123456789012"
BUCKET = f"arn:aws:s3:::gpu-training-pulumi-state-{ACCOUNT}"


def plan_bootstrap(**overrides: Any) -> Plan:
    return synthesize("bootstrap", project_dir=BOOTSTRAP, overrides=overrides or None)


@pytest.fixture(scope="module")
def bootstrap() -> Plan:
    return plan_bootstrap()


def one(plan: Plan, type_token: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in plan.of_type(type_token) if name is None or r["name"] == name]
    assert len(found) == 1, f"{type_token} {name}: {len(found)} found"
    return found[0]


def role(plan: Plan, role_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trust policy, permissions policy) of the role named `role_name`."""
    record = next(r for r in plan.of_type("aws:iam/role:Role") if r["inputs"]["name"] == role_name)
    attached = one(plan, "aws:iam/rolePolicy:RolePolicy", record["name"])
    return json.loads(record["inputs"]["assumeRolePolicy"]), json.loads(attached["inputs"]["policy"])


def token(sub: str, aud: str = "sts.amazonaws.com") -> dict[str, str]:
    return {SUB: sub, AUD: aud}


# --- the state bucket and keys ------------------------------------------------------------------

def test_state_bucket_is_versioned_encrypted_private_tls_only_and_expires_old_versions(bootstrap):
    bucket = one(bootstrap, "aws:s3/bucket:Bucket")
    assert bucket["inputs"]["bucket"] == f"gpu-training-pulumi-state-{ACCOUNT}"
    assert bucket["inputs"]["forceDestroy"] is False
    assert one(bootstrap, "aws:s3/bucketVersioning:BucketVersioning")["inputs"]["versioningConfiguration"]["status"] == "Enabled"
    rule = one(bootstrap, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")["inputs"]["rules"][0]
    state_key = one(bootstrap, "aws:kms/key:Key", "state-state-key")
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms",
                                                          "kmsMasterKeyId": f"arn:aws:mock:us-east-1:{ACCOUNT}:key/state-state-key"}
    assert state_key["inputs"]["enableKeyRotation"] is True
    blocks = one(bootstrap, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")["inputs"]
    assert all(blocks[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert one(bootstrap, "aws:s3/bucketOwnershipControls:BucketOwnershipControls")["inputs"]["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    bucket_policy = json.loads(one(bootstrap, "aws:s3/bucketPolicy:BucketPolicy")["inputs"]["policy"])
    assert evaluate(bucket_policy, "s3:GetObject", f"{BUCKET}/.pulumi/meta.yaml", {"aws:SecureTransport": "false"}) == DENY
    rules = {r["id"]: r for r in one(bootstrap, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")["inputs"]["rules"]}
    assert rules["expire-old-state-versions"]["noncurrentVersionExpiration"] == {"noncurrentDays": 90}
    assert "expiration" not in rules["abort-incomplete-multipart-uploads"], "current state files never expire"


def test_one_secrets_provider_key_per_environment_with_its_alias(bootstrap):
    aliases = {r["inputs"]["name"] for r in bootstrap.of_type("aws:kms/alias:Alias")}
    assert aliases == {"alias/gpu-training-pulumi-state", *(f"alias/gpu-training-pulumi-secrets-{env}" for env in PLATFORM_STACKS)}
    assert bootstrap.outputs["secretsProviders"]["prod"] == "awskms://alias/gpu-training-pulumi-secrets-prod?region=us-east-1"
    assert bootstrap.outputs["backendUrl"] == f"s3://gpu-training-pulumi-state-{ACCOUNT}?region=us-east-1"


def test_github_oidc_provider_for_the_aws_audience(bootstrap):
    provider = one(bootstrap, "aws:iam/openIdConnectProvider:OpenIdConnectProvider")["inputs"]
    assert provider["url"] == "https://token.actions.githubusercontent.com"
    assert provider["clientIdLists"] == ["sts.amazonaws.com"]


def test_an_existing_oidc_provider_is_reused_not_created():
    existing = f"arn:aws:iam::{ACCOUNT}:oidc-provider/token.actions.githubusercontent.com"
    plan = plan_bootstrap(github={"repository": REPO, "oidcProviderArn": existing})
    assert not plan.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    trust, _ = role(plan, "gpu-training-ci-preview-dev")
    assert trust["Statement"][0]["Principal"] == {"Federated": existing}


# --- trust: who may assume which role -----------------------------------------------------------

PR = f"repo:{REPO}:pull_request:ref:refs/pull/42/merge"
TRUST_CASES = [
    # (role, sub, may assume)
    ("preview-dev", PR, True),
    ("preview-prod", PR, True),
    ("preview-dev", "repo:other-org/gpu-training:pull_request:ref:refs/pull/42/merge", False),   # another repository
    ("preview-dev", f"repo:{REPO}:ref:refs/heads/main:ref:refs/heads/main", False),                # a push, not a PR
    ("preview-dev", f"repo:{REPO}:environment:dev:ref:refs/heads/main", False),                   # a deploy job
    ("preview-dev", f"repo:{REPO}:pull_request", False),                                          # template not applied
    ("deploy-prod", f"repo:{REPO}:environment:prod:ref:refs/heads/main", True),
    ("deploy-prod", f"repo:{REPO}:environment:prod:ref:refs/heads/feature", False),               # unprotected branch
    ("deploy-prod", f"repo:{REPO}:environment:staging:ref:refs/heads/main", False),               # another environment
    ("deploy-prod", f"repo:{REPO}:environment:prod:ref:refs/pull/42/merge", False),
    ("deploy-prod", PR, False),                                                                   # a pull request
    ("deploy-dev", f"repo:{REPO}:environment:dev:ref:refs/heads/main", True),
    ("deploy-dev", f"repo:{REPO}:environment:prod:ref:refs/heads/main", False),
    ("deploy-dev", "repo:other-org/gpu-training:environment:dev:ref:refs/heads/main", False),
]


@pytest.mark.parametrize(("role_suffix", "sub", "may_assume"), TRUST_CASES)
def test_trust_names_repository_pull_request_environment_and_branch(bootstrap, role_suffix, sub, may_assume):
    trust, _ = role(bootstrap, f"gpu-training-ci-{role_suffix}")
    outcome = evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(sub))
    assert (outcome == ALLOW) is may_assume, f"{role_suffix} with sub {sub}: {outcome}"


def test_trust_needs_the_aws_audience_and_only_web_identity(bootstrap):
    trust, _ = role(bootstrap, "gpu-training-ci-deploy-prod")
    good = f"repo:{REPO}:environment:prod:ref:refs/heads/main"
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(good, aud="https://github.com/example-org")) != ALLOW
    assert evaluate(trust, "sts:AssumeRole", None, token(good)) != ALLOW
    assert trust["Statement"][0]["Principal"]["Federated"].endswith("ci-github")


def test_default_subject_template_and_immutable_ids():
    plan = plan_bootstrap(github={"repository": REPO, "subjectClaims": "default",
                                  "immutableIds": {"owner": 123456, "repository": 789012}})
    trust, _ = role(plan, "gpu-training-ci-deploy-prod")
    assert trust["Statement"][0]["Condition"]["StringEquals"][SUB] == \
        "repo:example-org@123456/gpu-training@789012:environment:prod"
    trust, _ = role(plan, "gpu-training-ci-preview-staging")
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None,
                    token("repo:example-org@123456/gpu-training@789012:pull_request")) == ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:pull_request")) != ALLOW


# --- permissions --------------------------------------------------------------------------------

READ_VERBS = ("Get", "List", "Describe", "Decrypt")


@pytest.mark.parametrize("env", PLATFORM_STACKS)
def test_preview_role_has_no_write_action(bootstrap, env):
    _, permissions = role(bootstrap, f"gpu-training-ci-preview-{env}")
    for action in allowed_actions(permissions):
        verb = action.partition(":")[2]
        assert "*" not in action and verb.startswith(READ_VERBS), f"preview-{env} may {action}"
    state = f"{BUCKET}/.pulumi/stacks/gpu-training/{env}.json"
    assert evaluate(permissions, "s3:GetObject", state) == ALLOW
    for action, resource in [("s3:PutObject", state), ("s3:DeleteObject", state),
                             ("s3:PutObject", f"{BUCKET}/.pulumi/locks/organization/gpu-training/{env}/x.json"),
                             ("kms:Encrypt", "*"), ("iam:PassRole", "*"), ("ec2:RunInstances", "*"),
                             ("secretsmanager:GetSecretValue", "*")]:
        assert evaluate(permissions, action, resource) != ALLOW, f"preview-{env} may {action} on {resource}"


def test_preview_role_reads_only_its_environments_state(bootstrap):
    _, permissions = role(bootstrap, "gpu-training-ci-preview-dev")
    stacks = f"{BUCKET}/.pulumi/stacks/gpu-training"
    assert evaluate(permissions, "s3:GetObject", f"{stacks}/team-vision-dev.json") == ALLOW
    assert evaluate(permissions, "s3:GetObject", f"{stacks}/prod.json") != ALLOW
    assert evaluate(permissions, "s3:GetObject", f"{stacks}/team-vision-prod.json") != ALLOW
    assert evaluate(permissions, "s3:GetObject", f"{BUCKET}/.pulumi/stacks/gpu-training-bootstrap/bootstrap.json") != ALLOW


def key_arn(name: str) -> str:
    return f"arn:aws:mock:us-east-1:{ACCOUNT}:key/{name}"


DEPLOY_DEV_CASES = [
    # (action, resource, request context, expected) for the dev deploy role
    ("s3:PutObject", f"{BUCKET}/.pulumi/stacks/gpu-training/dev.json", {}, ALLOW),
    ("s3:PutObject", f"{BUCKET}/.pulumi/stacks/gpu-training/team-vision-dev.json.gz", {}, ALLOW),
    ("s3:PutObject", f"{BUCKET}/.pulumi/locks/organization/gpu-training/dev/lock.json", {}, ALLOW),
    ("s3:PutObject", f"{BUCKET}/.pulumi/history/gpu-training/dev/dev-1.history.json", {}, ALLOW),
    ("s3:PutObject", f"{BUCKET}/.pulumi/stacks/gpu-training/prod.json", {}, "not allowed"),
    ("s3:PutObject", f"{BUCKET}/.pulumi/stacks/gpu-training-bootstrap/bootstrap.json", {}, DENY),
    ("s3:DeleteObject", f"{BUCKET}/.pulumi/locks/organization/gpu-training-bootstrap/bootstrap/x.json", {}, DENY),
    ("s3:PutBucketPolicy", BUCKET, {}, DENY),
    ("s3:PutLifecycleConfiguration", BUCKET, {}, DENY),
    ("s3:DeleteBucket", BUCKET, {}, DENY),
    ("s3:PutBucketVersioning", BUCKET, {}, DENY),
    ("s3:CreateBucket", "arn:aws:s3:::gpu-training-dev-artifacts-1", {"aws:RequestedRegion": "us-east-1"}, ALLOW),
    ("s3:DeleteBucket", "arn:aws:s3:::gpu-training-prod-artifacts-1", {}, "not allowed"),
    ("kms:Decrypt", key_arn("state-secrets-dev"), {}, ALLOW),
    ("kms:Decrypt", key_arn("state-secrets-prod"), {"aws:RequestedRegion": "us-east-1"}, DENY),
    ("kms:ScheduleKeyDeletion", key_arn("state-state-key"), {"aws:RequestedRegion": "us-east-1"}, DENY),
    ("kms:PutKeyPolicy", key_arn("state-secrets-dev"), {"aws:RequestedRegion": "us-east-1"}, DENY),
    ("kms:DeleteAlias", f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/gpu-training-pulumi-secrets-dev",
     {"aws:RequestedRegion": "us-east-1"}, DENY),
    ("iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev", {}, DENY),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-preview-dev",
     {"aws:ResourceTag/environment": "dev"}, DENY),
    ("iam:DeleteOpenIDConnectProvider", "arn:aws:mock:us-east-1:123456789012:openidconnectprovider/ci-github", {}, DENY),
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1", {"aws:RequestTag/environment": "dev"}, ALLOW),
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1", {"aws:RequestTag/environment": "prod"}, "not allowed"),
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1", {}, "not allowed"),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1", {"aws:ResourceTag/environment": "dev"}, ALLOW),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-2", {"aws:ResourceTag/environment": "prod"}, DENY),
    ("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1",
     {"aws:ResourceTag/environment": "dev", "iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}, ALLOW),
    ("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1",
     {"aws:ResourceTag/environment": "dev", "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}, "not allowed"),
    ("ec2:CreateVpc", "*", {"aws:RequestedRegion": "us-east-1"}, ALLOW),
    ("ec2:CreateVpc", "*", {"aws:RequestedRegion": "eu-west-1"}, "not allowed"),
    ("eks:DeleteCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-prod",
     {"aws:RequestedRegion": "us-east-1", "aws:ResourceTag/environment": "prod"}, DENY),
    ("eks:UpdateNodegroupConfig", f"arn:aws:eks:us-east-1:{ACCOUNT}:nodegroup/gpu-training-dev/gpu/1",
     {"aws:RequestedRegion": "us-east-1", "aws:ResourceTag/environment": "dev"}, ALLOW),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/anything", {}, DENY),
    ("organizations:LeaveOrganization", "*", {}, "not allowed"),
]


@pytest.mark.parametrize(("action", "resource", "context", "expected"), DEPLOY_DEV_CASES)
def test_deploy_role_manages_its_environment_and_never_the_bootstrap(bootstrap, action, resource, context, expected):
    _, permissions = role(bootstrap, "gpu-training-ci-deploy-dev")
    outcome = evaluate(permissions, action, resource, context)
    if expected == "not allowed":
        assert outcome != ALLOW, f"{action} on {resource}: {outcome}"
    else:
        assert outcome == expected, f"{action} on {resource}: {outcome}"


# --- the stacks and the deploy role agree -------------------------------------------------------

@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_every_resource_of_every_stack_is_in_a_service_the_deploy_role_manages(plan_of, stack):
    plan = plan_of(stack)
    unmanaged = sorted({r["type"] for r in plan.resources if r["type"].startswith("aws:")
                        and not any(r["type"].startswith(prefix) for prefix in policies.MANAGED_SERVICES)})
    assert not unmanaged, f"add these to bootstrap/policies.py MANAGED_SERVICES (and check the deploy role): {unmanaged}"
    attached = {r["inputs"]["policyArn"] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    listed = {f"arn:aws:iam::aws:policy/{name}" for name in policies.ATTACHABLE_MANAGED_POLICIES}
    assert attached <= listed, f"the deploy role may not attach {sorted(attached - listed)}"
    # The deploy role's IAM rights rest on this tag, which the stacks' provider puts on every role.
    provider = one(plan, "pulumi:providers:aws")
    tags = json.loads(provider["inputs"]["defaultTags"])["tags"]
    assert tags[policies.ENVIRONMENT_TAG] == stack.rsplit("-", 1)[-1]


@pytest.mark.parametrize("env", PLATFORM_STACKS)
def test_platform_stacks_give_the_ci_roles_cluster_access(env):
    cluster = raw_config(env)["gpu-training:cluster"]
    admin_roles = {arn.rsplit("/", 1)[-1] for arn in cluster["adminPrincipals"]}
    readers = {arn.rsplit("/", 1)[-1] for arn in cluster["readOnlyPrincipals"]}
    assert policies.deploy_role_name("gpu-training", env) in admin_roles
    assert policies.preview_role_name("gpu-training", env) in readers


# --- bad configuration --------------------------------------------------------------------------

BAD_CONFIG = [
    ({"github": {"repository": "gpu-training"}}, "gpu-training-bootstrap:github.repository", "OWNER/REPO"),
    ({"github": {"repository": REPO, "subjectClaims": "custom"}}, "gpu-training-bootstrap:github.subjectClaims", "repo-context-ref"),
    ({"github": {"repository": REPO, "immutableIds": {"owner": 5}}}, "gpu-training-bootstrap:github.immutableIds", "both"),
    ({"github": {"repository": REPO, "oidcProviderArn": "arn:aws:iam::1:oidc-provider/x"}},
     "gpu-training-bootstrap:github.oidcProviderArn", "GitHub OIDC provider"),
    ({"github": {"repository": REPO, "repo": "x"}}, "gpu-training-bootstrap:github.repo", "unknown key"),
    ({"environments": {"qa": {}}}, "gpu-training-bootstrap:environments.qa", "not an environment"),
    ({"environments": {}}, "gpu-training-bootstrap:environments", "names no environment"),
    ({"environments": {"prod": {"deployBranch": "release/*"}}}, "gpu-training-bootstrap:environments.prod.deployBranch", "branch"),
    ({"environments": {"prod": {"githubEnvironment": "prod:eu"}}}, "gpu-training-bootstrap:environments.prod.githubEnvironment", "environment"),
    ({"state": {"versionRetentionDays": 0}}, "gpu-training-bootstrap:state.versionRetentionDays", "between 1 and 3650"),
    ({"region": "us-east"}, "gpu-training-bootstrap:region", "region"),
    ({"stackProject": "gpu-training"}, "gpu-training-bootstrap:stackProject", "did you mean 'stacksProject'"),
]


@pytest.mark.parametrize(("overrides", "key", "says"), BAD_CONFIG)
def test_bad_bootstrap_config_names_key_and_fix_before_any_resource(overrides, key, says):
    with pytest.raises(ConfigError) as raised:
        plan_bootstrap(**overrides)
    message = str(raised.value)
    assert any(key in line and says in line and "Fix:" in line for line in message.splitlines()), message
