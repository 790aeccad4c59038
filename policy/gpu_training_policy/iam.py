"""IAM documents read as IAM reads them: statements, Action/NotAction, Resource/NotResource,
wildcards, string or list forms, JSON text or a mapping.

Matching follows the IAM reference (https://docs.aws.amazon.com/IAM/latest/UserGuide/
reference_policies_elements_resource.html): `*` is any run of characters and `?` one character
within an ARN segment, and a `*` ending a segment extends across colons; actions match without
regard to case (reference_policies_elements_action.html). Where the pack cannot tell whether
a wildcard stays within its segment it assumes it does not: a wider match only refuses more.

Instead of spelling out what a pattern may look like, the scope policy asks IAM's own question:
does this statement allow a probe action on a probe ARN that belongs to another project (or, in a
team stack, another team)? `arn:*:secretsmanager:*:*:*`, `arn:aws:s3:::*`, `*` and
`arn:aws:secretsmanager:us-east-1:1:secret:*` all answer yes, whatever their spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationArgs, Severity

from gpu_training_policy.resources import Report, Stack, as_list, describe, json_document, known, stack_of
from gpu_training_policy.rules import resource_rule

POLICY_FIELDS = {
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/policy:Policy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
}
ROLE = "aws:iam/role:Role"
# A project name no real project of this account uses: the probes' "another project".
OTHER_PROJECT = "zz-other-project"
OTHER_TEAM = "zz-other-team"
# The region and account a probe takes where the pattern names none (or a wildcard).
PROBE_REGION, PROBE_ACCOUNT = "us-east-1", "000000000000"
# Stack kinds whose identity policies are held to the scope rules. The bootstrap's CI roles and
# boundaries are judged by the IAM evaluator tests (tests/iam_eval.py, issue #28 item 1); add
# "bootstrap" here once they grant no whole service on `*`.
SCOPED_KINDS = ("platform", "team")
ARN = re.compile(r"^arn:(?P<partition>[^:]*):(?P<service>[^:]*):(?P<region>[^:]*):(?P<account>[^:]*):(?P<resource>.*)$")


# --- matching -----------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _glob(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.DOTALL if case_sensitive else re.IGNORECASE | re.DOTALL)


def matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM's string match with `*` and `?`; across segments too (the wider reading)."""
    return bool(_glob(pattern, case_sensitive).match(value))


def action_matches(pattern: str, action: str) -> bool:
    return matches(pattern, action, case_sensitive=False)


@dataclass(frozen=True)
class Statement:
    """One statement, its lists normalised: `actions` holds Action or NotAction (see `not_action`)."""

    effect: str
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    principal: Any
    condition: Mapping[str, Any]

    def allows_action(self, action: str) -> bool:
        hit = any(action_matches(p, action) for p in self.actions)
        return hit != self.not_action

    def covers(self, arn: str) -> bool:
        hit = any(matches(p, arn) for p in self.resources)
        return hit != self.not_resource

    def allows(self, action: str, arn: str) -> bool:
        return self.effect == "Allow" and self.allows_action(action) and self.covers(arn)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in as_list(value) if isinstance(v, str))


def parse_statements(document: Any) -> list[Statement]:
    """The statements of a policy given as JSON text or a mapping; one statement or a list."""
    parsed = json_document(document)
    if parsed is None:
        return []
    found = []
    for raw in as_list(parsed.get("Statement")):
        if not isinstance(raw, Mapping):
            continue
        not_action, not_resource = "NotAction" in raw, "NotResource" in raw
        condition = raw.get("Condition")
        found.append(Statement(
            effect=str(raw.get("Effect", "")),
            actions=_strings(raw.get("NotAction" if not_action else "Action")),
            not_action=not_action,
            resources=_strings(raw.get("NotResource" if not_resource else "Resource")),
            not_resource=not_resource,
            principal=raw.get("Principal"),
            condition=condition if isinstance(condition, Mapping) else {},
        ))
    return found


def identity_documents(resource_type: str, props: Any) -> Iterator[tuple[str, Any]]:
    """(where, document) of every identity policy a resource carries; values not known yet (a
    preview) are left out: they are judged at `pulumi up`."""
    if field := POLICY_FIELDS.get(resource_type):
        document = known(props, field)
        if document is not None:
            yield field, document
    if resource_type == ROLE:
        for index, inline in enumerate(as_list(known(props, "inlinePolicies"))):
            document = known(inline, "policy")
            if document is not None:
                yield f"inlinePolicies[{index}]", document


