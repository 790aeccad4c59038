"""The bootstrap, planned offline like every stack: state bucket controls, who may assume the CI
roles (repository, pull request, environment, branch), and what each role may do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from iam_eval import ALLOW, DENY, allowed_actions, evaluate, evaluate_bounded, glob_match
from stack_configs import ENVIRONMENT_STACKS, PLATFORM_STACKS, ROOT, environment_of, raw_config, region_of

from bootstrap import policies
from bootstrap.config import load_bootstrap_config
from components.config import ConfigError
from components.observability.budget import COST_ALLOCATION_TAG_KEYS
from offline.plan import GET_PARAMETER, INVOKE_ANSWERS, Plan, synthesize

BOOTSTRAP = ROOT / "bootstrap"
REPO = "example-org/gpu-training"
SUB = "token.actions.githubusercontent.com:sub"
AUD = "token.actions.githubusercontent.com:aud"
ACCOUNT = "123456789012"
BUCKET = f"arn:aws:s3:::gpu-training-pulumi-state-{ACCOUNT}"


def plan_bootstrap(**overrides: Any) -> Plan:
    return synthesize("bootstrap", project_dir=BOOTSTRAP, overrides=overrides or None)


@pytest.fixture(scope="module")
def bootstrap(plan_of) -> Plan:
    return plan_of("bootstrap")


def one(plan: Plan, type_token: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in plan.of_type(type_token) if name is None or r["name"] == name]
    assert len(found) == 1, f"{type_token} {name}: {len(found)} found"
    return found[0]


def role(plan: Plan, role_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(trust policy, permissions) of the role named `role_name`: its inline policy and the
    customer managed policies attached to it, as one document (IAM evaluates them together)."""
    record = next(r for r in plan.of_type("aws:iam/role:Role") if r["inputs"]["name"] == role_name)
    inline = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", record["name"])["inputs"]["policy"])
    return json.loads(record["inputs"]["assumeRolePolicy"]), {
        **inline, "Statement": [*inline["Statement"], *(s for d in attached_policies(plan, role_name) for s in d["Statement"])]}


def attached_policies(plan: Plan, role_name: str) -> list[dict[str, Any]]:
    """The documents of the bootstrap's own managed policies attached to the role (the mock ARN
    ends in the policy's resource name)."""
    arns = {a["inputs"]["policyArn"] for a in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if a["inputs"]["role"] == role_name}
    return [json.loads(p["inputs"]["policy"]) for p in plan.of_type("aws:iam/policy:Policy")
            if any(arn.endswith(f"/{p['name']}") for arn in arns)]


def token(sub: str, aud: str = "sts.amazonaws.com") -> dict[str, str]:
    return {SUB: sub, AUD: aud}


# --- the state bucket and keys ------------------------------------------------------------------

