"""The plan records what the policy engine needs besides inputs: URNs as the engine forms them,
whether a resource is custom, and which resources each input was computed from."""

from __future__ import annotations

from plan import engine_urn


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
