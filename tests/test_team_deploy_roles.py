"""Issue 41 item 1: each team stack deploys with an identity of its own per environment, held by
IAM to the team's names and prefixes, whatever the policy pack says.

The bootstrap's registry (`teams`) makes team vision's deploy roles in dev and prod; team audio
stands for any other team of the same environment.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from iam_eval import ALLOW, DENY, evaluate, evaluate_bounded, glob_match

from bootstrap.config import load_bootstrap_config, refuse_members_of_other_accounts
from bootstrap.policies import teams
from bootstrap.policies.names import stack_objects
from components.config import ConfigError
from offline.plan import Plan

ACCOUNT = "123456789012"
BUCKET = f"arn:aws:s3:::gpu-training-prod-artifacts-{ACCOUNT}"
SECRETS = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/teams"
IAM = f"arn:aws:iam::{ACCOUNT}"
TEAM_BOUNDARY = f"{IAM}:policy/gpu-training-boundary-prod-team-vision"


@pytest.fixture(scope="module")
def bootstrap(plan_of) -> Plan:
    return plan_of("bootstrap")


def team_role(plan: Plan, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(trust, inline policy, permissions boundary) of a team deploy role in the plan."""
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r["inputs"]["name"] == name]
    (inline,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"] == role["name"]]
    (boundary,) = [r for r in plan.of_type("aws:iam/policy:Policy")
                   if r["inputs"]["name"] == teams.team_boundary_policy_name("gpu-training", "vision", "prod")]
    return (json.loads(role["inputs"]["assumeRolePolicy"]), json.loads(inline["inputs"]["policy"]),
            json.loads(boundary["inputs"]["policy"]))


def as_vision_prod(plan: Plan, action: str, resource: str, context: dict[str, str] | None = None) -> str:
    _, inline, boundary = team_role(plan, "gpu-training-ci-team-vision-prod")
    return evaluate_bounded(inline, boundary, action, resource, {"aws:RequestedRegion": "us-east-1", **(context or {})})


# (action, team audio's resource, team vision's own, request context)
TEAM_REACH = [
    ("s3:GetObject", f"{BUCKET}/teams/audio/model.pt", f"{BUCKET}/teams/vision/model.pt", {}),
    ("s3:PutObject", f"{BUCKET}/teams/audio/model.pt", f"{BUCKET}/teams/vision/model.pt", {}),
    ("s3:DeleteObject", f"{BUCKET}/teams/audio/x", f"{BUCKET}/teams/vision/x", {}),
    ("secretsmanager:GetSecretValue", f"{SECRETS}/audio/token-AbCd", f"{SECRETS}/vision/token-AbCd", {}),
    ("secretsmanager:PutSecretValue", f"{SECRETS}/audio/token-AbCd", f"{SECRETS}/vision/token-AbCd", {}),
    ("iam:PutRolePolicy", f"{IAM}:role/gpu-training-prod-audio-trainer", f"{IAM}:role/gpu-training-prod-vision-trainer",
     {"iam:PermissionsBoundary": TEAM_BOUNDARY}),
    ("iam:DeleteRole", f"{IAM}:role/gpu-training-prod-team-audio-secrets", f"{IAM}:role/gpu-training-prod-team-vision-secrets", {}),
    ("iam:CreatePolicyVersion", f"{IAM}:policy/gpu-training-prod-audio-x", f"{IAM}:policy/gpu-training-prod-vision-x", {}),
    ("kms:Decrypt", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/2", "TEAM_TAG"),
]


@pytest.mark.parametrize(("action", "other", "own", "context"), TEAM_REACH)
def test_a_team_deploy_role_reaches_its_own_names_and_no_other_teams(bootstrap, action, other, own, context):
    other_context = {"aws:ResourceTag/team": "audio", "aws:ResourceTag/stack": "team-audio-prod"} if context == "TEAM_TAG" else context
    own_context = {"aws:ResourceTag/team": "vision", "aws:ResourceTag/stack": "team-vision-prod"} if context == "TEAM_TAG" else context
    assert as_vision_prod(bootstrap, action, other, other_context) != ALLOW, f"{action} on {other}"
    assert as_vision_prod(bootstrap, action, own, own_context) == ALLOW, f"{action} on {own}"



KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1"


@pytest.mark.parametrize(("action", "key_tags", "request_tags"), [
    # The platform's key, tagged into the team: then kms:* on it (the review's takeover).
    ("kms:TagResource", {"project": "gpu-training", "stack": "prod"}, {"team": "vision", "stack": "team-vision-prod"}),
    ("kms:PutKeyPolicy", {"stack": "prod"}, {}),
    # The team's own key in dev, from prod's role (dev deploys from a weaker branch rule).
    ("kms:ScheduleKeyDeletion", {"team": "vision", "stack": "team-vision-dev"}, {}),
    ("kms:Decrypt", {"team": "vision", "stack": "team-vision-dev"}, {}),
    ("kms:TagResource", {"team": "vision", "stack": "team-vision-dev"}, {"stack": "team-vision-prod"}),
])
def test_a_team_deploy_role_takes_no_key_another_stack_made(bootstrap, action, key_tags, request_tags):
    context = {**{f"aws:ResourceTag/{k}": v for k, v in key_tags.items()},
               **{f"aws:RequestTag/{k}": v for k, v in request_tags.items()}}
    assert as_vision_prod(bootstrap, action, KEY, context) != ALLOW


def test_a_team_deploy_role_creates_tags_and_manages_its_own_keys(bootstrap):
    create = {"aws:RequestTag/team": "vision", "aws:RequestTag/stack": "team-vision-prod"}
    assert as_vision_prod(bootstrap, "kms:CreateKey", "*", create) == ALLOW
    assert as_vision_prod(bootstrap, "kms:TagResource", KEY, create) == ALLOW  # the Tags of CreateKey
    own = {"aws:ResourceTag/team": "vision", "aws:ResourceTag/stack": "team-vision-prod"}
    for action in ("kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:TagResource"):
        assert as_vision_prod(bootstrap, action, KEY, own) == ALLOW, action
    assert as_vision_prod(bootstrap, "kms:CreateKey", "*", {"aws:RequestTag/team": "vision"}) != ALLOW

def test_a_team_deploy_role_reaches_no_platform_data_nor_other_environments(bootstrap):
    for action, resource in (
            ("s3:GetObject", f"{BUCKET}/checkpoints/pretrain/x"),
            ("s3:GetObject", f"arn:aws:s3:::gpu-training-dev-artifacts-{ACCOUNT}/teams/vision/x"),
            ("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/hf-token-Ab"),
            ("iam:PutRolePolicy", f"{IAM}:role/gpu-training-ci-deploy-prod"),
            ("iam:CreateRole", f"{IAM}:role/gpu-training-prod-cluster"),
            ("s3:GetObject", f"{BUCKET.replace('artifacts', 'x')}/.pulumi/stacks/gpu-training/prod.json")):
        assert as_vision_prod(bootstrap, action, resource) != ALLOW, f"{action} on {resource}"


def test_a_role_the_team_stack_creates_must_carry_the_team_boundary(bootstrap):
    own = f"{IAM}:role/gpu-training-prod-vision-trainer"
    assert as_vision_prod(bootstrap, "iam:CreateRole", own, {"iam:PermissionsBoundary": TEAM_BOUNDARY}) == ALLOW
    assert as_vision_prod(bootstrap, "iam:CreateRole", own, {}) == DENY
    env_boundary = f"{IAM}:policy/gpu-training-boundary-prod"
    assert as_vision_prod(bootstrap, "iam:CreateRole", own, {"iam:PermissionsBoundary": env_boundary}) == DENY
    assert as_vision_prod(bootstrap, "iam:DeleteRolePermissionsBoundary", own) == DENY


def test_the_team_deploy_role_is_trusted_by_its_repository_in_its_environment_only(bootstrap):
    trust, _, _ = team_role(bootstrap, "gpu-training-ci-team-vision-prod")
    host = "token.actions.githubusercontent.com"
    ours = {f"{host}:aud": "sts.amazonaws.com", f"{host}:sub": "repo:example-org/vision-training:environment:prod"}
    assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, ours) == ALLOW
    for sub in ("repo:example-org/vision-training:environment:dev", "repo:example-org/gpu-training:environment:prod",
                "repo:example-org/audio-training:environment:prod", "repo:example-org/vision-training:pull_request"):
        assert evaluate(trust, "sts:AssumeRoleWithWebIdentity", None, {**ours, f"{host}:sub": sub}) != ALLOW, sub


def test_the_environment_deploy_role_cannot_change_a_team_deploy_role_or_boundary(bootstrap):
    (guard,) = [r for r in bootstrap.of_type("aws:iam/policy:Policy") if r["inputs"]["name"] == "gpu-training-ci-deploy-prod-guard"]
    document = json.loads(guard["inputs"]["policy"])
    assert evaluate(document, "iam:PutRolePolicy", f"{IAM}:role/gpu-training-ci-team-vision-prod") == DENY
    assert evaluate(document, "iam:CreatePolicyVersion", TEAM_BOUNDARY) == DENY


def raw(teams_value: Any) -> dict[str, Any]:
    return {"gpu-training-bootstrap:region": "us-east-1", "gpu-training-bootstrap:costCenter": "ml",
            "gpu-training-bootstrap:stacksProject": "gpu-training",
            "gpu-training-bootstrap:github": {"repository": "acme/gpu-training"},
            "gpu-training-bootstrap:environments": {"dev": None, "prod": None},
            "gpu-training-bootstrap:teams": teams_value}


def load(teams_value: Any):
    return load_bootstrap_config(raw(teams_value), project="gpu-training-bootstrap", stack="bootstrap")


def test_the_registry_gives_each_team_its_repository_and_environments():
    config = load({"vision": {"repository": "acme/vision"}, "audio": {"repository": "acme/audio", "environments": ["prod"]}})
    assert [(t.name, t.repository, t.environments) for t in config.teams] == [
        ("audio", "acme/audio", ("prod",)), ("vision", "acme/vision", ("dev", "prod"))]


@pytest.mark.parametrize(("teams_value", "says"), [
    ({"vision": {"repository": "acme/vision"}, "vision-x": {"repository": "acme/vx"}}, "overlaps team 'vision'"),
    ({"Vision": {"repository": "acme/vision"}}, "is not a team name"),
    ({"vision": {"repository": "vision"}}, "is not OWNER/REPO"),
    ({"vision": {"repository": "acme/vision", "environments": ["staging"]}}, "is not an environment of this bootstrap"),
    ({"vision": {}}, "repository"),
])
def test_a_bad_registry_is_refused_with_the_key_and_the_fix(teams_value, says):
    with pytest.raises(ConfigError) as raised:
        load(teams_value)
    assert says in str(raised.value), str(raised.value)


@pytest.mark.parametrize(("teams_value", "key", "says"), [
    ({"audio": {"repository": "acme/shared"}, "vision": {"repository": "Acme/Shared"}},
     "gpu-training-bootstrap:teams.vision.repository", "is team audio's repository too"),
    ({"vision": {"repository": "ACME/gpu-training"}},
     "gpu-training-bootstrap:teams.vision.repository", "is the platform's own repository"),
])
def test_a_repository_two_trust_subjects_would_share_is_refused(teams_value, key, says):
    """Review (issue 41): one repository's deploy jobs hold one `sub` per stage, so with `team: nlp`
    vision's workflow would assume nlp's role, or a team's the platform's (GitHub's names are not
    case-sensitive: compared case folded)."""
    (problem,) = member_problems(teams_value)
    assert problem.key == key and says in problem.rule, problem
    assert problem.value == repr(teams_value["vision"]["repository"]) and "a repository of its own" in problem.fix


ROLE = "arn:aws:iam::111122223333:role/"
"""A role of the example account (a member's ARN, less its name)."""


def test_the_registry_gives_each_team_its_members_as_written():
    config = load({"vision": {"repository": "acme/vision", "members": [f"{ROLE}vision-researchers",
                                                                       f"{ROLE}aws-reserved/sso.amazonaws.com/"
                                                                       "AWSReservedSSO_Vision_0123456789abcdef"]},
                   "audio": {"repository": "acme/audio"}})
    assert {t.name: t.members for t in config.teams} == {
        "audio": (), "vision": (f"{ROLE}vision-researchers",
                                f"{ROLE}aws-reserved/sso.amazonaws.com/AWSReservedSSO_Vision_0123456789abcdef")}


def member_problems(teams_value: Any, github: dict[str, Any] | None = None) -> list[Any]:
    document = raw(teams_value)
    if github:
        document["gpu-training-bootstrap:github"] = {**document["gpu-training-bootstrap:github"], **github}
    with pytest.raises(ConfigError) as raised:
        load_bootstrap_config(document, project="gpu-training-bootstrap", stack="bootstrap")
    return list(raised.value.problems)


@pytest.mark.parametrize(("members", "says", "fix"), [
    ([f"{ROLE}*"], "is not an IAM role ARN", "as IAM shows it"),
    ([f"{ROLE}vision-?"], "is not an IAM role ARN", "as IAM shows it"),
    ([f"{ROLE}${{aws:username}}"], "is not an IAM role ARN", "as IAM shows it"),
    (["arn:aws:iam::111122223333:user/alice"], "is not an IAM role ARN", "as IAM shows it"),
    (["arn:aws-cn:iam::111122223333:role/vision"], "is in the partition aws-cn", "as IAM shows it"),
    ([f"{ROLE}gpu-training-ci-deploy-prod"], "is one of the project's roles", "remove it"),
    ([f"{ROLE}GPU-Training-prod-vision-trainer"], "is one of the project's roles", "remove it"),
    ([f"{ROLE}vision", f"{ROLE}people/Vision"], "names the role of", "list each role once"),
    ([f"{ROLE}vision", "arn:aws:iam::444455556666:role/vision-2"], "is in account 444455556666", "bootstrap's account"),
])
def test_a_bad_member_is_refused_with_its_key_value_and_fix(members, says, fix):
    problems = member_problems({"vision": {"repository": "acme/vision", "members": members}})
    (problem,) = [p for p in problems if p.key.startswith("gpu-training-bootstrap:teams.vision.members[")]
    assert says in problem.rule and fix in problem.fix, problem
    assert problem.value == repr(members[int(problem.key[-2])]), problem


def test_a_role_listed_under_two_teams_is_refused():
    """EKS holds one access entry per role and cluster: one team's would refuse the other's."""
    problems = member_problems({"audio": {"repository": "acme/audio", "members": [f"{ROLE}people"]},
                                "vision": {"repository": "acme/vision", "members": [f"{ROLE}People"]}})
    (problem,) = problems
    assert problem.key == "gpu-training-bootstrap:teams.vision.members[0]" and "also team audio's member" in problem.rule


def test_a_member_outside_the_oidc_providers_account_is_refused():
    provider = "arn:aws:iam::444455556666:oidc-provider/token.actions.githubusercontent.com"
    (problem,) = member_problems({"vision": {"repository": "acme/vision", "members": [f"{ROLE}vision"]}},
                                 github={"oidcProviderArn": provider})
    assert problem.key == "gpu-training-bootstrap:teams.vision.members[0]" and "is in account 111122223333" in problem.rule


def test_a_real_deploy_refuses_members_of_another_account():
    """The account the bootstrap deploys to, known once its caller is (bootstrap/__main__.py)."""
    config = load({"vision": {"repository": "acme/vision", "members": [f"{ROLE}vision"]}})
    refuse_members_of_other_accounts(config, "111122223333")
    with pytest.raises(ConfigError) as raised:
        refuse_members_of_other_accounts(config, "999988887777")
    (problem,) = raised.value.problems
    assert problem.key == "gpu-training-bootstrap:teams.vision.members[0]" and "999988887777" in problem.fix


def test_the_bootstrap_exports_each_team_stacks_deploy_role(bootstrap):
    """The registry's team vision has no `environments`: a role for each configured environment."""
    assert set(bootstrap.outputs["teamDeployRoleArns"]) == {"team-vision-dev", "team-vision-staging", "team-vision-prod"}


def test_a_team_deploy_role_decrypts_its_environments_config_secrets_only(bootstrap):
    """The secrets-provider keys admit, among the project's roles, the environment's CI roles: a
    team stack's config secrets need its team deploy role among them, and no other environment's."""
    documents = {r["name"]: json.loads(r["inputs"]["policy"]) for r in bootstrap.of_type("aws:kms/key:Key")}
    role = f"{IAM}:role/gpu-training-ci-team-vision-prod"
    request = {"aws:PrincipalArn": role, "aws:PrincipalTag/project": "gpu-training-bootstrap"}
    prod_key, dev_key = documents["state-secrets-prod"], documents["state-secrets-dev"]
    assert evaluate(prod_key, "kms:Decrypt", "*", request) == ALLOW
    assert evaluate(dev_key, "kms:Decrypt", "*", request) == DENY


def test_the_team_deploy_role_may_create_every_role_of_the_team_stack(bootstrap, plan_of):
    """Issue 41 item 1: the team stack's roles take names its deploy role and boundary cover; the
    trainer role once took Pulumi's generated `team-trainer-<suffix>`, outside `gpu-training-prod-vision-*`."""
    names = [r["inputs"].get("name") for r in plan_of("team-vision-prod").of_type("aws:iam/role:Role")]
    assert names and all(names), f"a role of the team stack without a physical name: {names}"
    for name in names:
        assert as_vision_prod(bootstrap, "iam:CreateRole", f"{IAM}:role/{name}",
                              {"iam:PermissionsBoundary": TEAM_BOUNDARY}) == ALLOW, name


STATE = f"arn:aws:s3:::gpu-training-bootstrap-state-{ACCOUNT}"


def test_the_team_state_pattern_writes_what_pulumi_up_writes_for_its_stack_and_no_other():
    """teams.team_state_objects stands for names.py stack_objects in the boundary (its 6,144): every
    object `pulumi up` writes for team-vision-prod, and none of another stack's."""
    def written(stack: str) -> list[str]:  # one object under each of stack_objects' patterns
        return [arn.replace("*", "x") for arn in stack_objects(STATE, "gpu-training", stack)]

    compact = teams.team_state_objects(STATE, "gpu-training", "team-vision-prod")
    assert all(any(glob_match(p, obj) for p in compact) for obj in written("team-vision-prod"))
    for other in ("team-vision-staging", "team-vision-x-prod", "team-audio-prod", "prod", "prod-usw2"):
        assert not any(glob_match(p, obj) for p in compact for obj in written(other)), other