def test_state_bucket_is_versioned_encrypted_private_tls_only_and_expires_old_versions(bootstrap):
    bucket = one(bootstrap, "aws:s3/bucket:Bucket", "state-bucket")
    assert bucket["inputs"]["bucket"] == f"gpu-training-pulumi-state-{ACCOUNT}"
    assert bucket["inputs"]["forceDestroy"] is False
    assert one(bootstrap, "aws:s3/bucketVersioning:BucketVersioning", "state-bucket")["inputs"]["versioningConfiguration"]["status"] == "Enabled"
    rule = one(bootstrap, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "state-bucket")["inputs"]["rules"][0]
    state_key = one(bootstrap, "aws:kms/key:Key", "state-state-key")
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms",
                                                          "kmsMasterKeyId": f"arn:aws:mock:us-east-1:{ACCOUNT}:key/state-state-key"}
    assert state_key["inputs"]["enableKeyRotation"] is True
    blocks = one(bootstrap, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "state-bucket")["inputs"]
    assert all(blocks[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert one(bootstrap, "aws:s3/bucketOwnershipControls:BucketOwnershipControls", "state-bucket")["inputs"]["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    bucket_policy = json.loads(one(bootstrap, "aws:s3/bucketPolicy:BucketPolicy", "state-bucket")["inputs"]["policy"])
    assert evaluate(bucket_policy, "s3:GetObject", f"{BUCKET}/.pulumi/meta.yaml", {"aws:SecureTransport": "false"}) == DENY
    rules = {r["id"]: r for r in one(bootstrap, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "state-bucket")["inputs"]["rules"]}
    assert rules["expire-old-state-versions"]["noncurrentVersionExpiration"] == {"noncurrentDays": 90}
    assert "expiration" not in rules["abort-incomplete-multipart-uploads"], "current state files never expire"


def test_every_request_to_the_state_bucket_is_logged_into_a_log_bucket_only_s3_logging_writes(bootstrap):
    """S3 server access logging (S3 User Guide, "Enabling Amazon S3 server access logging"): the
    target bucket admits logging.s3.amazonaws.com by bucket policy, for this source bucket and
    account only, and is SSE-S3 (log delivery cannot write SSE-KMS by default) with ACLs off."""
    logging = one(bootstrap, "aws:s3/bucketLogging:BucketLogging", "state-bucket")["inputs"]
    assert logging["bucket"] == "state-bucket-id" and logging["targetBucket"] == "state-access-logs-id"
    assert logging["targetPrefix"] == "state/"
    log_bucket = one(bootstrap, "aws:s3/bucket:Bucket", "state-access-logs")["inputs"]
    assert log_bucket["bucket"] == f"gpu-training-pulumi-state-logs-{ACCOUNT}" and log_bucket["forceDestroy"] is False
    encryption = one(bootstrap, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                     "state-access-logs")["inputs"]["rules"][0]["applyServerSideEncryptionByDefault"]
    assert encryption == {"sseAlgorithm": "AES256"}
    assert one(bootstrap, "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
               "state-access-logs")["inputs"]["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    policy = json.loads(one(bootstrap, "aws:s3/bucketPolicy:BucketPolicy", "state-access-logs")["inputs"]["policy"])
    logs = f"arn:aws:s3:::gpu-training-pulumi-state-logs-{ACCOUNT}/state/x"
    delivery = {"aws:SourceArn": BUCKET, "aws:SourceAccount": ACCOUNT, "aws:SecureTransport": "true"}
    assert evaluate(policy, "s3:PutObject", logs, delivery) == ALLOW
    assert evaluate(policy, "s3:PutObject", logs, {**delivery, "aws:SourceArn": "arn:aws:s3:::someone-else"}) != ALLOW
    assert evaluate(policy, "s3:PutObject", logs, {**delivery, "aws:SourceAccount": "999999999999"}) != ALLOW
    statement = next(s for s in policy["Statement"] if s["Effect"] == "Allow")
    assert statement["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    rules = {r["id"]: r for r in one(bootstrap, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                                     "state-access-logs")["inputs"]["rules"]}
    assert rules["expire-access-logs"]["expiration"] == {"days": 365}
    shorter = plan_bootstrap(state={"versionRetentionDays": 90, "accessLogRetentionDays": 30})
    rules = {r["id"]: r for r in one(shorter, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                                     "state-access-logs")["inputs"]["rules"]}
    assert rules["expire-access-logs"]["expiration"] == {"days": 30}


def test_one_secrets_provider_key_per_environment_with_its_alias(bootstrap):
    aliases = {r["inputs"]["name"] for r in bootstrap.of_type("aws:kms/alias:Alias")}
    assert aliases == {"alias/gpu-training-pulumi-state", *(f"alias/gpu-training-pulumi-secrets-{env}" for env in ENVIRONMENT_STACKS)}
    assert bootstrap.outputs["secretsProviders"]["prod"] == "awskms://alias/gpu-training-pulumi-secrets-prod?region=us-east-1"
    assert bootstrap.outputs["backendUrl"] == f"s3://gpu-training-pulumi-state-{ACCOUNT}?region=us-east-1"


def test_github_oidc_provider_for_the_aws_audience(bootstrap):
    provider = one(bootstrap, "aws:iam/openIdConnectProvider:OpenIdConnectProvider")["inputs"]
    assert provider["url"] == "https://token.actions.githubusercontent.com"
    assert provider["clientIdLists"] == ["sts.amazonaws.com"]


def test_an_existing_oidc_provider_is_reused_not_created():
    existing = f"arn:aws:iam::{ACCOUNT}:oidc-provider/token.actions.githubusercontent.com"
    # The stack file's member is of its example account, not this provider's (refused: members and
    # the provider are the bootstrap's one account, tests/test_team_deploy_roles.py).
    plan = plan_bootstrap(github={"repository": REPO, "oidcProviderArn": existing},
                          teams={"vision": {"repository": "example-org/vision-training"}})
    assert not plan.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    trust, _ = role(plan, "gpu-training-ci-preview-dev")
    assert trust["Statement"][0]["Principal"] == {"Federated": existing}


# --- trust: who may assume which role -----------------------------------------------------------

PR = f"repo:{REPO}:pull_request:ref:refs/pull/42/merge"
MAIN = f"repo:{REPO}:ref:refs/heads/main:ref:refs/heads/main"   # a job without environment on main
TRUST_CASES = [
    # (role, sub, may assume)
    ("preview-dev", PR, True),
    # A pull request runs its own workflow file: it never gets staging's or prod's secrets.
    ("preview-staging", PR, False),
    ("preview-prod", PR, False),
    ("preview-dev", MAIN, True),                                                                   # deploy.yml's preview
    ("preview-prod", MAIN, True),
    ("preview-prod", f"repo:{REPO}:ref:refs/heads/feature:ref:refs/heads/feature", False),         # another branch
    ("preview-prod", f"repo:{REPO}:ref:refs/heads/main*:ref:refs/heads/main", False),
    ("preview-dev", "repo:other-org/gpu-training:pull_request:ref:refs/pull/42/merge", False),   # another repository
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
    # The trainer image job: an environment of its own on main; the deploy job's is not enough.
    ("image-dev", f"repo:{REPO}:environment:dev-image:ref:refs/heads/main", True),
    ("image-dev", f"repo:{REPO}:environment:dev:ref:refs/heads/main", False),                    # the deploy job
    ("deploy-dev", f"repo:{REPO}:environment:dev-image:ref:refs/heads/main", False),              # the image job
    ("image-dev", f"repo:{REPO}:environment:dev-image:ref:refs/heads/feature", False),
    ("image-dev", f"repo:{REPO}:environment:staging:ref:refs/heads/main", False),
    ("image-dev", MAIN, False),                                                                   # no environment
    ("image-dev", PR, False),
    ("image-dev", "repo:other-org/gpu-training:environment:dev-image:ref:refs/heads/main", False),
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
    trust, _ = role(plan, "gpu-training-ci-preview-dev")
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None,
                    token("repo:example-org@123456/gpu-training@789012:pull_request")) == ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:pull_request")) != ALLOW
    trust, _ = role(plan, "gpu-training-ci-preview-staging")
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None,
                    token("repo:example-org@123456/gpu-training@789012:pull_request")) != ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None,
                    token("repo:example-org@123456/gpu-training@789012:ref:refs/heads/main")) == ALLOW


# --- permissions --------------------------------------------------------------------------------

READ_VERBS = ("Get", "List", "Describe", "Decrypt")


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
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


def test_the_invokes_the_program_makes_are_the_ones_the_roles_are_written_for():
    """One list, bootstrap/policies/actions.py PROGRAM_INVOKES: every invoke the offline plan answers (and
    so every invoke the program makes: an unknown one fails the plan) is in it."""
    assert set(INVOKE_ANSWERS) | {GET_PARAMETER} == set(policies.PROGRAM_INVOKES)


def contract_parameter(stack: str, region: str | None = None) -> str:
    return f"arn:aws:ssm:{region or region_of(stack)}:{ACCOUNT}:parameter/gpu-training/{stack}/platform-contract"


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
def test_deploy_role_publishes_and_preview_role_reads_only_its_environments_contracts(bootstrap, env):
    """The platform's contract parameter (components/platform.py _publish_contract) by its name in its
    stack's region; GetParameter is the program's one invoke not granted on `*` (PROGRAM_INVOKES)."""
    assert policies.PROGRAM_INVOKES[GET_PARAMETER] == ()
    _, deploy = role(bootstrap, f"gpu-training-ci-deploy-{env}")
    _, preview = role(bootstrap, f"gpu-training-ci-preview-{env}")
    region = {"aws:RequestedRegion": "us-east-1"}
    for stack in PLATFORM_STACKS:
        own = environment_of(stack) == env
        arn = contract_parameter(stack)
        for action in ("ssm:PutParameter", "ssm:DeleteParameter", "ssm:GetParameter", "ssm:AddTagsToResource"):
            assert (evaluate(deploy, action, arn, {"aws:RequestedRegion": region_of(stack)}) == ALLOW) == own, (action, arn)
        assert (evaluate(preview, "ssm:GetParameter", arn, region) == ALLOW) == own, arn
        assert evaluate(preview, "ssm:PutParameter", arn, region) != ALLOW
    # Not another parameter, nor the whole service (SendCommand reaches instances).
    other = f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/gpu-training/{env}/token"
    for document in (deploy, preview):
        assert evaluate(document, "ssm:GetParameter", other, region) != ALLOW
        assert evaluate(document, "ssm:SendCommand", f"arn:aws:ssm:us-east-1:{ACCOUNT}:document/AWS-RunShellScript",
                        region) != ALLOW


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
def test_preview_and_deploy_roles_may_make_every_invoke_the_program_makes(bootstrap, env):
    """`pulumi preview` runs the program: e.g. the zone lookups by AZ ID call ec2:DescribeAvailabilityZones."""
    actions = {a for actions in policies.PROGRAM_INVOKES.values() for a in actions}
    assert "ec2:DescribeAvailabilityZones" in actions
    for kind in ("preview", "deploy"):
        _, permissions = role(bootstrap, f"gpu-training-ci-{kind}-{env}")
        for action in actions:
            assert evaluate(permissions, action, "*", {"aws:RequestedRegion": "us-east-1"}) == ALLOW, f"{kind}-{env}: {action}"


def key_arn(name: str) -> str:
    return f"arn:aws:mock:us-east-1:{ACCOUNT}:key/{name}"


ROLE = f"arn:aws:iam::{ACCOUNT}:role/cluster-role-1"
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-boundary-dev"
DEV_ROLE = {"aws:ResourceTag/environment": "dev"}
BOUNDED_DEV_ROLE = {**DEV_ROLE, "iam:PermissionsBoundary": BOUNDARY}
IN_REGION = {"aws:RequestedRegion": "us-east-1"}
OURS = {**IN_REGION, "aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": "dev"}
EC2 = f"arn:aws:ec2:us-east-1:{ACCOUNT}"
FSX = f"arn:aws:fsx:us-east-1:{ACCOUNT}"
SNS = f"arn:aws:sns:us-east-1:{ACCOUNT}"
LOGS = f"arn:aws:logs:us-east-1:{ACCOUNT}"
ALARMS = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm"
ASG = f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:6d1f2a9e-0000-4000-8000-000000000000"
DEV_NODE_GROUP_ASG = "aws:ResourceTag/k8s.io/cluster-autoscaler/gpu-training-dev"
DEV_SCOPE = f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-ci-deploy-dev-project-scope"
DEV_GUARD = f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-ci-deploy-dev-guard"

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
    ("s3:CreateBucket", "arn:aws:s3:::gpu-training-dev-artifacts-1", IN_REGION, ALLOW),
    ("s3:DeleteBucket", "arn:aws:s3:::gpu-training-prod-artifacts-1", {}, "not allowed"),
    ("kms:Decrypt", key_arn("state-secrets-dev"), {}, ALLOW),
    ("kms:Decrypt", key_arn("state-secrets-prod"), IN_REGION, DENY),
    ("kms:ScheduleKeyDeletion", key_arn("state-state-key"), IN_REGION, DENY),
    ("kms:PutKeyPolicy", key_arn("state-secrets-dev"), IN_REGION, DENY),
    ("kms:DeleteAlias", f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/gpu-training-pulumi-secrets-dev", IN_REGION, DENY),
    ("iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev", BOUNDED_DEV_ROLE, DENY),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-preview-dev", BOUNDED_DEV_ROLE, DENY),
    ("iam:DeleteOpenIDConnectProvider", "arn:aws:mock:us-east-1:123456789012:openidconnectprovider/ci-github", {}, DENY),
    ("iam:CreatePolicyVersion", BOUNDARY, {}, DENY),                                  # widen the boundary itself
    ("iam:DeletePolicy", BOUNDARY, {}, DENY),
    # Roles: created, changed and given permissions only with the environment's boundary on them.
    ("iam:CreateRole", ROLE, {"aws:RequestTag/environment": "dev", "iam:PermissionsBoundary": BOUNDARY}, ALLOW),
    ("iam:CreateRole", ROLE, {"aws:RequestTag/environment": "dev"}, "not allowed"),          # no boundary
    ("iam:CreateRole", ROLE, {"aws:RequestTag/environment": "dev",
                              "iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-boundary-prod"},
     "not allowed"),
    ("iam:CreateRole", ROLE, {"aws:RequestTag/environment": "prod", "iam:PermissionsBoundary": BOUNDARY}, DENY),
    ("iam:CreateRole", ROLE, {}, "not allowed"),
    ("iam:PutRolePolicy", ROLE, BOUNDED_DEV_ROLE, ALLOW),
    ("iam:PutRolePolicy", ROLE, DEV_ROLE, "not allowed"),                                     # a role without it
    ("iam:UpdateAssumeRolePolicy", ROLE, DEV_ROLE, "not allowed"),
    ("iam:UpdateAssumeRolePolicy", ROLE, BOUNDED_DEV_ROLE, ALLOW),
    ("iam:DeleteRolePolicy", ROLE, BOUNDED_DEV_ROLE, ALLOW),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/cluster-role-2", {"aws:ResourceTag/environment": "prod"}, DENY),
    ("iam:DeleteRolePermissionsBoundary", ROLE, BOUNDED_DEV_ROLE, DENY),                      # remove the boundary
    ("iam:PutRolePermissionsBoundary", ROLE, {**DEV_ROLE, "iam:PermissionsBoundary": "arn:aws:iam::aws:policy/AdministratorAccess"}, DENY),
    ("iam:AttachRolePolicy", ROLE,
     {**BOUNDED_DEV_ROLE, "iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}, ALLOW),
    ("iam:AttachRolePolicy", ROLE,
     {**DEV_ROLE, "iam:PolicyARN": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}, "not allowed"),
    ("iam:AttachRolePolicy", ROLE,
     {**BOUNDED_DEV_ROLE, "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}, "not allowed"),
    ("iam:PassRole", ROLE, DEV_ROLE, ALLOW),
    # Tagging: only roles already the environment's; never into another environment.
    ("iam:TagRole", f"arn:aws:iam::{ACCOUNT}:role/ml-platform-admin", {"aws:RequestTag/environment": "dev"}, "not allowed"),
    ("iam:TagRole", ROLE, {**DEV_ROLE, "aws:RequestTag/environment": "prod"}, DENY),
    ("iam:TagRole", ROLE, {**DEV_ROLE, "aws:RequestTag/team": "vision"}, ALLOW),
    ("ec2:CreateTags", f"{EC2}:vpc/vpc-1", {**OURS, "aws:RequestTag/environment": "prod"}, DENY),
    # A whole service on its ARNs of the region only, not on `*`.
    ("ec2:CreateVpc", f"arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/*", IN_REGION, ALLOW),
    ("ec2:CreateVpc", f"arn:aws:ec2:eu-west-1:{ACCOUNT}:vpc/*", {"aws:RequestedRegion": "eu-west-1"}, "not allowed"),
    ("kms:CreateKey", "*", IN_REGION, ALLOW),
    ("eks:DeleteCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-prod",
     {**IN_REGION, "aws:ResourceTag/environment": "prod", "aws:ResourceTag/project": "gpu-training"}, DENY),
    ("eks:UpdateNodegroupConfig", f"arn:aws:eks:us-east-1:{ACCOUNT}:nodegroup/gpu-training-dev/gpu/1", OURS, ALLOW),
    # Other projects' resources in the account: out of reach unless they carry the project tag.
    ("eks:DeleteCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/other", IN_REGION, DENY),
    ("eks:UpdateNodegroupConfig", f"arn:aws:eks:us-east-1:{ACCOUNT}:nodegroup/other/gpu/1",
     {**IN_REGION, "aws:ResourceTag/project": "other"}, DENY),
    ("ec2:DeleteVpc", f"{EC2}:vpc/vpc-other", IN_REGION, DENY),
    ("ec2:DeleteVpc", f"{EC2}:vpc/vpc-1", OURS, ALLOW),
    ("ec2:TerminateInstances", f"{EC2}:instance/i-other", IN_REGION, DENY),
    ("ec2:DescribeVpcs", "*", IN_REGION, ALLOW),
    ("ec2:CreateSubnet", f"{EC2}:subnet/*", {**IN_REGION, "aws:RequestTag/environment": "dev"}, ALLOW),
    # Tag-on-create carries ec2:CreateAction; tagging another project's resource does not.
    ("ec2:CreateTags", f"{EC2}:subnet/subnet-1", {**IN_REGION, "ec2:CreateAction": "CreateSubnet"}, ALLOW),
    ("ec2:CreateTags", f"{EC2}:vpc/vpc-other", {**IN_REGION, "aws:RequestTag/project": "gpu-training"}, DENY),
    # The VPC's default security group is created untagged by EC2 and adopted by the stack.
    ("ec2:CreateTags", f"{EC2}:security-group/sg-default", {**IN_REGION, "aws:RequestTag/project": "gpu-training"}, ALLOW),
    ("kms:ScheduleKeyDeletion", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/other", IN_REGION, DENY),
    ("kms:ScheduleKeyDeletion", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/ours", OURS, ALLOW),
    ("kms:CreateKey", "*", IN_REGION, ALLOW),
    ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:other/db-AbC123", IN_REGION, DENY),
    ("secretsmanager:PutSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/dev/x-AbC123",
     OURS, ALLOW),
    ("elasticfilesystem:DeleteFileSystem", f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/fs-other",
     IN_REGION, DENY),
    ("ecr:DeleteRepository", f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/other", IN_REGION, DENY),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/anything", {}, DENY),
    # FSx, SNS and EC2 snapshots and images: the project's tag, as above.
    ("fsx:DeleteFileSystem", f"{FSX}:file-system/fs-other", IN_REGION, DENY),
    ("fsx:DeleteFileSystem", f"{FSX}:file-system/fs-1", OURS, ALLOW),
    ("fsx:DeleteDataRepositoryAssociation", f"{FSX}:association/fs-other/dra-1", IN_REGION, DENY),
    ("fsx:CreateFileSystem", f"{FSX}:file-system/*", IN_REGION, ALLOW),
    ("fsx:CreateDataRepositoryAssociation", f"{FSX}:association/fs-1/*", IN_REGION, ALLOW),   # the new association
    ("fsx:CreateDataRepositoryAssociation", f"{FSX}:file-system/fs-1", OURS, ALLOW),
    ("fsx:CreateDataRepositoryAssociation", f"{FSX}:file-system/fs-other", IN_REGION, DENY),  # export its files
    ("sns:Subscribe", f"{SNS}:billing-alerts", IN_REGION, DENY),
    ("sns:Subscribe", f"{SNS}:gpu-training-dev-training-alerts", OURS, ALLOW),
    ("sns:CreateTopic", f"{SNS}:gpu-training-dev-training-alerts", IN_REGION, ALLOW),
    ("sns:CreateTopic", f"{SNS}:billing-alerts", IN_REGION, DENY),
    # Tag-on-create goes through sns:TagResource: only on the environment's topic names.
    ("sns:TagResource", f"{SNS}:billing-alerts", {**IN_REGION, "aws:RequestTag/project": "gpu-training"}, DENY),
    ("ec2:DeleteSnapshot", "arn:aws:ec2:us-east-1::snapshot/snap-other", IN_REGION, DENY),
    ("ec2:DeleteSnapshot", "arn:aws:ec2:us-east-1::snapshot/snap-1", OURS, ALLOW),
    ("ec2:DeregisterImage", "arn:aws:ec2:us-east-1::image/ami-other", IN_REGION, DENY),
    # Sharing a snapshot or an image: never, not even the project's own.
    ("ec2:ModifySnapshotAttribute", "arn:aws:ec2:us-east-1::snapshot/snap-other", IN_REGION, DENY),
    ("ec2:ModifySnapshotAttribute", "arn:aws:ec2:us-east-1::snapshot/snap-1", OURS, DENY),
    ("ec2:ModifyImageAttribute", "arn:aws:ec2:us-east-1::image/ami-1", OURS, DENY),
    # Peering: only between the environment's own VPCs (MultiKueue), in the account and its regions.
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc/vpc-other", IN_REGION, DENY),               # an untagged VPC
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc/vpc-1", OURS, ALLOW),                      # the requester VPC
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc/vpc-1",
     {**IN_REGION, "aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": "prod"}, DENY),
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc/vpc-1", {**IN_REGION, "aws:ResourceTag/environment": "dev"}, DENY),
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc-peering-connection/*",                     # the new connection
     {**IN_REGION, "aws:RequestTag/environment": "dev", "aws:RequestTag/project": "gpu-training",
      "ec2:AccepterVpc": f"{EC2}:vpc/vpc-2", "ec2:RequesterVpc": f"{EC2}:vpc/vpc-1"}, ALLOW),
    ("ec2:CreateVpcPeeringConnection", f"{EC2}:vpc-peering-connection/*",                     # to another account
     {**IN_REGION, "ec2:AccepterVpc": "arn:aws:ec2:us-east-1:999999999999:vpc/vpc-9", "ec2:RequesterVpc": f"{EC2}:vpc/vpc-1"},
     DENY),
    ("ec2:AcceptVpcPeeringConnection", f"arn:aws:ec2:eu-west-1:{ACCOUNT}:vpc-peering-connection/pcx-1",  # not its region
     {"aws:RequestedRegion": "eu-west-1", "ec2:AccepterVpc": f"arn:aws:ec2:eu-west-1:{ACCOUNT}:vpc/vpc-9",
      "ec2:RequesterVpc": f"{EC2}:vpc/vpc-1"}, "not allowed"),
    ("ec2:AcceptVpcPeeringConnection", f"{EC2}:vpc-peering-connection/pcx-1",
     {**IN_REGION, "ec2:AccepterVpc": f"{EC2}:vpc/vpc-2", "ec2:RequesterVpc": f"{EC2}:vpc/vpc-1"}, ALLOW),
    ("ec2:AcceptVpcPeeringConnection", f"{EC2}:vpc-peering-connection/pcx-1",
     {**IN_REGION, "ec2:AccepterVpc": f"{EC2}:vpc/vpc-2", "ec2:RequesterVpc": "arn:aws:ec2:us-east-1:999999999999:vpc/vpc-9"},
     DENY),
    ("ec2:AcceptVpcPeeringConnection", f"{EC2}:vpc/vpc-other", IN_REGION, DENY),              # an untagged accepter VPC
    ("ec2:CreateTags", f"{EC2}:vpc-peering-connection/pcx-1",                                 # the accepter tags its side
     {**IN_REGION, "aws:RequestTag/project": "gpu-training", "aws:RequestTag/environment": "dev",
      "ec2:AccepterVpc": f"{EC2}:vpc/vpc-2", "ec2:RequesterVpc": f"{EC2}:vpc/vpc-1"}, ALLOW),
    ("ec2:CreateTags", f"{EC2}:vpc-peering-connection/pcx-9",
     {**IN_REGION, "aws:RequestTag/project": "gpu-training",
      "ec2:AccepterVpc": f"{EC2}:vpc/vpc-2", "ec2:RequesterVpc": "arn:aws:ec2:us-east-1:999999999999:vpc/vpc-9"}, DENY),
    # Auto Scaling groups: EKS's for the cluster's node groups (tagged for the Cluster Autoscaler).
    ("autoscaling:DeleteAutoScalingGroup", f"{ASG}:autoScalingGroupName/other", IN_REGION, DENY),
    ("autoscaling:DeleteAutoScalingGroup", f"{ASG}:autoScalingGroupName/eks-gpu-training-dev-system-1",
     {**IN_REGION, DEV_NODE_GROUP_ASG: "owned"}, ALLOW),
    ("autoscaling:CreateOrUpdateTags", f"{ASG}:autoScalingGroupName/eks-gpu-training-prod-system-1",
     {**IN_REGION, "aws:ResourceTag/k8s.io/cluster-autoscaler/gpu-training-prod": "owned"}, DENY),
    ("autoscaling:CreateOrUpdateTags", f"{ASG}:autoScalingGroupName/eks-gpu-training-dev-system-1",
     {**IN_REGION, DEV_NODE_GROUP_ASG: "owned"}, ALLOW),
    ("autoscaling:DescribeAutoScalingGroups", "*", IN_REGION, ALLOW),
    # Log groups and alarms: the environment's by name (the services' tag checks cannot do it).
    ("logs:DeleteLogGroup", f"{LOGS}:log-group:/aws/lambda/billing", IN_REGION, "not allowed"),
    ("logs:DeleteLogGroup", f"{LOGS}:log-group:/aws/eks/gpu-training-prod/cluster", IN_REGION, "not allowed"),
    ("logs:DeleteLogGroup", f"{LOGS}:log-group:/aws/eks/gpu-training-dev/cluster", OURS, ALLOW),
    ("logs:GetLogEvents", f"{LOGS}:log-group:/aws/lambda/billing:log-stream:2026/01/01", IN_REGION, "not allowed"),
    ("logs:GetLogEvents", f"{LOGS}:log-group:/aws/containerinsights/gpu-training-dev/application:log-stream:node-1",
     IN_REGION, ALLOW),
    ("logs:DescribeLogGroups", "*", IN_REGION, ALLOW),
    ("cloudwatch:PutMetricAlarm", f"{ALARMS}:billing-spike", IN_REGION, "not allowed"),          # overwrite it
    ("cloudwatch:DeleteAlarms", f"{ALARMS}:gpu-training-dev-gpu-idle", OURS, ALLOW),
    ("cloudwatch:DescribeAlarms", "*", IN_REGION, ALLOW),
    ("cloudwatch:PutMetricData", "*", IN_REGION, "not allowed"),
    # The project scope is a managed policy of the bootstrap: the deploy role cannot lift it.
    ("iam:DetachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev",
     {"iam:PolicyARN": DEV_SCOPE}, DENY),
    ("iam:CreatePolicyVersion", DEV_SCOPE, {}, DENY),
    ("iam:DeletePolicy", DEV_SCOPE, {}, DENY),
    # Nor the guard (the Denies above of the bootstrap, the boundaries and other environments).
    ("iam:DetachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev",
     {"iam:PolicyARN": DEV_GUARD}, DENY),
    ("iam:CreatePolicyVersion", DEV_GUARD, {}, DENY),
    ("iam:SetDefaultPolicyVersion", DEV_GUARD, {}, DENY),
    # Nor the image role the trainer job pushes with (a gpu-training-ci-* role).
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-image-dev", BOUNDED_DEV_ROLE, DENY),
    ("iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-image-dev", BOUNDED_DEV_ROLE, DENY),
    ("organizations:LeaveOrganization", "*", {}, "not allowed"),
    ("ce:UpdateCostAllocationTagsStatus", "*", {}, "not allowed"),       # account-wide: the bootstrap's job
    ("iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "backup.amazonaws.com"}, ALLOW),
    ("iam:CreateServiceLinkedRole", "*", {"iam:AWSServiceName": "organizations.amazonaws.com"}, "not allowed"),
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
    assert not unmanaged, f"add these to bootstrap/policies/actions.py MANAGED_SERVICES (and check the deploy role): {unmanaged}"
    attached = {r["inputs"]["policyArn"] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    listed = {f"arn:aws:iam::aws:policy/{name}" for name in policies.ATTACHABLE_MANAGED_POLICIES}
    assert attached <= listed, f"the deploy role may not attach {sorted(attached - listed)}"
    # The deploy role's rights rest on these tags, which the stacks' provider puts on every resource
    # (and a team stack's further providers, one per MultiKueue worker region, alike).
    provider = one(plan, "pulumi:providers:aws", "aws")
    tags = json.loads(provider["inputs"]["defaultTags"])["tags"]
    assert all(json.loads(p["inputs"]["defaultTags"])["tags"] == tags for p in plan.of_type("pulumi:providers:aws"))
    assert tags[policies.ENVIRONMENT_TAG] == environment_of(stack)
    assert tags[policies.PROJECT_TAG] == "gpu-training"


def default_tags(plan: Plan) -> dict[str, str]:
    """The tags the stacks' provider puts on every resource it creates, as request context."""
    tags = json.loads(one(plan, "pulumi:providers:aws", "aws")["inputs"]["defaultTags"])["tags"]
    return {f"aws:ResourceTag/{key}": value for key, value in tags.items()}


def scoped_requests(plan: Plan, region: str = "us-east-1") -> list[tuple[str, str, dict[str, Any]]]:
    """What `pulumi up` asks of the deploy role for the resources it may touch only by name or by
    the cluster's tags, in the stack's region: (action, resource, request context), creation
    without tags, changes with the tags the resource then carries."""
    in_region = {"aws:RequestedRegion": region}
    new, tagged = in_region, {**in_region, **default_tags(plan)}
    fsx, sns, logs, alarms, asg = (arn.replace(":us-east-1:", f":{region}:") for arn in (FSX, SNS, LOGS, ALARMS, ASG))
    requests: list[tuple[str, str, dict[str, Any]]] = []
    for group in plan.of_type("aws:cloudwatch/logGroup:LogGroup"):
        arn = f"{logs}:log-group:{group['inputs']['name']}"
        requests += [("logs:CreateLogGroup", arn, new), ("logs:PutRetentionPolicy", arn, tagged),
                     ("logs:AssociateKmsKey", arn, tagged), ("logs:DeleteLogGroup", arn, tagged)]
    for alarm in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm"):
        arn = f"{alarms}:{alarm['inputs']['name']}"
        requests += [("cloudwatch:PutMetricAlarm", arn, new), ("cloudwatch:TagResource", arn, new),
                     ("cloudwatch:DeleteAlarms", arn, tagged)]
    topics = [f"{sns}:{topic['inputs']['name']}" for topic in plan.of_type("aws:sns/topic:Topic")]
    for arn in topics:
        requests += [("sns:CreateTopic", arn, new), ("sns:TagResource", arn, new),
                     ("sns:SetTopicAttributes", arn, tagged), ("sns:DeleteTopic", arn, tagged)]
    if plan.of_type("aws:sns/topicSubscription:TopicSubscription"):
        requests += [(action, arn, tagged) for arn in topics for action in ("sns:Subscribe", "sns:Unsubscribe")]
    for _ in plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        requests += [("fsx:CreateFileSystem", f"{fsx}:file-system/*", new), ("fsx:TagResource", f"{fsx}:file-system/*", new),
                     ("fsx:UpdateFileSystem", f"{fsx}:file-system/fs-1", tagged)]
    for _ in plan.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        requests += [("fsx:CreateDataRepositoryAssociation", f"{fsx}:file-system/fs-1", tagged),
                     ("fsx:CreateDataRepositoryAssociation", f"{fsx}:association/fs-1/*", new),
                     ("fsx:UpdateDataRepositoryAssociation", f"{fsx}:association/fs-1/dra-1", tagged)]
    for tag in plan.of_type("aws:autoscaling/tag:Tag"):
        # EKS tags the node groups' groups for its cluster, not with the provider's default tags.
        cluster = one(plan, "aws:eks/cluster:Cluster")["inputs"]["name"]
        arn = f"{asg}:autoScalingGroupName/{tag['inputs']['autoscalingGroupName']}"
        eks_tags = {**in_region, f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned",
                    "aws:ResourceTag/eks:cluster-name": cluster}
        requests += [("autoscaling:CreateOrUpdateTags", arn, eks_tags), ("autoscaling:DeleteTags", arn, eks_tags)]
    return requests


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_the_deploy_role_may_create_and_change_what_the_stack_plans_by_name_or_cluster(bootstrap, plan_of, stack):
    """The log groups, alarms, topics, file systems and node group tags of every plan stay inside
    the deploy role's name patterns and tag scopes (a rename out of them would fail `pulumi up`)."""
    _, permissions = role(bootstrap, f"gpu-training-ci-deploy-{environment_of(stack)}")
    requests = scoped_requests(plan_of(stack), region_of(stack))
    if stack in PLATFORM_STACKS:
        kinds = {action.split(":")[0] for action, _, _ in requests}
        assert {"logs", "cloudwatch", "sns", "autoscaling"} <= kinds, kinds
    refused = [f"{action} on {arn}: {outcome}" for action, arn, context in requests
               if (outcome := evaluate(permissions, action, arn, context)) != ALLOW]
    assert not refused, "\n".join(refused)


def test_prod_plans_the_file_system_the_deploy_role_is_checked_against(plan_of):
    assert any(action.startswith("fsx:") for action, _, _ in scoped_requests(plan_of("prod")))


def linked_services(plan: Plan) -> set[str]:
    return {service for r in plan.resources for service in policies.services_linked_to(r["type"], r["inputs"])}


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_the_deploy_role_may_create_every_service_linked_role_the_stack_needs(bootstrap, plan_of, stack):
    """A first `pulumi up` in a fresh account makes AWS create these with the deploy role's credentials."""
    _, permissions = role(bootstrap, f"gpu-training-ci-deploy-{environment_of(stack)}")
    for service in linked_services(plan_of(stack)):
        assert evaluate(permissions, "iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/{service}/x",
                        {"iam:AWSServiceName": service}) == ALLOW, f"{stack} needs {service}"


def test_efs_automatic_backups_need_aws_backups_service_linked_role(plan_of):
    """prod turns EFS automatic backups on (storage.efsBackups), dev does not."""
    assert "backup.amazonaws.com" in linked_services(plan_of("prod"))
    assert "backup.amazonaws.com" not in linked_services(plan_of("dev"))
    assert {"eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "spot.amazonaws.com"} <= linked_services(plan_of("dev"))


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
def test_platform_stacks_give_the_ci_roles_cluster_access(env):
    cluster = raw_config(env)["gpu-training:cluster"]
    admin_roles = {arn.rsplit("/", 1)[-1] for arn in cluster["adminPrincipals"]}
    readers = {arn.rsplit("/", 1)[-1] for arn in cluster["readOnlyPrincipals"]}
    assert policies.ci_role_name("gpu-training", "deploy", env) in admin_roles
    assert policies.ci_role_name("gpu-training", "preview", env) in readers
    # The image job pushes to ECR and needs nothing of the cluster.
    assert policies.ci_role_name("gpu-training", "image", env) not in admin_roles | readers


# --- the trainer image role: push to dev's registry, read the output that names it -------------

IMAGE_DEV = "gpu-training-ci-image-dev"
ECR = f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository"
DEV_REPOSITORY = f"{ECR}/gpu-training-dev/trainer"
DEV_STATE = f"{BUCKET}/.pulumi/stacks/gpu-training/dev.json"
VIA_S3 = {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
LISTS_DEV_STATE = {"s3:prefix": ".pulumi/stacks/gpu-training/dev.json"}


def denied(actions: list[str], resources: list[str]) -> list[tuple[str, str, dict[str, Any], bool]]:
    """A case each: every action on every resource, without request context, is refused."""
    return [(action, resource, {}, False) for action in actions for resource in resources]


IMAGE_DEV_CASES = [
    # (action, resource, request context, allowed) for the dev image role.
    # `pulumi stack output trainerRepositoryUrl --stack dev`: the layout file, the listing that
    # finds which variant of dev's state file exists, the file itself through the state key.
    ("s3:GetObject", f"{BUCKET}/.pulumi/meta.yaml", {}, True),
    ("s3:ListBucket", BUCKET, LISTS_DEV_STATE, True),
    ("s3:GetObject", DEV_STATE, {}, True),
    ("s3:GetObject", f"{DEV_STATE}.gz", {}, True),
    ("kms:Decrypt", key_arn("state-state-key"), VIA_S3, True),
    # scripts/build-image: the login, the tag check, the push and the digest.
    ("ecr:GetAuthorizationToken", "*", {}, True),
    *((action, DEV_REPOSITORY, {}, True) for action in policies.IMAGE_PUSH_ACTIONS),
    # No other state: not the team stacks', not another environment's, not the bootstrap's, and
    # no listing beyond dev's state file name.
    ("s3:ListBucket", BUCKET, {}, False),
    ("s3:ListBucket", BUCKET, {"s3:prefix": ".pulumi/stacks/"}, False),
    ("s3:ListBucket", BUCKET, {"s3:prefix": ".pulumi/stacks/gpu-training/prod.json"}, False),
    *denied(["s3:GetObject"], [f"{BUCKET}/.pulumi/stacks/gpu-training/{stack}.json"
                               for stack in ("team-vision-dev", "staging", "prod")]),
    ("s3:GetObject", f"{BUCKET}/.pulumi/stacks/gpu-training-bootstrap/bootstrap.json", {}, False),
    ("s3:GetObject", f"{BUCKET}/.pulumi/history/gpu-training/dev/dev-1.history.json", {}, False),
    # No state write, no lock (a lock would block dev's `pulumi up`).
    *denied(["s3:PutObject", "s3:DeleteObject"], [DEV_STATE]),
    ("s3:PutObject", f"{BUCKET}/.pulumi/locks/organization/gpu-training/dev/lock.json", {}, False),
    ("s3:PutBucketPolicy", BUCKET, {}, False),
    ("kms:GenerateDataKey", key_arn("state-state-key"), VIA_S3, False),
    ("kms:Decrypt", key_arn("state-state-key"), {}, False),                     # only through S3
    # No config secrets: `stack output` without --show-secrets blinds them instead of decrypting.
    *denied(["kms:Decrypt"], [key_arn("state-secrets-dev"), key_arn("state-secrets-prod")]),
    # No other repository: staging's and prod's registries are in the same account.
    ("ecr:PutImage", f"{ECR}/gpu-training-staging/trainer", {}, False),
    *denied(["ecr:PutImage", "ecr:InitiateLayerUpload", "ecr:BatchGetImage"], [f"{ECR}/gpu-training-prod/trainer"]),
    ("ecr:PutImage", f"{ECR}/gpu-training-dev/other", {}, False),
    ("ecr:PutImage", f"arn:aws:ecr:eu-west-1:{ACCOUNT}:repository/gpu-training-dev/trainer", {}, False),
    # Nor the repository's settings or its images' lifetimes.
    *denied(["ecr:BatchDeleteImage", "ecr:DeleteRepository", "ecr:SetRepositoryPolicy", "ecr:PutLifecyclePolicy",
             "ecr:PutImageTagMutability"], [DEV_REPOSITORY]),
    ("ecr:CreateRepository", f"{ECR}/gpu-training-dev/trainer2", {}, False),
    # No IAM, no cluster, no other role.
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/x", {"aws:RequestTag/environment": "dev", "iam:PermissionsBoundary": BOUNDARY}, False),
    ("iam:PassRole", ROLE, DEV_ROLE, False),
    ("iam:PutRolePolicy", ROLE, BOUNDED_DEV_ROLE, False),
    ("eks:DescribeCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-dev", OURS, False),
    ("eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-dev", OURS, False),
    ("eks:AssociateAccessPolicy", f"arn:aws:eks:us-east-1:{ACCOUNT}:access-entry/gpu-training-dev/*", OURS, False),
    ("eks:UpdateClusterConfig", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-dev", OURS, False),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev", {}, False),
    ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/dev/x-AbC123", OURS, False),
    ("ec2:RunInstances", "*", IN_REGION, False),
]


@pytest.mark.parametrize(("action", "resource", "context", "allowed"), IMAGE_DEV_CASES)
def test_the_image_role_pushes_to_devs_trainer_repository_and_reads_devs_output_only(
        bootstrap, action, resource, context, allowed):
    _, permissions = role(bootstrap, IMAGE_DEV)
    outcome = evaluate(permissions, action, resource, context)
    assert (outcome == ALLOW) is allowed, f"{action} on {resource}: {outcome}"


def test_the_image_role_is_granted_reads_of_the_state_and_ecr_only(bootstrap):
    """Every action the role may take, exactly: a new one (an `eks:`, an `iam:`, a state write) fails here."""
    _, permissions = role(bootstrap, IMAGE_DEV)
    assert sorted(allowed_actions(permissions)) == sorted(
        ["s3:ListBucket", "s3:GetObject", "kms:Decrypt", "ecr:GetAuthorizationToken", *policies.IMAGE_PUSH_ACTIONS])
    assert not any("*" in action for action in allowed_actions(permissions))
    assert all(s["Effect"] == "Allow" and "NotAction" not in s and "NotResource" not in s for s in permissions["Statement"])


def test_only_dev_has_an_image_role_and_the_bootstrap_exports_it(bootstrap):
    """Staging and prod get their images copied by digest in a reviewed pull request, not from CI."""
    names = {r["inputs"]["name"] for r in bootstrap.of_type("aws:iam/role:Role")}
    assert {n for n in names if n.startswith("gpu-training-ci-image-")} == {IMAGE_DEV}
    assert set(bootstrap.outputs["imageRoleArns"]) == {"dev"}
    record = next(r for r in bootstrap.of_type("aws:iam/role:Role") if r["inputs"]["name"] == IMAGE_DEV)
    assert record["inputs"]["tags"] == {"ci-environment": "dev"}
    assert record["inputs"]["maxSessionDuration"] == 3600
    without_dev = plan_bootstrap(environments={"staging": {}, "prod": {}})
    assert not without_dev.outputs["imageRoleArns"]


def test_the_image_role_trusts_the_default_subject_template_too():
    plan = plan_bootstrap(github={"repository": REPO, "subjectClaims": "default"})
    trust, _ = role(plan, IMAGE_DEV)
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:environment:dev-image")) == ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:environment:dev")) != ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:environment:prod")) != ALLOW
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, token(f"repo:{REPO}:pull_request")) != ALLOW


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
def test_the_image_role_names_the_repository_the_stacks_create(bootstrap, plan_of, env):
    """bootstrap/policies/names.py derives the repository's name; components/data/registry.py gives it."""
    repositories = [r["inputs"]["name"] for r in plan_of(env).of_type("aws:ecr/repository:Repository")]
    assert repositories == [policies.trainer_repository_name("gpu-training", env)]
    _, permissions = role(bootstrap, IMAGE_DEV)
    outcome = evaluate(permissions, "ecr:PutImage", f"{ECR}/{repositories[0]}")
    assert (outcome == ALLOW) is (env == "dev"), f"{env}: {outcome}"


# --- the permissions boundary: where a role the deploy role creates can go ---------------------

def boundary(plan: Plan, env: str) -> dict[str, Any]:
    record = next(r for r in plan.of_type("aws:iam/policy:Policy")
                  if r["inputs"]["name"] == policies.boundary_policy_name("gpu-training", env))
    return json.loads(record["inputs"]["policy"])


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def planned_role_grants(plan: Plan) -> list[tuple[str, str, str, dict[str, str]]]:
    """(role policy, action, resource, request context) for every Allow of every role the plan
    creates: its inline policies and the AWS managed policies attached to it (their actions on
    `*`, as the documents in policies.BOUNDARY_ACTIONS say). A grant's StringEquals condition is
    the request it stands for (the Load Balancer Controller's iam:CreateServiceLinkedRole names
    ELB's service). Read generically: a role added to any stack is in it."""
    grants = []
    for attached in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        name = attached["inputs"]["policyArn"].rsplit("/", 1)[-1]
        assert name in policies.BOUNDARY_ACTIONS, f"{attached['name']} attaches {name}: list its actions in BOUNDARY_ACTIONS"
        grants += [(attached["name"], action, "*", {}) for action in policies.BOUNDARY_ACTIONS[name]]
    for inline in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
        for statement in json.loads(inline["inputs"]["policy"])["Statement"]:
            if statement["Effect"] == "Allow":
                equals = {key: as_list(value)[0] for key, value in statement.get("Condition", {}).get("StringEquals", {}).items()}
                grants += [(inline["name"], action, resource, equals) for action in as_list(statement["Action"])
                           for resource in as_list(statement["Resource"])]
    return grants


def own_resource(stack: str, region: str, action: str, resource: str) -> str:
    """The request a grant stands for: a grant on `*` is used on the stack's own resources in its
    region (its cluster for EKS, its buckets for S3, its Container Insights log group for CloudWatch
    Logs, its load balancers for ELB, whose every action but the reads takes one); a pattern stands
    for a name it matches. `region` is the stack's (region_of reads its file: once per test, not per grant)."""
    if action.startswith("logs:") and ":mock:" in resource:
        # The offline plan's ARN of a log group the stack makes: the flow logs' group, by its name
        # (components/network/vpc.py), and its streams.
        group = f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/vpc/{name_prefix(stack)}/flow-logs"
        return group + (":log-stream:x" if resource.endswith(":*") else "")
    if resource != "*":
        # A pattern's region and account are the stack's (S3's ARNs have neither).
        parts = resource.split(":", 5)
        if len(parts) == 6:
            parts[3] = region if parts[3] == "*" else parts[3]
            parts[4] = ACCOUNT if parts[4] == "*" else parts[4]
        return ":".join(parts).replace("*", "x")
    service, name = action.split(":", 1)
    prefix = name_prefix(stack)
    if service == "elasticloadbalancing" and not name.startswith("Describe"):
        return f"arn:aws:elasticloadbalancing:{region}:{ACCOUNT}:loadbalancer/app/k8s-viewer/1"
    return {"eks": f"arn:aws:eks:{region}:{ACCOUNT}:cluster/{prefix}",
            "logs": f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/containerinsights/{prefix}/application",
            "s3": f"arn:aws:s3:::{prefix}-artifacts-{ACCOUNT}"}.get(service, "*")


def name_prefix(stack: str) -> str:
    """The platform stack's name prefix and cluster name (components/config/stack.py): prod-usw2's
    is gpu-training-prod-usw2; a team stack's cluster is its environment's."""
    return "gpu-training-" + (stack if stack in PLATFORM_STACKS else environment_of(stack))


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_the_boundary_allows_everything_the_stacks_roles_are_granted(bootstrap, plan_of, stack):
    """The boundary is not too tight: every grant of every planned role still works under it, on
    the environment's resources (which carry the project's and the environment's tags)."""
    env, region = environment_of(stack), region_of(stack)
    document = boundary(bootstrap, env)
    context = {"aws:ResourceTag/environment": env, "aws:ResourceTag/project": "gpu-training",
               "aws:RequestedRegion": region}
    grants = planned_role_grants(plan_of(stack))
    assert grants
    refused = [(name, action, resource) for name, action, resource, condition in grants
               if evaluate(document, action, own_resource(stack, region, action, resource), {**context, **condition}) != ALLOW]
    assert not refused, f"{stack}: add these to bootstrap/policies/actions.py BOUNDARY_ACTIONS (or scope them): {refused}"


def whole_service_grants(document: dict[str, Any]) -> list[str]:
    """Allow statements of `document` granting a whole service (`svc:*` or `*`) on Resource `*`."""
    return [action for s in as_list(document["Statement"]) if s["Effect"] == "Allow" and "*" in as_list(s.get("Resource", []))
            for action in as_list(s.get("Action", [])) if action == "*" or action.endswith(":*")]


@pytest.mark.parametrize("stack", ["bootstrap", *PLATFORM_STACKS, "team-vision-prod"])
def test_no_role_or_boundary_grants_a_whole_service_on_every_resource(bootstrap, plan_of, stack):
    plan = bootstrap if stack == "bootstrap" else plan_of(stack)
    documents = [(r["name"], json.loads(r["inputs"]["policy"])) for r in plan.resources
                 if r["type"] in ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy")]
    assert documents
    found = {name: grants for name, document in documents if (grants := whole_service_grants(document))}
    assert not found, f"{stack}: {found}"


INLINE_STAR = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
DEV_TAGGED = {"aws:ResourceTag/environment": "dev"}
BOUNDED_ROLE_CASES = [
    # A dev role that somehow holds an inline `*:*` policy: what its boundary still refuses.
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/x", {}, False),
    ("iam:PutRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/x", DEV_TAGGED, False),
    ("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/x", DEV_TAGGED, False),
    ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/x", DEV_TAGGED, False),
    ("iam:DeleteRolePermissionsBoundary", f"arn:aws:iam::{ACCOUNT}:role/x", DEV_TAGGED, False),
    ("iam:CreateUser", f"arn:aws:iam::{ACCOUNT}:user/x", {}, False),
    ("iam:CreateAccessKey", f"arn:aws:iam::{ACCOUNT}:user/admin", {}, False),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-ci-deploy-dev", {}, False),  # untagged: not dev's
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/ml-platform-admin", {}, False),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-team-vision-secrets",
     {"aws:ResourceTag/environment": "prod"}, False),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-dev-team-vision-secrets", DEV_TAGGED, True),
    ("s3:GetObject", "arn:aws:s3:::gpu-training-prod-datasets-1/x", {}, False),
    ("s3:GetObject", "arn:aws:s3:::customer-data-prod/x", {}, False),
    ("s3:GetObject", "arn:aws:s3:::gpu-training-staging-artifacts-1/x", {}, False),
    ("s3:GetObject", "arn:aws:s3:::gpu-training-dev-datasets-1/x", {}, True),
    ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/hf-token-Ab",
     {}, False),
    # The stacks' config secrets: the bootstrap's key, as AWS names it and tagged as the bootstrap
    # tags it (the offline plan's key ARNs are placeholders of another service).
    ("kms:Decrypt", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-secrets-dev",
     {"aws:ResourceTag/project": "gpu-training-bootstrap", "aws:ResourceTag/ci-environment": "dev"}, False),
    ("s3:GetObject", f"{BUCKET}/.pulumi/stacks/gpu-training/dev.json", {}, False),  # the state
    ("eks:DeleteCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-prod",
     {"aws:ResourceTag/environment": "prod"}, False),
    ("ec2:DescribeInstances", "*", {}, True),
    ("organizations:LeaveOrganization", "*", {}, False),
]


OTHER_PROJECT = {"aws:ResourceTag/project": "other-project"}
# What a role holding `*:*` under an environment's boundary must still be refused: the issue's
# cross-project escapes, each on another project's resource (untagged or tagged as another's).
# {env} is the boundary's environment.
CROSS_PROJECT_CASES = [
    ("ssm:SendCommand", f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0runner", {}),      # an untagged runner
    ("ssm:StartSession", f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0runner", {}),
    ("ssm:SendCommand", f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0node", "OWN"),       # not even its own nodes
    ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:other/db-Ab12", {}),
    ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:other/db-Ab12", OTHER_PROJECT),
    ("s3:GetObject", "arn:aws:s3:::other-project-data/x", {}),
    ("s3:ListBucket", "arn:aws:s3:::other-project-data", {}),
    ("ssm:GetParameter", f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/other/db-password", {}),
    ("ssm:GetParameters", f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/other/db-password", OTHER_PROJECT),
    ("kms:PutKeyPolicy", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/other", {}),
    ("kms:Decrypt", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/other", OTHER_PROJECT),
    ("eks:AssociateAccessPolicy", f"arn:aws:eks:us-east-1:{ACCOUNT}:access-entry/other-cluster/role/x", {}),
    ("eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/other-cluster", {}),
    ("eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/other-cluster", "OWN"),  # tagged as ours, other name
    ("ec2:ModifySnapshotAttribute", f"arn:aws:ec2:us-east-1:{ACCOUNT}:snapshot/snap-1", "OWN"),
    ("ec2:ModifyImageAttribute", "arn:aws:ec2:us-east-1::image/ami-1", "OWN"),
    ("ec2:CreateVpcPeeringConnection", f"arn:aws:ec2:us-east-1:{ACCOUNT}:vpc/vpc-1", "OWN"),
    ("ec2:AcceptVpcPeeringConnection", f"arn:aws:ec2:us-east-1:{ACCOUNT}:vpc-peering-connection/pcx-1", "OWN"),
    ("ec2:AuthorizeSecurityGroupIngress", f"arn:aws:ec2:us-east-1:{ACCOUNT}:security-group/sg-other", {}),
    # Tag-then-read: tagging another project's secret as ours, or anything as another project's.
    ("secretsmanager:TagResource", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:other/db-Ab12",
     {"aws:RequestTag/project": "gpu-training"}),
    ("ec2:CreateTags", f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0runner", {"aws:RequestTag/project": "gpu-training"}),
    ("secretsmanager:TagResource", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/{{env}}/x-Ab12",
     {"aws:RequestTag/project": "other-project"}),
]


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
@pytest.mark.parametrize(("action", "resource", "context"), CROSS_PROJECT_CASES)
def test_a_star_role_under_each_boundary_is_refused_every_cross_project_action(bootstrap, stack, action, resource, context):
    """Under the boundary of the stack's environment (prod-usw2's is prod's), in the stack's region."""
    env, region = environment_of(stack), region_of(stack)
    own = {"aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": env}
    request = {**(own if context == "OWN" else context), "aws:RequestedRegion": region}
    arn = resource.format(env=env).replace(":us-east-1:", f":{region}:")
    outcome = evaluate_bounded(INLINE_STAR, boundary(bootstrap, env), action, arn, request)
    assert outcome != ALLOW, f"{stack}: {action} on {arn}: {outcome}"


TAG_THEN_READ_CASES = [
    # The deploy role tags another project's secret or repository into the project, then reads it.
    ("secretsmanager:TagResource", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:other/db-Ab12",
     {**IN_REGION, "aws:RequestTag/project": "gpu-training"}),
    ("ecr:TagResource", f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/other/app", {**IN_REGION, "aws:RequestTag/project": "gpu-training"}),
    ("ec2:CreateTags", f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0runner", {**IN_REGION, "aws:RequestTag/project": "gpu-training"}),
    # Or retags the project's own as another's, or another project's as anything.
    ("secretsmanager:TagResource", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/dev/x-Ab12",
     {**IN_REGION, "aws:RequestTag/project": "other-project"}),
    ("kms:TagResource", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/other", {**IN_REGION, **OTHER_PROJECT}),
    # An access entry on another cluster, tagged or not.
    ("eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/other-cluster", IN_REGION),
    ("eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/other-cluster",
     {**IN_REGION, "aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": "dev"}),
    ("eks:AssociateAccessPolicy", f"arn:aws:eks:us-east-1:{ACCOUNT}:access-entry/other-cluster/role/x",
     {**IN_REGION, "aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": "dev"}),
]


@pytest.mark.parametrize(("action", "resource", "context"), TAG_THEN_READ_CASES)
def test_the_deploy_role_cannot_tag_its_way_into_other_projects_or_clusters(bootstrap, action, resource, context):
    _, permissions = role(bootstrap, "gpu-training-ci-deploy-dev")
    assert evaluate(permissions, action, resource, context) == DENY, f"{action} on {resource}"


def test_the_deploy_role_still_creates_access_entries_on_its_own_cluster(bootstrap):
    _, permissions = role(bootstrap, "gpu-training-ci-deploy-dev")
    ours = {**IN_REGION, "aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": "dev"}
    assert evaluate(permissions, "eks:CreateAccessEntry", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/gpu-training-dev", ours) == ALLOW
    secret = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/dev/x-Ab12"
    assert evaluate(permissions, "secretsmanager:TagResource", secret, {**IN_REGION, "aws:RequestTag/project": "gpu-training",
                                                                       "aws:RequestTag/environment": "dev"}) == ALLOW


@pytest.mark.parametrize(("action", "resource", "context", "allowed"), BOUNDED_ROLE_CASES)
def test_a_role_with_an_inline_star_policy_stays_inside_the_boundary(bootstrap, action, resource, context, allowed):
    outcome = evaluate_bounded(INLINE_STAR, boundary(bootstrap, "dev"), action, resource, context)
    assert (outcome == ALLOW) is allowed, f"{action} on {resource}: {outcome}"


def test_the_escalation_chain_of_the_dev_deploy_role_is_closed(bootstrap):
    """Dev deploys run on every push to main without review. Creating a role, giving it `*:*` and
    handing it to a pod ends at the boundary: each step without the boundary is refused."""
    _, deploy = role(bootstrap, "gpu-training-ci-deploy-dev")
    dev_boundary = f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-boundary-dev"
    new_role = f"arn:aws:iam::{ACCOUNT}:role/escalate"
    # 1. create a role without the boundary: refused; with it: allowed.
    assert evaluate(deploy, "iam:CreateRole", new_role, {"aws:RequestTag/environment": "dev"}) != ALLOW
    assert evaluate(deploy, "iam:CreateRole", new_role, {"aws:RequestTag/environment": "dev",
                                                          "iam:PermissionsBoundary": dev_boundary}) == ALLOW
    # 2. an inline policy on a role without the boundary (one created earlier, or by someone else): refused.
    assert evaluate(deploy, "iam:PutRolePolicy", new_role, DEV_TAGGED) != ALLOW
    # 3. removing or replacing the boundary: refused outright.
    for action in ("iam:DeleteRolePermissionsBoundary", "iam:PutRolePermissionsBoundary"):
        assert evaluate(deploy, action, new_role, {**DEV_TAGGED, "iam:PermissionsBoundary": dev_boundary}) == DENY
    # 4. widening the boundary itself: refused.
    assert evaluate(deploy, "iam:CreatePolicyVersion", dev_boundary) == DENY
    # 5. what the bounded role can do with `*:*`: no IAM, no other environment, no bootstrap.
    assert evaluate_bounded(INLINE_STAR, boundary(bootstrap, "dev"), "iam:CreateRole", new_role, {}) != ALLOW


def test_the_boundary_fits_a_managed_policy_and_the_ci_policies_fit_inline(bootstrap):
    """IAM quotas (IAM User Guide, "IAM and AWS STS quotas"): a managed policy holds 6,144
    characters, a role's inline policies 10,240 together; white space does not count."""
    for policy in bootstrap.of_type("aws:iam/policy:Policy"):
        assert iam_size(policy["inputs"]["policy"]) <= 6144, policy["name"]
    for inline in bootstrap.of_type("aws:iam/rolePolicy:RolePolicy"):
        assert iam_size(inline["inputs"]["policy"]) <= 10240, inline["name"]


# Room a boundary keeps below the managed-policy quota, for the next role's actions: a boundary
# that fills it would fail `pulumi up` of the bootstrap (LimitExceeded) the day a stack adds one.
BOUNDARY_HEADROOM = 200


def iam_size(document: str) -> int:
    """A policy's size as IAM counts it: white space outside strings excluded (IAM User Guide,
    "IAM and AWS STS quotas")."""
    return len(json.dumps(json.loads(document), separators=(",", ":")))


@pytest.mark.parametrize("env", ENVIRONMENT_STACKS)
def test_each_boundary_leaves_headroom_under_the_managed_policy_quota(bootstrap, env):
    record = next(r for r in bootstrap.of_type("aws:iam/policy:Policy")
                  if r["inputs"]["name"] == policies.boundary_policy_name("gpu-training", env))
    size = iam_size(record["inputs"]["policy"])
    assert size <= 6144 - BOUNDARY_HEADROOM, f"{env}: {size} characters, {6144 - size} left (keep {BOUNDARY_HEADROOM})"


@pytest.mark.parametrize("family", sorted(policies.ACTION_FAMILIES))
def test_each_action_family_stands_for_the_tables_actions_and_reads_only(family):
    """A wildcard of the boundary matches what the table lists, and beyond it only reads; every
    table action it matches is among its recorded members (else the record is stale)."""
    members = policies.ACTION_FAMILIES[family]
    listed = {a for group in policies.BOUNDARY_ACTIONS.values() for a in group}
    assert all(glob_match(family, member, ignore_case=True) for member in members), family
    matched = {a for a in listed if glob_match(family, a, ignore_case=True)}
    assert len(matched) >= 2 and matched <= set(members), (family, sorted(matched - set(members)))
    beyond = [m for m in members if m not in listed and not m.split(":", 1)[1].startswith(("Get", "Describe", "List"))]
    assert not beyond, f"{family} would allow {beyond}, which no role of the stacks is granted"
    assert family in policies.boundary_allow_list()


def test_the_bootstrap_config_names_every_regional_platform_stack_with_its_region():
    """Each stacks/Pulumi.<env>-<site>.yaml is a site of its environment in the bootstrap's config,
    in the region the stack file says: else its CI roles could not deploy it."""
    config = load_bootstrap_config(raw_config_of_bootstrap(), project="gpu-training-bootstrap", stack="bootstrap")
    configured = {f"{env.name}-{site}": region for env in config.environments for site, region in env.sites}
    regional = {stack: region_of(stack) for stack in PLATFORM_STACKS if stack not in ENVIRONMENT_STACKS}
    assert regional, "prod-usw2 is a regional stack"
    assert configured == regional
    assert policies.environment_regions(config, "prod") == ["us-east-1", "us-east-2", "us-west-2"]
    assert policies.environment_stacks(config, "prod") == ("prod", "prod-use2", "prod-usw2", "team-*-prod")


def raw_config_of_bootstrap() -> dict[str, Any]:
    from components.config import decode_raw_config
    from components.config.stack_file import read_stack_file
    return decode_raw_config(read_stack_file(BOOTSTRAP / "Pulumi.bootstrap.yaml"))


def test_the_bootstrap_exports_each_environments_boundary(bootstrap):
    """One boundary per environment: prod-usw2's roles carry prod's (its stack file says so)."""
    assert set(bootstrap.outputs["permissionsBoundaryArns"]) == set(ENVIRONMENT_STACKS)
    for stack in PLATFORM_STACKS:
        configured = raw_config(stack)["gpu-training:iamPermissionsBoundary"]
        assert configured.endswith(f":policy/{policies.boundary_policy_name('gpu-training', environment_of(stack))}"), stack


# --- cost-allocation tags: activated once, by the bootstrap -------------------------------------

def test_the_bootstrap_activates_every_tag_key_a_budget_counts_by(bootstrap, plan_of):
    tags = bootstrap.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")
    assert {t["inputs"]["tagKey"] for t in tags} == set(COST_ALLOCATION_TAG_KEYS)
    assert all(t["inputs"]["status"] == "Active" and t.get("retainOnDelete") is True for t in tags)
    counted = set()
    for stack in [*PLATFORM_STACKS, "team-vision-prod"]:
        for budget in plan_of(stack).of_type("aws:budgets/budget:Budget"):
            inputs = budget["inputs"]
            counted |= {f["tags"]["key"] for f in (inputs.get("filterExpression") or {}).get("ands", [])}
            counted |= {v.split(":", 1)[1].split("$", 1)[0] for f in inputs.get("costFilters", []) for v in f["values"]}
    assert counted and counted <= set(COST_ALLOCATION_TAG_KEYS), counted


def test_tag_activation_can_be_left_to_the_management_account():
    plan = plan_bootstrap(costAllocationTags={"activate": False})
    assert not plan.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")


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
    # A dev job (no required reviewers) must never be able to assume prod's deploy role.
    ({"environments": {"dev": {}, "prod": {"githubEnvironment": "dev"}}},
     "gpu-training-bootstrap:environments.prod.githubEnvironment", "is also dev's"),
    ({"environments": {"staging": {"githubEnvironment": "Prod"}, "prod": {}}},  # GitHub ignores case
     "gpu-training-bootstrap:environments.prod.githubEnvironment", "is also staging's"),
    # A stage named like dev's image environment would trust the image job's token, and the reverse.
    ({"environments": {"dev": {}, "prod": {"githubEnvironment": "dev-image"}}},
     "gpu-training-bootstrap:environments.prod.githubEnvironment", "is dev's image job environment"),
    ({"environments": {"dev": {"githubEnvironment": "stage"}, "prod": {"githubEnvironment": "stage-image"}}},
     "gpu-training-bootstrap:environments.prod.githubEnvironment", "is dev's image job environment"),
    ({"environments": {"dev": {"githubEnvironment": "ship-image"}, "prod": {"githubEnvironment": "ship"}}},
     "gpu-training-bootstrap:environments.prod.githubEnvironment", "makes ship-image, dev's GitHub environment"),
    ({"environments": {"prod": {"sites": {"us-west-2": "us-west-2"}}}},
     "gpu-training-bootstrap:environments.prod.sites.us-west-2", "not a site label"),
    ({"environments": {"prod": {"sites": {"usw2": "us-west"}}}}, "gpu-training-bootstrap:environments.prod.sites.usw2", "region"),
    ({"environments": {"prod": {"sites": ["us-west-2"]}}}, "gpu-training-bootstrap:environments.prod.sites", "mapping"),
    ({"state": {"versionRetentionDays": 0}}, "gpu-training-bootstrap:state.versionRetentionDays", "between 1 and 3650"),
    ({"region": "us-east"}, "gpu-training-bootstrap:region", "region"),
    ({"stackProject": "gpu-training"}, "gpu-training-bootstrap:stackProject", "did you mean 'stacksProject'"),
    ({"costAllocationTags": {"activate": "yes"}}, "gpu-training-bootstrap:costAllocationTags.activate", "true or false"),
]


@pytest.mark.parametrize(("overrides", "key", "says"), BAD_CONFIG)
def test_bad_bootstrap_config_names_key_and_fix_before_any_resource(overrides, key, says):
    with pytest.raises(ConfigError) as raised:
        plan_bootstrap(**overrides)
    message = str(raised.value)
    assert any(key in line and says in line and "Fix:" in line for line in message.splitlines()), message


def test_an_environment_left_empty_takes_its_defaults():
    """`dev:` with nothing below it is the stage with its defaults (branch main, environment dev)."""
    plan = plan_bootstrap(environments={"dev": None, "prod": {"githubEnvironment": "prod"}})
    trust, _ = role(plan, IMAGE_DEV)
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None,
                    token(f"repo:{REPO}:environment:dev-image:ref:refs/heads/main")) == ALLOW


def test_a_read_bucket_is_readable_under_the_boundary_and_no_more():
    """environments.<env>.readBuckets: an existing datasets bucket outside the project's names (the
    size check on: the boundary has room for it, tests/test_bootstrap_policy_sizes.py)."""
    plan = plan_bootstrap(environments={"dev": {"readBuckets": ["shared-datasets", "datasets-prod"]}})
    document = boundary(plan, "dev")
    assert evaluate_bounded(INLINE_STAR, document, "s3:GetObject", "arn:aws:s3:::shared-datasets/a/b") == ALLOW
    assert evaluate_bounded(INLINE_STAR, document, "s3:ListBucket", "arn:aws:s3:::shared-datasets") == ALLOW
    assert evaluate_bounded(INLINE_STAR, document, "s3:PutObject", "arn:aws:s3:::shared-datasets/a") == DENY
    assert evaluate_bounded(INLINE_STAR, document, "s3:PutBucketPolicy", "arn:aws:s3:::shared-datasets") == DENY
    assert evaluate_bounded(INLINE_STAR, document, "s3:GetObject", "arn:aws:s3:::datasets-prod/a") == DENY   # prod's, by name
    assert evaluate_bounded(INLINE_STAR, document, "s3:GetObject", "arn:aws:s3:::other-datasets/a") == DENY


def key_request(principal: str, **tags: str) -> dict[str, str]:
    return {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{principal}",
            **{f"aws:PrincipalTag/{key}": value for key, value in tags.items()}}


CI_TAGS = {"project": "gpu-training-bootstrap", "ci-environment": "dev"}
STACK_ROLE_TAGS = {"project": "gpu-training", "environment": "dev"}
SECRETS_KEY_CASES = [
    # (principal, its tags, action, allowed by the key policy)
    ("gpu-training-ci-preview-dev", CI_TAGS, "kms:Decrypt", True),
    ("gpu-training-ci-deploy-dev", CI_TAGS, "kms:Decrypt", True),
    ("gpu-training-ci-preview-prod", {**CI_TAGS, "ci-environment": "prod"}, "kms:Decrypt", False),
    ("gpu-training-ci-image-dev", CI_TAGS, "kms:Decrypt", False),
    ("gpu-training-ci-deploy-dev-copy", {}, "kms:Decrypt", False),             # named like the project's, untagged
    ("workload-roles-trainer-a1b2", STACK_ROLE_TAGS, "kms:Decrypt", False),     # a stack's role, even of dev
    ("workload-roles-trainer-a1b2", STACK_ROLE_TAGS, "kms:CreateGrant", False),
    ("AWSReservedSSO_Admin_abc", {}, "kms:Encrypt", True),                      # a person: left to IAM
]


@pytest.mark.parametrize(("principal", "tags", "action", "allowed"), SECRETS_KEY_CASES)
def test_the_secrets_key_names_its_users(bootstrap, principal, tags, action, allowed):
    document = json.loads(one(bootstrap, "aws:kms/key:Key", "state-secrets-dev")["inputs"]["policy"])
    outcome = evaluate(document, action, "*", key_request(principal, **tags))
    assert (outcome == ALLOW) is allowed, f"{principal} {action}: {outcome}"


@pytest.mark.parametrize(("principal", "tags", "via", "allowed"), [
    ("gpu-training-ci-preview-prod", CI_TAGS, "s3.us-east-1.amazonaws.com", True),
    ("gpu-training-ci-image-dev", CI_TAGS, "s3.us-east-1.amazonaws.com", True),
    ("gpu-training-ci-deploy-dev", CI_TAGS, None, False),                       # not through S3
    ("gpu-training-ci-deploy-dev", CI_TAGS, "s3.eu-west-1.amazonaws.com", False),
    ("workload-roles-trainer-a1b2", STACK_ROLE_TAGS, "s3.us-east-1.amazonaws.com", False),
    ("AWSReservedSSO_Admin_abc", {}, None, True),
])
def test_the_state_key_is_used_by_the_ci_roles_through_s3_only(bootstrap, principal, tags, via, allowed):
    document = json.loads(one(bootstrap, "aws:kms/key:Key", "state-state-key")["inputs"]["policy"])
    context = {**key_request(principal, **tags), **({"kms:ViaService": via} if via else {})}
    outcome = evaluate(document, "kms:Decrypt", "*", context)
    assert (outcome == ALLOW) is allowed, f"{principal} via {via}: {outcome}"
    root = next(s for s in document["Statement"] if s["Sid"] == "EnableIamPolicies")
    assert root["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"} and root["Action"] == "kms:*"


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_the_deploy_role_manages_its_stacks_dashboards_and_no_other(bootstrap, stack):
    """Every stack plans a CloudWatch dashboard; a dashboard's ARN has no region."""
    env = environment_of(stack)
    _, permissions = role(bootstrap, f"gpu-training-ci-deploy-{env}")
    own = f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/gpu-training-{stack if stack in PLATFORM_STACKS else env + '-vision'}-x"
    for action in ("cloudwatch:PutDashboard", "cloudwatch:GetDashboard", "cloudwatch:DeleteDashboards"):
        assert evaluate(permissions, action, own) == ALLOW, (action, own)
    other = "staging" if env != "staging" else "dev"
    assert evaluate(permissions, "cloudwatch:PutDashboard", f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/gpu-training-{other}-x") != ALLOW
    assert evaluate(permissions, "cloudwatch:PutDashboard", f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/other-project") != ALLOW