# --- probes -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    """An action on a resource of someone else's: a statement that allows it reaches too far."""

    action: str
    service: str
    resource: str
    """The ARN after `arn:<partition>:<service>:<region>:<account>:`."""
    whose: str
    global_service: bool = False

    def arn(self, pattern: str) -> str:
        """The probe's ARN in the pattern's partition, region and account where those are
        literal: the question is whether the pattern's resource part reaches it."""
        match = ARN.match(pattern)
        def literal(part: str, default: str) -> str:
            value = match[part] if match else ""
            return value if value and "*" not in value and "?" not in value else default
        # S3 ARNs carry neither region nor account; IAM's carry no region.
        region = "" if self.global_service or self.service == "s3" else literal("region", PROBE_REGION)
        account = "" if self.service == "s3" else literal("account", PROBE_ACCOUNT)
        return f"arn:{literal('partition', 'aws')}:{self.service}:{region}:{account}:{self.resource}"


def probes(stack: Stack) -> list[Probe]:
    other = OTHER_PROJECT
    found = [
        Probe("s3:GetObject", "s3", f"{other}-{stack.environment}-data/teams/{stack.team or 'x'}/probe", "another project's"),
        Probe("s3:PutObject", "s3", f"{other}-{stack.environment}-data/probe", "another project's"),
        Probe("secretsmanager:GetSecretValue", "secretsmanager", f"secret:{other}/{stack.environment}/token-AbCdEf",
              "another project's"),
        Probe("ssm:GetParameter", "ssm", f"parameter/{other}/{stack.environment}/token", "another project's"),
        Probe("ssm:SendCommand", "ec2", "instance/i-0123456789abcdef0", "any instance's (another project's runners)"),
        Probe("ssm:StartSession", "ec2", "instance/i-0123456789abcdef0", "any instance's (another project's runners)"),
        Probe("iam:PassRole", "iam", f"role/{other}-admin", "another project's", global_service=True),
        Probe("sts:AssumeRole", "iam", f"role/{other}-admin", "another project's", global_service=True),
        Probe("kms:Decrypt", "kms", "key/00000000-0000-0000-0000-000000000000", "any key's (key ARNs carry no project)"),
        Probe("kms:PutKeyPolicy", "kms", "key/00000000-0000-0000-0000-000000000000", "any key's"),
        Probe("eks:AssociateAccessPolicy", "eks", f"cluster/{other}-{stack.environment}", "another project's"),
        Probe("eks:CreateAccessEntry", "eks", f"cluster/{other}-{stack.environment}", "another project's"),
        Probe("ecr:PutImage", "ecr", f"repository/{other}/trainer", "another project's"),
        Probe("logs:GetLogEvents", "logs", f"log-group:/aws/eks/{other}-{stack.environment}/cluster:*", "another project's"),
        Probe("elasticfilesystem:ClientRootAccess", "elasticfilesystem", "file-system/fs-00000000", "any file system's"),
    ]
    if stack.is_team:
        team, env, project = OTHER_TEAM, stack.environment, stack.project
        found += [
            Probe("s3:GetObject", "s3", f"{project}-{env}-artifacts-000000000000/teams/{team}/model.pt", "another team's"),
            Probe("s3:PutObject", "s3", f"{project}-{env}-artifacts-000000000000/teams/{team}/model.pt", "another team's"),
            Probe("secretsmanager:GetSecretValue", "secretsmanager", f"secret:{project}/{env}/teams/{team}/token-AbCdEf",
                  "another team's"),
            Probe("sts:AssumeRole", "iam", f"role/{project}-{env}-team-{team}-secrets", "another team's", global_service=True),
            Probe("iam:PassRole", "iam", f"role/{project}-{env}-team-{team}-trainer", "another team's", global_service=True),
        ]
    return found


def _probe_hits(statement: Statement, stack: Stack) -> list[str]:
    hits = []
    for probe in probes(stack):
        patterns = statement.resources if not statement.not_resource else ("",)
        for pattern in patterns:
            arn = probe.arn(pattern)
            if statement.allows(probe.action, arn):
                hits.append(f"allows {probe.action} on {probe.whose} {arn}")
                break
    return hits


