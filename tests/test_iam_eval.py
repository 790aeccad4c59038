"""The IAM evaluator the bootstrap tests rely on, checked against IAM's documented rules."""

from __future__ import annotations

import pytest
from iam_eval import ALLOW, DENY, IMPLICIT_DENY, MalformedPolicyError, action_matches, evaluate, evaluate_bounded, glob_match


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action="*", resource="*", **condition) -> dict:
    statement = {"Effect": "Allow", "Action": action, "Resource": resource}
    return {**statement, "Condition": condition} if condition else statement


def deny(action="*", resource="*", **condition) -> dict:
    return {**allow(action, resource, **condition), "Effect": "Deny"}


GROUPS = "eks:kubernetesGroups"
TAG = "aws:ResourceTag/environment"


@pytest.mark.parametrize(("glob", "value", "ignore_case", "matches"), [
    ("iam:*Role*", "iam:PutRolePolicy", False, True),
    ("IAM:putrolepolicy", "iam:PutRolePolicy", True, True),
    ("IAM:putrolepolicy", "iam:PutRolePolicy", False, False),
    ("arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b:c", False, True),    # `*` spans `/` and `:`
    ("arn:aws:s3:::b/?", "arn:aws:s3:::b/ab", False, False),
    ("a.b", "axb", False, False),                                  # `.` is literal
])
def test_globs(glob, value, ignore_case, matches):
    assert glob_match(glob, value, ignore_case=ignore_case) is matches


# Actions as IAM compares them (IAM User Guide, "IAM JSON policy elements: Action": "The prefix and
# the action name are case insensitive"); a model that glob-matched the whole string would answer
# the wildcard-prefix rows True where IAM refuses the document.
@pytest.mark.parametrize(("pattern", "action", "matches"), [
    ("S3:PutObject", "s3:putobject", True),                       # both parts without regard to case
    ("s3:putobject", "S3:PutObject", True),
    ("s3:Put*", "s3:PutObjectTagging", True),
    ("s3:Get?bject", "s3:GetObject", True),
    ("s3:Get?bject", "s3:GetObjectAcl", False),
    ("*", "kms:Decrypt", True),
    ("s3:*", "s3express:CreateSession", False),                   # the prefix is whole, not a glob
    ("s3*:GetObject", None, None),                                # wildcard in the prefix: malformed
    ("*:TagResource", None, None),
    ("?3:GetObject", None, None),
    ("s3", None, None),                                           # no prefix separator
    ("s3:", None, None),
])
def test_actions_match_as_iam_compares_them(pattern, action, matches):
    if matches is None:
        with pytest.raises(MalformedPolicyError, match=r"service prefix|neither"):
            action_matches(pattern, "kms:TagResource")
    else:
        assert action_matches(pattern, action) is matches


def test_a_statement_with_a_wildcard_service_prefix_is_refused_not_matched():
    document = policy(allow("s3:GetObject"), deny("*:TagResource"))
    with pytest.raises(MalformedPolicyError, match=r"\*:TagResource"):
        evaluate(document, "s3:GetObject", "arn:aws:s3:::b/k")


