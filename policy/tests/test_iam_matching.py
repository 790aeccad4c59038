"""The pure helpers of gpu_training_policy.iam: IAM's wildcard match, statement parsing, GitHub
OIDC subjects."""

from __future__ import annotations

import pytest
from gpu_training_policy.iam import Probe, action_matches, matches, parse_statements, subject_problem


@pytest.mark.parametrize(("pattern", "value", "expected"), [
    ("*", "arn:aws:s3:::b/k", True),
    ("arn:aws:s3:::b/*", "arn:aws:s3:::b/teams/x/y", True),
    ("arn:aws:s3:::b/*", "arn:aws:s3:::c/k", False),
    ("arn:aws:s3:::b?/*", "arn:aws:s3:::b1/k", True),
    ("arn:aws:s3:::b?/*", "arn:aws:s3:::b12/k", False),
    ("arn:*:secretsmanager:*:*:secret:*", "arn:aws-us-gov:secretsmanager:us-gov-west-1:1:secret:x", True),
    ("arn:aws:secretsmanager:*", "arn:aws:secretsmanager:us-east-1:1:secret:x", True),  # `*` ending a segment spans colons
    ("arn:aws:s3:::B/*", "arn:aws:s3:::b/k", False),  # resources are case sensitive
    ("arn:aws:s3:::b.c/*", "arn:aws:s3:::bxc/k", False),  # `.` is a character, not a pattern
])
def test_matches(pattern, value, expected):
    assert matches(pattern, value) is expected


@pytest.mark.parametrize(("pattern", "action", "expected"), [
    ("s3:*", "s3:PutObject", True),
    ("S3:put*", "s3:PutObject", True),  # actions are not case sensitive
    ("s3:Get*", "s3:PutObject", False),
    ("secretsmanager:Get?ecretValue", "secretsmanager:GetSecretValue", True),
    ("*", "iam:PassRole", True),
])
def test_action_matches(pattern, action, expected):
    assert action_matches(pattern, action) is expected


@pytest.mark.parametrize("document", [
    '{"Statement": {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}}',
    {"Statement": [{"Effect": "Allow", "NotAction": ["iam:*"], "Resource": ["*"]}]},
])
def test_statements_from_text_or_mapping_string_or_list(document):
    (statement,) = parse_statements(document)
    assert statement.not_action and statement.actions == ("iam:*",) and statement.resources == ("*",)
    assert statement.allows("s3:GetObject", "arn:aws:s3:::b/k")
    assert not statement.allows("iam:PassRole", "arn:aws:iam::1:role/r")


def test_not_resource_allows_everything_else():
    (statement,) = parse_statements({"Statement": {"Effect": "Allow", "Action": "s3:*", "NotResource": "arn:aws:s3:::b/*"}})
    assert statement.allows("s3:GetObject", "arn:aws:s3:::other/k")
    assert not statement.allows("s3:GetObject", "arn:aws:s3:::b/k")


def test_unparseable_documents_have_no_statements():
    assert parse_statements("not json") == [] and parse_statements(None) == [] and parse_statements("[1]") == []


@pytest.mark.parametrize(("subject", "ok"), [
    ("repo:o/r:ref:refs/heads/main", True),
    ("repo:o/r:environment:prod:ref:refs/heads/main", True),
    ("repo:o/r:pull_request", True),
    ("repo:o/r:pull_request:ref:refs/pull/*/merge", True),  # the bootstrap's own pattern
    ("repo:o/r:ref:refs/pull/*/merge:x", False),
    ("repo:o/*", False),
    ("repo:o/r:*", False),
    ("repo:o/r:ref:refs/heads/*", False),
    ("repo:o/r?:ref:refs/heads/main", False),
    ("*", False),
    ("o/r", False),
])
def test_subject_problem(subject, ok):
    assert (subject_problem(subject) is None) is ok


@pytest.mark.parametrize(("pattern", "arn"), [
    ("*", "arn:aws:s3:::x/k"),
    ("arn:aws-cn:s3:::*", "arn:aws-cn:s3:::x/k"),
    ("arn:aws:secretsmanager:*:*:*", "arn:aws:secretsmanager:us-east-1:000000000000:secret:x/k"),
])
def test_probes_take_literal_partitions_and_leave_s3_without_region_and_account(pattern, arn):
    service = arn.split(":")[2]
    resource = "x/k" if service == "s3" else "secret:x/k"
    assert Probe("a", service, resource, "someone's").arn(pattern) == arn