def _wide(pattern: str) -> bool:
    """Every resource of a service: `*`, or an ARN whose resource part is `*`."""
    if pattern == "*":
        return True
    match = ARN.match(pattern)
    return bool(match) and match["resource"] == "*" and all(
        match[p] in ("", "*") for p in ("region", "account"))


def statement_problems(statement: Statement, stack: Stack, scoped: bool) -> list[str]:
    """Why an Allow statement of an identity policy is too wide; empty when it is not."""
    if statement.effect != "Allow":
        return []
    problems = []
    if statement.not_action:
        problems.append(f"allows every action except {', '.join(statement.actions)} (NotAction with Allow)")
    if statement.not_resource:
        problems.append(f"allows every resource except {', '.join(statement.resources)} (NotResource with Allow)")
    if not scoped or problems:
        return problems
    whole = [a for a in statement.actions if a == "*" or a.endswith(":*")]
    wide = [r for r in statement.resources if _wide(r)]
    if whole and wide:
        problems.append(f"grants whole services ({', '.join(whole)}) on every resource ({', '.join(wide)})")
    return problems + _probe_hits(statement, stack)


@resource_rule(Severity.CRITICAL)
def iam_statements_scoped(args: ResourceValidationArgs, report: Report) -> None:
    """Identity policies allow no NotAction/NotResource; in platform and team stacks no whole service on every resource, and
    no statement that matches, as IAM matches ARNs, another project's (or another team's) resources."""
    stack = stack_of(args.urn, args.provider)
    scoped = stack.kind in SCOPED_KINDS
    what = describe(args.name, args.resource_type)
    for where, document in identity_documents(args.resource_type, args.props):
        for index, statement in enumerate(parse_statements(document)):
            for problem in statement_problems(statement, stack, scoped):
                report(f"{what} {where} statement {index} {problem}. Name the actions and this project's "
                       "own resources (team stacks: the team's own).")


# --- trust policies -----------------------------------------------------------------------------

BARE_ACCOUNT = re.compile(r"^\d{12}$")
ROOT_PRINCIPAL = re.compile(r"^arn:[^:]+:iam::(?P<account>\d{12}):root$")
ACCOUNT_OF = re.compile(r"^arn:[^:]+:(?:iam|sts)::(?P<account>\d{12}):")
OIDC_PROVIDER = re.compile(r":oidc-provider/(?P<host>.+)$")
# The one wildcard the project's own trust uses (bootstrap/policies/trust.py pull_request_subject): the
# number of a pull request in `refs/pull/<number>/merge`.
PULL_REQUEST_REF = re.compile(r":pull_request:ref:refs/pull/\*/merge$")
SUBJECT = re.compile(r"^repo:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+:[^*?]+$")
SUB_OPERATORS = ("StringEquals", "StringLike")
GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com"  # bootstrap/policies/trust.py GITHUB_OIDC_AUDIENCE
# Offline plans name a role created in the same stack by the mock engine's ARN, which carries no
# account; such a principal is the stack's own.
MOCK_ARN = "arn:aws:mock:"


def _principals(principal: Any) -> dict[str, list[str]]:
    if principal == "*" or isinstance(principal, str):
        return {"AWS": [str(principal)]}
    if not isinstance(principal, Mapping):
        return {}
    return {str(kind): [str(v) for v in as_list(value)] for kind, value in principal.items()}


def _condition_values(condition: Mapping[str, Any], key: str) -> dict[str, list[str]]:
    """{operator: values} of a condition key (keys match without regard to case, as in IAM)."""
    found: dict[str, list[str]] = {}
    for operator, block in condition.items():
        if isinstance(block, Mapping):
            for name, value in block.items():
                if str(name).lower() == key.lower():
                    found.setdefault(str(operator), []).extend(str(v) for v in as_list(value))
    return found


