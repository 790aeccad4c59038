"""The plan records what the policy engine needs besides inputs: URNs as the engine forms them,
whether a resource is custom, and which resources each input was computed from."""

from __future__ import annotations

import contextlib

import pytest
from pulumi.runtime import resource as resource_runtime
from pulumi.runtime.proto import source_pb2

from offline import mock_shortcuts
from offline import plan as plan_module
from offline.plan import engine_urn, synthesize


def test_urns_are_the_engines(plan_of):
    plan = plan_of("dev")
    by_name = {(r["type"], r["name"]): r for r in plan.resources}
    vpc = by_name[("aws:ec2/vpc:Vpc", "network-vpc")]
    network = by_name[("gpu-training:network:Network", "network")]
    provider = by_name[("pulumi:providers:aws", "aws")]

    # A top-level resource: no root stack type in front (the engine leaves it out).
    assert network["urn"] == "urn:pulumi:dev::gpu-training::gpu-training:network:Network::network"
    assert provider["urn"] == "urn:pulumi:dev::gpu-training::pulumi:providers:aws::aws"
    # A child: its parent's type, then its own.
    assert vpc["urn"] == "urn:pulumi:dev::gpu-training::gpu-training:network:Network$aws:ec2/vpc:Vpc::network-vpc"
    assert len({r["urn"] for r in plan.resources}) == len(plan.resources)
    assert (network["custom"], vpc["custom"], provider["custom"]) == (False, True, True)


def test_inputs_name_the_resources_they_come_from(plan_of):
    plan = plan_of("dev")
    by_name = {(r["type"], r["name"]): r for r in plan.resources}
    bucket = by_name[("aws:s3/bucket:Bucket", "storage-buckets-datasets")]
    encryption = by_name[("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                          "storage-buckets-datasets")]
    key = by_name[("aws:kms/key:Key", "storage-buckets-data-key")]

    assert encryption["propertyDependencies"] == {"bucket": [bucket["urn"]], "rules": [key["urn"]]}
    urns = {r["urn"] for r in plan.resources}
    assert all(u in urns for r in plan.resources for deps in r["propertyDependencies"].values() for u in deps)


def test_engine_urn_only_drops_the_root_stack():
    assert engine_urn("urn:pulumi:dev::p::pulumi:pulumi:Stack$aws:s3/bucket:Bucket::b") == "urn:pulumi:dev::p::aws:s3/bucket:Bucket::b"
    assert engine_urn("urn:pulumi:dev::p::c:m:C$aws:s3/bucket:Bucket::b") == "urn:pulumi:dev::p::c:m:C$aws:s3/bucket:Bucket::b"


def test_the_sdk_still_has_the_stack_walk_the_plan_skips():
    # An SDK upgrade that renames it would silently bring back a quarter of every plan's time.
    walk = getattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION)
    assert callable(walk)
    assert type(walk()).__name__ == "StackTrace"


def test_the_stack_walk_comes_back_after_the_plan_even_when_the_program_fails():
    walk = getattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION)
    with pytest.raises(RuntimeError), mock_shortcuts.no_source_positions():
        assert getattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION) is not walk
        raise RuntimeError("the program failed")
    assert getattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION) is walk


def test_a_plan_walks_the_stack_only_for_the_root_stack(monkeypatch):
    walks = []

    def counting_walk():
        walks.append(1)
        return source_pb2.StackTrace()

    monkeypatch.setattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION, counting_walk)
    plan = synthesize("team-vision-prod")
    assert len(plan.resources) > 10
    # The root stacks, which the mock runtime registers before the program runs: the team's, and its
    # platform's and each MultiKueue worker's when the plans whose contracts it reads are not cached yet.
    assert len(walks) <= 2 + len(plan.other_clusters)


def test_skipping_source_positions_changes_nothing_in_the_plan(monkeypatch):
    skipped = synthesize("team-vision-prod")
    monkeypatch.setattr(plan_module, "no_source_positions", contextlib.nullcontext)
    walks = []
    walk = getattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION)
    monkeypatch.setattr(resource_runtime, mock_shortcuts.STACK_TRACE_FUNCTION, lambda: walks.append(1) or walk())
    walked = synthesize("team-vision-prod")
    assert len(walks) > len(walked.resources) / 2  # this one did walk
    assert (walked.resources, walked.outputs, walked.parents, walked.dependencies, walked.warnings) == (
        skipped.resources, skipped.outputs, skipped.parents, skipped.dependencies, skipped.warnings)