@pytest.mark.parametrize(("condition", "context", "holds"), [
    ({"StringEquals": {TAG: "dev"}}, {TAG: "dev"}, True),
    ({"StringEquals": {TAG: "dev"}}, {}, False),                                   # missing key: false
    ({"StringEquals": {TAG: ["dev", "staging"]}}, {TAG: "staging"}, True),         # values ORed
    ({"StringNotEquals": {TAG: "dev"}}, {TAG: "prod"}, True),
    ({"StringNotEquals": {TAG: "dev"}}, {TAG: "dev"}, False),
    ({"StringNotEquals": {TAG: "dev"}}, {}, True),                                 # missing key: true
    ({"StringLike": {"k": "repo:o/r:pull_request:*"}}, {"k": "repo:o/r:pull_request:ref:x"}, True),
    ({"StringNotLike": {"k": "a-*"}}, {"k": "a-1"}, False),
    ({"StringNotLike": {"k": "a-*"}}, {"k": "b-1"}, True),
    ({"StringNotLike": {"k": "a-*"}}, {}, True),
    ({"ArnEquals": {"iam:PolicyARN": "arn:aws:iam::aws:policy/X"}}, {"iam:PolicyARN": "arn:aws:iam::aws:policy/X"}, True),
    ({"ArnNotEquals": {"k": "arn:a"}}, {"k": "arn:a"}, False),
    ({"ArnLike": {"k": "arn:aws:iam::*:role/x-*"}}, {"k": "arn:aws:iam::1:role/x-y"}, True),
    ({"ArnNotLike": {"k": "arn:aws:iam::*:role/x-*"}}, {"k": "arn:aws:iam::1:role/z"}, True),
    # ArnEquals takes wildcards as ArnLike does (one row of IAM's table for both): exact compare
    # here would call an ArnNotEquals Deny on `role/*` stricter than IAM holds it.
    ({"ArnEquals": {"k": "arn:aws:iam::1:role/*"}}, {"k": "arn:aws:iam::1:role/x"}, True),
    ({"ArnNotEquals": {"k": "arn:aws:iam::1:role/x-?"}}, {"k": "arn:aws:iam::1:role/x-y"}, False),
    # Each of the six components on its own: a `*` does not span a colon; the resource keeps its own.
    ({"ArnLike": {"k": "arn:aws:iam::*"}}, {"k": "arn:aws:iam::1:role/x"}, False),
    ({"ArnLike": {"k": "arn:*:iam::1:role/x"}}, {"k": "arn:aws:iam::1:role/x"}, True),
    ({"ArnLike": {"k": "arn:aws:logs:r:1:log-group:/a/*"}}, {"k": "arn:aws:logs:r:1:log-group:/a/b:*"}, True),
    # Case-sensitive, though IAM role names are not.
    ({"ArnEquals": {"k": "arn:aws:iam::1:role/x"}}, {"k": "arn:aws:iam::1:role/X"}, False),
    ({"StringEqualsIfExists": {TAG: "dev"}}, {}, True),                            # IfExists: missing is fine
    ({"StringEqualsIfExists": {TAG: "dev"}}, {TAG: "prod"}, False),
    ({"Null": {TAG: "true"}}, {}, True),
    ({"Null": {TAG: "false"}}, {}, False),
    ({"Null": {TAG: "false"}}, {TAG: "dev"}, True),
    ({"Bool": {"aws:SecureTransport": "false"}}, {"aws:SecureTransport": "false"}, True),
    ({"NumericLessThan": {"s3:TlsVersion": "1.2"}}, {"s3:TlsVersion": "1.1"}, True),
    # A policy variable takes the request's value; naming a key the request lacks, it holds for nothing.
    ({"StringNotEquals": {"aws:PrincipalTag/environment": "${aws:ResourceTag/environment}"}},
     {"aws:PrincipalTag/environment": "dev", "aws:ResourceTag/environment": "prod"}, True),
    ({"StringNotEquals": {"aws:PrincipalTag/environment": "${aws:ResourceTag/environment}"}},
     {"aws:PrincipalTag/environment": "prod", "aws:ResourceTag/environment": "prod"}, False),
    ({"StringNotEquals": {"aws:PrincipalTag/environment": "${aws:ResourceTag/environment}"}},
     {"aws:PrincipalTag/environment": "dev"}, False),
    # Several operators and keys in one block are ANDed.
    ({"StringEquals": {TAG: "dev"}, "Null": {"iam:PermissionsBoundary": "false"}}, {TAG: "dev"}, False),
    # Set qualifiers on a multivalued key: every value of the request, or any one.
    ({"ForAllValues:StringEquals": {GROUPS: ["team-a-members"]}}, {GROUPS: ["team-a-members"]}, True),
    ({"ForAllValues:StringEquals": {GROUPS: ["team-a-members"]}}, {GROUPS: ["team-a-members", "system:masters"]}, False),
    ({"ForAllValues:StringEquals": {GROUPS: ["team-a-members"]}}, {}, True),          # no values: true
    ({"ForAnyValue:StringEquals": {GROUPS: ["system:masters"]}}, {GROUPS: ["team-a-members", "system:masters"]}, True),
    ({"ForAnyValue:StringEquals": {GROUPS: ["system:masters"]}}, {}, False),
])
def test_condition_operators(condition, context, holds):
    document = policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": condition})
    assert (evaluate(document, "s3:GetObject", "arn:aws:s3:::b/k", context) == ALLOW) is holds


def test_an_operator_it_does_not_model_raises_instead_of_passing():
    document = policy(allow(DateGreaterThan={"aws:CurrentTime": "2020-01-01T00:00:00Z"}))
    with pytest.raises(NotImplementedError, match="DateGreaterThan"):
        evaluate(document, "s3:GetObject", "*", {"aws:CurrentTime": "2021-01-01T00:00:00Z"})


def test_explicit_deny_wins_then_allow_then_implicit_deny():
    document = policy(allow("s3:*"), deny("s3:DeleteBucket"))
    assert evaluate(document, "s3:DeleteBucket", "arn:aws:s3:::b") == DENY
    assert evaluate(document, "s3:GetObject", "arn:aws:s3:::b/k") == ALLOW
    assert evaluate(document, "ec2:RunInstances", "*") == IMPLICIT_DENY


def test_not_action_and_not_resource():
    document = policy({"Effect": "Deny", "NotAction": ["s3:ListBucket"], "Resource": "arn:aws:s3:::state"},
                      {"Effect": "Allow", "Action": "s3:*", "NotResource": "arn:aws:s3:::state/secret*"})
    assert evaluate(document, "s3:ListBucket", "arn:aws:s3:::state") == ALLOW
    assert evaluate(document, "s3:PutBucketPolicy", "arn:aws:s3:::state") == DENY
    assert evaluate(document, "s3:GetObject", "arn:aws:s3:::state/secret-1") == IMPLICIT_DENY


def test_a_boundary_caps_the_identity_policy():
    identity = policy(allow("*"))                                   # an inline *:* policy
    boundary = policy(allow(["s3:*", "ec2:Describe*"]), deny("s3:*", "arn:aws:s3:::prod-*"))
    assert evaluate_bounded(identity, boundary, "s3:GetObject", "arn:aws:s3:::dev-data/k") == ALLOW
    assert evaluate_bounded(identity, boundary, "iam:CreateUser", "*") == IMPLICIT_DENY    # outside the boundary
    assert evaluate_bounded(identity, boundary, "s3:GetObject", "arn:aws:s3:::prod-data/k") == DENY
    # The boundary grants nothing by itself.
    assert evaluate_bounded(policy(allow("s3:GetObject")), boundary, "ec2:DescribeVpcs", "*") == IMPLICIT_DENY
