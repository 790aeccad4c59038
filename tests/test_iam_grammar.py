"""Every IAM document of every plan (the bootstrap's included) in IAM's own grammar, with actions
and condition keys that exist (tests/iam_grammar.py says which rule comes from which page); and
that grammar's model checked on the cases a lenient one gets wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
from iam_grammar import (
    IDENTITY,
    KINDS,
    MANAGED,
    ROLE_INLINE_LIMIT,
    TRUST,
    action_problems,
    actions_named,
    document_problems,
    plan_documents,
    reference,
    role_inline_sizes,
    service_actions,
)
from stack_configs import ROOT

from bootstrap import policies

KEY_POLICY = KINDS[("aws:kms/key:Key", "policy")]
BUCKET_POLICY = KINDS[("aws:s3/bucketPolicy:BucketPolicy", "policy")]


def text(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: Any = "s3:GetObject", resource: Any = "arn:aws:s3:::b/*", **more: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


ACCOUNT_ROOT = {"AWS": "arn:aws:iam::123456789012:root"}
GITHUB = {"Federated": "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"}


@pytest.mark.parametrize(("document", "kind", "problem"), [
    # Actions: the prefix is literal, the names exist, case does not matter.
    (text(allow("*:TagResource")), IDENTITY, "wildcard in its service prefix"),
    (text(allow("s3*:GetObject")), IDENTITY, "wildcard in its service prefix"),
    (text(allow("S3:getobject")), IDENTITY, None),                                 # IAM: case-insensitive
    (text(allow("s3:GetObjects")), IDENTITY, "names no action of s3"),             # misspelt
    (text(allow("sns:Describe*")), IDENTITY, "names no action of sns"),            # a wildcard matching nothing
    (text(allow("s3storage:GetObject")), IDENTITY, "no service has the prefix s3storage"),
    (text(allow("GetObject")), IDENTITY, "neither `*` nor <service prefix>"),
    # ARNs: six fields, a partition, the forms the service's resource types take.
    (text(allow(resource="arn:aws:ec2:us-east-1:*")), IDENTITY, "neither `*` nor arn:"),
    (text(allow(resource="arn:aws:ec2:us-east-1:*:*")), IDENTITY, None),
    (text(allow(resource="arn:*:s3:::b/*")), IDENTITY, None),                      # wildcard partition: fine
    (text(allow(resource="arn:awz:s3:::b/*")), IDENTITY, "no partition awz"),
    (text(allow(resource="arn:aws:s3:us-east-1::b/*")), IDENTITY, "no form of a s3 resource type"),  # S3: no region
    (text(allow("kms:Decrypt", "arn:aws:kms:us-east-1:1:keys/x")), IDENTITY, "no form of a kms resource type"),
    (text(allow("kms:Decrypt", "arn:aws:kms:us-east-1:1:key/x")), IDENTITY, None),
    # Conditions: IAM's operators, qualifiers and keys.
    (text(allow(Condition={"StringEqualz": {"aws:RequestedRegion": "us-east-1"}})), IDENTITY, "operator StringEqualz"),
    (text(allow(Condition={"NullIfExists": {"aws:TagKeys": "true"}})), IDENTITY, "operator NullIfExists"),
    (text(allow(Condition={"ForAnyValue:StringLikeIfExists": {"aws:TagKeys": "a*"}})), IDENTITY, None),
    (text(allow(Condition={"StringEquals": {"aws:RequestedRegionn": "x"}})), IDENTITY, "condition key aws:RequestedRegionn"),
    (text(allow(Condition={"StringEquals": {"s3:Prefixx": "x"}})), IDENTITY, "condition key s3:Prefixx"),
    (text(allow(Condition={"StringEquals": {"AWS:ResourceTag/project": "x", "kms:EncryptionContext:k": "v"}})),
     IDENTITY, None),                                                              # keys: any case, ${...} parts
    (text(allow(Condition={"Bool": {"aws:SecureTransport": "no"}})), IDENTITY, "takes true or false"),
    # Elements by kind: no Principal in an identity policy, no Resource in a trust policy.
    (text(allow(Principal=ACCOUNT_ROOT)), IDENTITY, "has Principal, which this kind"),
    (text(allow()), KEY_POLICY, "neither Principal nor NotPrincipal"),
    (text({"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity", "Principal": GITHUB, "Resource": "*"}),
     TRUST, "has Resource, which this kind"),
    (text({"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity", "Principal": GITHUB, "Condition": {
        "StringEquals": {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com"}}}), TRUST, None),
    (text(allow(Principal={"Service": "s3"})), BUCKET_POLICY, "no service principal"),
    (text(allow(Actions="s3:GetObject")), IDENTITY, "element Actions"),
    (text({**allow(), "NotAction": "s3:PutObject"}), IDENTITY, "both Action and NotAction"),
    (text({"Effect": "allow", "Action": "s3:GetObject", "Resource": "*"}), IDENTITY, "Effect 'allow'"),
    # Sids: letters and digits, once each (IAM's own policies; a key policy takes spaces).
    (text(allow(Sid="Read objects")), IDENTITY, "letters and digits only"),
    (text(allow(Sid="Read objects", Principal=ACCOUNT_ROOT)), KEY_POLICY, None),
    (text(allow(Sid="A"), allow(Sid="A")), IDENTITY, "repeats a Sid"),
    (json.dumps({"Version": "2008-10-17", "Statement": [allow()]}), IDENTITY, "Version '2008-10-17'"),
])
def test_the_grammar_model(document, kind, problem):
    found = document_problems(document, kind)
    if problem is None:
        assert not found
    else:
        assert any(problem in p for p in found), found


def test_sizes_count_as_iam_counts():
    """A managed policy holds 6,144 characters, white space not counted (IAM and AWS STS quotas)."""
    names = [f"arn:aws:s3:::bucket-{i:04d}/*" for i in range(200)]
    fits = json.dumps({"Version": "2012-10-17", "Statement": [allow(resource=names)]}, indent=8)
    assert len(fits) > 6144 and not document_problems(fits, MANAGED)
    over = text(allow(resource=[*names, *(f"arn:aws:s3:::more-{i:04d}/*" for i in range(20))]))
    assert any("over the 6144 of a managed policy" in p for p in document_problems(over, MANAGED))


# Every stack file, so a stack added later is checked too; and the bootstrap's.
STACKS = ["bootstrap", *sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                               for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))]


@pytest.mark.parametrize("stack", STACKS)
def test_every_iam_document_of_every_plan_is_in_iams_grammar(plan_of, stack):
    documents = plan_documents(plan_of(stack).resources)
    assert documents, f"{stack}: no IAM document found"
    unknown = sorted({f"{d.type} {d.field}" for d in documents if d.kind is None})
    assert not unknown, f"{stack}: IAM documents of a kind tests/iam_grammar.py KINDS lacks (add its kind): {unknown}"
    found = {d.where: problems for d in documents if d.kind and (problems := document_problems(d.text, d.kind))}
    assert not found, f"{stack}: IAM would refuse or find nothing named by: {json.dumps(found, indent=1)}"
    over = {role: size for role, size in role_inline_sizes(plan_of(stack).resources).items() if size > ROLE_INLINE_LIMIT}
    assert not over, f"{stack}: roles over the 10,240 characters of inline policy (IAM and AWS STS quotas): {over}"


# --- the bootstrap's tables checked against the Service Authorization Reference -------------------

def _tagging_actions_with_resource_tags(service: str) -> set[str]:
    """`service:Name` of every Tagging action of the service on a resource that takes aws:ResourceTag."""
    data, found = reference(), set()
    for name in service_actions(service):
        details = data.actions.get_action_details(service, name)
        if "Tagging" not in details.get("accessLevel", ""):
            continue
        keys = set(details.get("conditionKeys", []))
        for resource_type in details.get("resourceTypes", []):
            keys |= set(data.resources.get_resource_type_details(service, resource_type["name"]).get("conditionKeys", []))
        if any(k.lower().startswith("aws:resourcetag/") for k in keys):
            found.add(f"{service}:{name}".lower())
    return found


def test_tagging_actions_are_every_tagging_action_of_the_deploy_roles_services_and_no_other():
    """bootstrap/policies/scope.py TAGGING_ACTIONS (DenyRetaggingOtherProjects): service by service, no
    `*:` prefix, and every action they match a Tagging one."""
    services = sorted({*policies.MANAGED_SERVICES.values(), "elasticloadbalancing"})
    expected = set().union(*(_tagging_actions_with_resource_tags(s) for s in services))
    matched = {a.lower() for pattern in policies.TAGGING_ACTIONS for a in actions_named(pattern)}
    assert not [p for a in policies.TAGGING_ACTIONS if (p := action_problems(a))]
    assert not expected - matched, f"add to TAGGING_ACTIONS: {sorted(expected - matched)}"
    assert not matched - expected, f"TAGGING_ACTIONS matches actions that are not tagging: {sorted(matched - expected)}"


def test_the_read_verbs_left_out_name_no_action():
    """bootstrap/policies/deploy.py NO_READS_OF_VERB leaves out only wildcards that match nothing."""
    for service, verbs in policies.NO_READS_OF_VERB.items():
        for verb in verbs:
            assert not actions_named(f"{service}:{verb}*"), f"{service}:{verb}* names actions now: drop it from the table"