def subject_problem(subject: str) -> str | None:
    """Why a GitHub OIDC `sub` admits more than one repository's own workflows, or None."""
    exact = PULL_REQUEST_REF.sub(":pull_request:ref:refs/pull/N/merge", subject)
    if "*" in exact or "?" in exact:
        return f"the subject {subject} has a wildcard (only the pull request number of refs/pull/*/merge may vary)"
    if not SUBJECT.match(exact):
        return f"the subject {subject} names no single repository (repo:<owner>/<repo>:...)"
    return None


def _web_identity_problems(provider: str, condition: Mapping[str, Any]) -> list[str]:
    host_match = OIDC_PROVIDER.search(provider)
    hosts = [host_match["host"]] if host_match else sorted(
        {host for block in condition.values() if isinstance(block, Mapping) for k in block
         if "." in (host := str(k).rsplit(":", 1)[0])})  # token claims are keyed by the issuer's host name
    if not hosts:
        return [f"trusts the identity provider {provider} without any condition on its tokens"]
    problems = []
    for host in hosts:
        audiences = _condition_values(condition, f"{host}:aud")
        if audiences.get("StringEquals") != [GITHUB_OIDC_AUDIENCE] or set(audiences) - {"StringEquals"}:
            problems.append(f"trusts {host} without StringEquals {host}:aud = {GITHUB_OIDC_AUDIENCE}")
        subjects = _condition_values(condition, f"{host}:sub")
        if not subjects or set(subjects) - set(SUB_OPERATORS):
            problems.append(f"trusts {host} without a StringEquals/StringLike condition on {host}:sub")
        problems += [p for s in subjects.get("StringLike", []) + subjects.get("StringEquals", []) if (p := subject_problem(s))]
    return problems


def trust_problems(statement: Statement, accounts: set[str]) -> list[str]:
    if statement.effect != "Allow":
        return []
    if statement.principal is None:
        return ["has an Allow without a Principal (NotPrincipal with Allow trusts everyone else)"]
    problems = []
    for kind, values in _principals(statement.principal).items():
        for value in values:
            if kind == "Federated":
                problems += _web_identity_problems(value, statement.condition)
            elif kind != "AWS":
                continue  # Service principals: an AWS service acting for this account
            elif value == "*":
                problems.append("trusts every principal (*)")
            elif BARE_ACCOUNT.match(value) or ROOT_PRINCIPAL.match(value):
                problems.append(f"trusts the whole account {value} (any principal there with sts:AssumeRole)")
            elif (match := ACCOUNT_OF.match(value)) and accounts and match["account"] not in accounts:
                problems.append(f"trusts {value} of another account (this stack's: {', '.join(sorted(accounts))})")
            elif not match and not value.startswith(MOCK_ARN):
                problems.append(f"trusts {value}, which is not a role of this account")
    return problems


def _own_accounts(args: ResourceValidationArgs) -> set[str]:
    """The accounts a role may trust: the policy's `accountIds`, else the account of the role's
    own permissions boundary (the stack's account, from its config)."""
    configured = {str(a) for a in as_list((args.get_config() or {}).get("accountIds"))}
    if configured:
        return configured
    boundary = known(args.props, "permissionsBoundary")
    match = ACCOUNT_OF.match(boundary) if isinstance(boundary, str) else None
    return {match["account"]} if match else set()


# The settings a stack's policy configuration may give role-trust-scoped.
ROLE_TRUST_SCOPED_SETTINGS = PolicyConfigSchema(properties={
    "accountIds": {"type": "array", "items": {"type": "string"},
                   "description": "When set, the accounts whose roles a trust policy may name."},
})


@resource_rule(Severity.CRITICAL, config_schema=ROLE_TRUST_SCOPED_SETTINGS, resource_type=ROLE)
def role_trust_scoped(args: ResourceValidationArgs, report: Report) -> None:
    """Role trust policies trust no `*`, no bare account or account root, no role of another account, and GitHub OIDC only
    with aud sts.amazonaws.com and an exact sub (the pull request number excepted)."""
    document = known(args.props, "assumeRolePolicy")
    accounts = _own_accounts(args)
    for index, statement in enumerate(parse_statements(document)):
        for problem in trust_problems(statement, accounts):
            report(f"{describe(args.name, args.resource_type)} trust statement {index} {problem}. Trust a service, "
                   "one role of this account, or GitHub's OIDC provider with its audience and an exact subject.")


POLICIES = (iam_statements_scoped, role_trust_scoped)

