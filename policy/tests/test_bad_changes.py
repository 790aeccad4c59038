"""Deliberately bad changes to real plans, registered as the program would register them, are
reported by policy name with the resource's URN and name. And a preview's unknown values never
turn into a verdict the plan would not get."""

from __future__ import annotations

import pytest
from conftest import STACKS, plan_records
from gpu_training_policy import POLICIES
from gpu_training_policy.offline import evaluate
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE
from records import find, resource, with_changes

GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
BUCKET = "aws:s3/bucket:Bucket"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def mandatory(violations):
    return sorted((v.policy, v.urn) for v in violations if v.level == "mandatory")


def test_open_ingress_on_the_fabric_group():
    records = plan_records("prod")
    fabric = find(records, GROUP, "security-groups-efa-fabric")
    rule = resource(INGRESS, "security-groups-efa-fabric-from-anywhere", {
        "securityGroupId": "security-groups-efa-fabric-id", "cidrIpv4": "0.0.0.0/0", "ipProtocol": "-1",
        "description": "debugging"}, stack="prod", depends={"securityGroupId": [fabric]})

    violations = evaluate(with_changes(records, add=(rule,)), POLICIES)

    assert mandatory(violations) == [("fabric-admits-only-itself", rule["urn"]), ("no-open-ingress", rule["urn"])]
    assert all("security-groups-efa-fabric-from-anywhere" in v.message for v in violations if v.urn == rule["urn"])


def test_bucket_without_encryption():
    records = plan_records("prod")
    datasets = find(records, BUCKET, "storage-buckets-datasets")
    encryption = find(records, SSE, "storage-buckets-datasets")

    violations = evaluate(with_changes(records, drop=(encryption["urn"],)), POLICIES)

    assert mandatory(violations) == [("bucket-sse-kms", datasets["urn"])]
    assert "storage-buckets-datasets" in next(v.message for v in violations if v.policy == "bucket-sse-kms")


def test_team_stack_creating_a_node_group():
    records = plan_records("team-vision-prod")
    node_group = resource(NODE_GROUP, "team-gpus", {
        "clusterName": "gpu-training-prod", "amiType": "AL2023_x86_64_NVIDIA", "capacityType": "SPOT",
        "instanceTypes": ["g6.48xlarge", "g5.48xlarge"], "launchTemplate": {"id": "lt", "version": "1"},
        "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]}, stack="team-vision-prod")

    violations = evaluate(with_changes(records, add=(node_group,)), POLICIES)

    # Refused twice: the team allow-list has no node group, and team-stack-scope names it shared.
    assert mandatory(violations) == [("allowed-resource-types", node_group["urn"]), ("team-stack-scope", node_group["urn"])]
    assert any("team stack team-vision-prod creates a node group: team-gpus" in v.message for v in violations)


def _as_in_preview(records):
    """The plan as a first preview sees it: ids and ARNs of resources not created yet are unknown,
    and so is every value computed from one (a policy document naming an ARN). The mock engine
    names them `<name>-id` and `arn:aws:mock:...`."""
    def unknown(value):
        if isinstance(value, str) and (value.endswith("-id") or "arn:aws:mock:" in value):
            return UNKNOWN_STRING_VALUE
        if isinstance(value, dict):
            return {k: unknown(v) for k, v in value.items()}
        if isinstance(value, list):
            return [unknown(v) for v in value]
        return value
    return [r | {"inputs": unknown(r["inputs"])} for r in records]


@pytest.mark.parametrize("stack", STACKS)
def test_a_preview_with_unknown_ids_gets_no_new_verdict(stack):
    offline = evaluate(plan_records(stack), POLICIES)
    preview = evaluate(_as_in_preview(plan_records(stack)), POLICIES)

    assert mandatory(preview) == mandatory(offline) == []
    not_run = {v.policy for v in preview if v.message.startswith("can't run during preview")}
    # Stack policies relate resources through property dependencies, never through ids.
    assert not not_run & {"fabric-admits-only-itself", "bucket-sse-kms", "bucket-versioning",
                          "bucket-public-access-blocked", "bucket-tls-only", "stack-has-budget"}


def test_the_access_log_bucket_passes_sse_s3_only_as_a_log_target():
    records = plan_records("prod")
    logging = [r for r in records if r["type"] == "aws:s3/bucketLogging:BucketLogging"]
    targets = {u for r in logging for u in r["propertyDependencies"]["targetBucket"]}
    assert len(targets) == 1, "the data buckets log into one bucket"

    sources = {u for r in logging for u in r["propertyDependencies"]["bucket"]}
    violations = evaluate(with_changes(records, drop=tuple(r["urn"] for r in logging)), POLICIES)

    # Without logging the target is a plain bucket: SSE-S3 no longer passes, and (mandatory since the
    # state bucket logs) neither the data buckets nor the former target log any more.
    target = next(iter(targets))
    assert sorted(mandatory(violations)) == sorted([("bucket-sse-kms", target), ("bucket-access-logging", target),
                                                    *(("bucket-access-logging", u) for u in sources)])
