"""The allow-list table against the plans: every type each stack plans is listed for its kind,
and no entry is there that no plan uses, unless its reason says why."""

from __future__ import annotations

import json

import pytest
from conftest import BOOTSTRAP_STACKS, STACKS, plan_records
from gpu_training_policy.allowed_types import ALLOWED_TYPES, KINDS, UNPLANNED, allowed_entry
from gpu_training_policy.offline import OfflineStack
from gpu_training_policy.resources import stack_of
from pulumi_policy import PolicyProviderResource

ALL_STACKS = STACKS + BOOTSTRAP_STACKS


def planned_types() -> dict[str, set[str]]:
    """{kind: the types that kind's plans create}."""
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for name in ALL_STACKS:
        records = plan_records(name)
        offline = OfflineStack(records)
        for record in records:
            kind = stack_of(record["urn"], offline.provider(record)).kind
            found[kind].add(record["type"])
    return found


def test_the_plans_cover_every_kind():
    assert {kind for kind, types in planned_types().items() if types} == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_planned_type_is_allowed_for_its_kind(kind):
    missing = sorted(t for t in planned_types()[kind] if allowed_entry(t, kind) is None)
    assert missing == [], f"{kind} stacks plan types allowed_types.py does not list for {kind}: {missing}"


def test_no_entry_without_a_plan_unless_its_reason_says_why():
    planned = planned_types()
    unused = []
    for entry in ALLOWED_TYPES:
        for kind in entry.kinds.split():
            used = any(allowed_entry(t, kind) == entry for t in planned[kind])
            if not used and UNPLANNED not in entry.reason:
                unused.append(f"{entry.type} ({kind})")
    assert unused == [], f"entries no plan uses (say '{UNPLANNED}: why' in the reason, or remove them): {unused}"


def test_every_entry_is_one_type_with_known_kinds_and_a_reason():
    types = [e.type for e in ALLOWED_TYPES]
    assert len(types) == len(set(types)), "one line per type"
    for entry in ALLOWED_TYPES:
        assert entry.reason.strip(), entry.type
        assert entry.kinds.split() and set(entry.kinds.split()) <= set(KINDS), entry.type
        assert entry.type.count(":") >= 2 or entry.type.endswith("*"), entry.type


@pytest.mark.parametrize(("resource_type", "kind", "allowed"), [
    ("aws:iam/role:Role", "team", True),
    ("aws:ec2/vpc:Vpc", "platform", True),
    ("aws:ec2/vpc:Vpc", "team", False),
    ("aws:iam/policy:Policy", "platform", False),
    ("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "bootstrap", True),
    ("aws-native:s3:Bucket", "platform", False),
    ("command:local:Command", "platform", False),
    ("command:remote:Command", "team", False),
    ("pulumi-python:dynamic:Resource", "platform", False),
    ("pulumi-nodejs:dynamic:Resource", "team", False),
    ("random:index/randomPassword:RandomPassword", "team", False),
    ("aws:lambda/function:Function", "platform", False),
    ("gpu-training:workload:TrainingJob", "team", True),
    ("gpu-training:network:Network", "team", False),
    ("gpu-training:bootstrap:StateBackend", "platform", False),
    ("kubernetes:helm.sh/v3:Release", "team", False),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "platform", True),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "team", False),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "team", False),
    ("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster", "team", False),
    ("aws:s3/bucketReplicationConfig:BucketReplicationConfig", "team", False),
    ("aws:cloudwatch/dashboard:Dashboard", "team", True),
    ("kubernetes:networking.k8s.io/v1:Ingress", "team", True),
    ("aws:ec2/vpcX:Vpc", "platform", False),  # a near name is not the listed type
])
def test_allowed_entry(resource_type, kind, allowed):
    assert (allowed_entry(resource_type, kind) is not None) is allowed


def tagged(**tags: str) -> PolicyProviderResource:
    return PolicyProviderResource("pulumi:providers:aws", {"defaultTags": json.dumps({"tags": tags})},
                                  "urn:pulumi:x::gpu-training::pulumi:providers:aws::aws", "aws")


@pytest.mark.parametrize(("stack", "project", "provider", "kind", "environment", "team"), [
    ("dev", "gpu-training", None, "platform", "dev", None),
    ("prod-usw2", "gpu-training", None, "platform", "prod", None),  # by name: its Kubernetes objects carry no tags
    ("staging-euw1", "gpu-training", None, "platform", "staging", None),
    ("prod-usw2", "gpu-training", tagged(environment="prod"), "platform", "prod", None),
    ("dev-usw2", "gpu-training", tagged(environment="prod"), "platform", "dev", None),  # a tag does not make it prod
    ("dev", "gpu-training", tagged(environment="prod"), "platform", "dev", None),
    ("team-vision-prod", "gpu-training", None, "team", "prod", "vision"),
    ("prod-usw2", "gpu-training", tagged(team="vision"), "team", "prod", "vision"),  # a team tag makes it a team's
    ("sandbox", "gpu-training", tagged(environment="dev"), "platform", "dev", None),  # no environment in the name
    ("prod-us-west-2", "gpu-training", None, "platform", None, None),  # not the regional form
    ("bootstrap", "gpu-training-bootstrap", None, "bootstrap", None, None),
])
def test_stack_of_kind_environment_team(stack, project, provider, kind, environment, team):
    found = stack_of(f"urn:pulumi:{stack}::{project}::aws:s3/bucket:Bucket::b", provider)
    assert (found.kind, found.environment, found.team) == (kind, environment, team)
