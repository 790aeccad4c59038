"""rules.py: a check function declares its policy (name, description, severity, enforcement), and
a check of one resource type is never asked about another."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from gpu_training_policy import POLICIES
from gpu_training_policy.rules import resource_rule, stack_rule
from pulumi_policy import EnforcementLevel, Severity

BUCKET = "aws:s3/bucket:Bucket"


def test_a_check_names_and_describes_its_policy():
    @resource_rule(Severity.LOW, EnforcementLevel.ADVISORY)
    def buckets_are_tagged(args: Any, report: Any) -> None:
        """Buckets carry
        the cost tags."""

    assert (buckets_are_tagged.name, buckets_are_tagged.description) == ("buckets-are-tagged", "Buckets carry the cost tags.")
    assert (buckets_are_tagged.enforcement_level, buckets_are_tagged.severity) == (EnforcementLevel.ADVISORY, Severity.LOW)


def test_a_check_of_one_type_is_asked_only_about_that_type():
    asked: list[str] = []

    @resource_rule(Severity.HIGH, resource_type=BUCKET)
    def only_buckets(args: Any, report: Any) -> None:
        """Only buckets."""
        asked.append(args.resource_type)

    for resource_type in (BUCKET, "aws:kms/key:Key", BUCKET):
        only_buckets.validate(SimpleNamespace(resource_type=resource_type), lambda *_: None)
    assert asked == [BUCKET, BUCKET]
    assert only_buckets.enforcement_level == EnforcementLevel.MANDATORY


def test_a_check_without_a_docstring_is_refused_by_name():
    with pytest.raises(ValueError, match="policy undocumented_rule has no docstring"):
        @stack_rule(Severity.LOW)
        def undocumented_rule(args: Any, report: Any) -> None:
            pass


def test_every_policy_of_the_pack_is_named_and_described_on_one_line():
    assert all(p.name and p.description and "\n" not in p.description and "  " not in p.description for p in POLICIES)
    assert len({p.name for p in POLICIES}) == len(POLICIES)
