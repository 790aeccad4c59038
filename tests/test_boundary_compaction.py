"""The boundary as rendered (`boundary_policy`) decides every request as the boundary as written
(`boundary_as_written`, statement by statement with its Sids) does: judged with tests/iam_eval.py
on a corpus of requests, of the environment, of another environment, of another project, of the
read buckets, of prod-named buckets, with and without the tags the Denies look at.

Two corpora: every action against every resource, for the steps that hold for any request
(bootstrap/policies/compact.py, and DenyProdBuckets' unreachable patterns); and each action
against its own service's resources and `*` only, for the steps that rely on it (a request names
a resource of its action's service: boundary.py MERGED_BY_SERVICE)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from iam_eval import evaluate
from stack_configs import ROOT

from bootstrap.config import BootstrapConfig, load_bootstrap_config
from bootstrap.policies.actions import BOUNDARY_ACTIONS
from bootstrap.policies.boundary import (
    _merged_by_service,
    _without_unreachable_prod_patterns,
    boundary_as_written,
    boundary_policy,
)
from bootstrap.policies.compact import compact_policy, subsumed_by, without_subsumed
from bootstrap.policies.scope import BOUNDARY_NEVER_ACTIONS

ACCOUNT = "123456789012"
# staging is rendered as dev is (no sites, no prod exceptions): test_bootstrap_policy_sizes covers its size.
ENVIRONMENTS = ("dev", "prod")
LONG = "l" * 62  # with the 1-character suffixes below: 63 characters, the longest bucket name
# Read buckets that exercise each step: plain; a prod name (dash, dot, exact, `production`);
# one named like the environment's own buckets (and a prod one of them); one that starts the own
# buckets' names; two where one name starts the other; the longest names.
READ_BUCKETS = ["shared-datasets", "datasets-prod", "prod", "raw.production.eu", "{own}-prod", "{own}-extra",
                "gpu", "shared-datasets-v2", f"{LONG}a", f"{LONG}b"]

EXTRA_ACTIONS = [
    "s3:PutBucketPolicy", "s3:DeleteBucket", "s3:ListAllMyBuckets", "s3:GetObjectAcl", "s3:CreateBucket",
    "eks:CreateCluster", "eks:DeleteNodegroup", "eks:AssociateAccessPolicy", "eks:ListClusters",
    "logs:DeleteLogGroup", "logs:PutSubscriptionFilter", "sts:TagSession", "iam:CreateRole", "iam:PassRole",
    "iam:CreateServiceLinkedRole", "ec2:RunInstances", "ec2:TerminateInstances", "kms:ScheduleKeyDeletion",
    "secretsmanager:PutSecretValue", "ssm:PutParameter", "elasticloadbalancing:DeleteLoadBalancer",
    "autoscaling:DeleteAutoScalingGroup", "ecr:PutImage",
]
# The Allow statements are the same list in both (test_the_allow_statements_are_unchanged): one
# action of each service they allow, every action a Deny names, and actions no one is allowed.
ACTIONS = sorted({group[0] for group in BOUNDARY_ACTIONS.values()} | set(BOUNDARY_NEVER_ACTIONS) | set(EXTRA_ACTIONS)
                 | {"s3:GetObject", "s3:ListBucket", "s3:PutObject", "sts:AssumeRole", "logs:CreateLogGroup",
                    "logs:PutLogEvents", "ec2:CreateTags", "ec2:DeleteTags", "ec2:CreateNetworkInterface",
                    "ec2:DescribeInstances", "ec2:AttachVolume", "eks:DescribeCluster",
                    "autoscaling:SetDesiredCapacity", "kms:Decrypt"})


def config_with(read_buckets: bool) -> BootstrapConfig:
    raw = copy.deepcopy(yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())["config"])
    if read_buckets:
        for name, entry in raw["gpu-training-bootstrap:environments"].items():
            entry["readBuckets"] = [b.format(own=f"gpu-training-{name}") for b in READ_BUCKETS]
    return load_bootstrap_config(raw, project="gpu-training-bootstrap", stack="bootstrap")


def resources(env: str) -> list[str]:
    """ARNs of the environment's, another environment's, another project's and prod's."""
    other = "prod" if env != "prod" else "dev"
    buckets = [f"gpu-training-{env}-data", f"gpu-training-{env}-prod", f"gpu-training-{other}-data", "other-data",
               "prod-data", "x-prod", "a.prod.b", "production", "prodigy", "shared-datasets", "shared-datasetsx",
               "shared-datasets-v2", "datasets-prod", "prod", "raw.production.eu", "gpu", "gpux",
               f"gpu-training-{env}-extra", f"{LONG}a", f"{LONG}ab", f"{LONG}b"]
    s3 = [arn for b in buckets for arn in (f"arn:aws:s3:::{b}", f"arn:aws:s3:::{b}/a-prod")]
    clusters = [f"gpu-training-{env}", f"gpu-training-{env}-usw2", f"gpu-training-{other}", "other-cluster"]
    return [
        "*", *s3,
        *(f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/{c}" for c in clusters),
        *(f"arn:aws:eks:us-east-1:{ACCOUNT}:nodegroup/{c}/ng/1" for c in clusters),
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
        *(f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/eks/{c}/cluster" for c in clusters),
        *(f"arn:aws:iam::{ACCOUNT}:role/{r}" for r in (f"gpu-training-{env}-x", f"gpu-training-{other}-x", "other")),
        *(f"arn:aws:ec2:us-east-1:{ACCOUNT}:{kind}/{kind[:3]}-1" for kind in (
            "instance", "network-interface", "security-group", "snapshot", "image", "volume",
            "vpc-peering-connection", "route-table")),
        f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:s",
        f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/p", "arn:aws:ssm:us-east-1::document/AWS-RunShellScript",
        f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/r",
        f"arn:aws:elasticloadbalancing:us-east-1:{ACCOUNT}:loadbalancer/app/a/1",
        "arn:aws:elasticloadbalancing:us-east-1:999999999999:loadbalancer/app/a/1",
        f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/g",
    ]


def contexts(env: str) -> list[dict[str, str]]:
    other = "prod" if env != "prod" else "dev"
    env_tag, project_tag = "aws:ResourceTag/environment", "aws:ResourceTag/project"
    return [
        {}, {env_tag: env}, {env_tag: other}, {project_tag: "gpu-training"},
        {project_tag: "gpu-training", env_tag: env}, {project_tag: "gpu-training", env_tag: other},
        {"aws:RequestTag/project": "gpu-training", env_tag: env},
        {"ec2:CreateAction": "RunInstances", env_tag: env},
        {"aws:ResourceTag/aws:eks:cluster-name": f"gpu-training-{env}",
         "aws:ResourceTag/cluster.k8s.amazonaws.com/name": f"gpu-training-{env}"},
        {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com", env_tag: env},
    ]


def resource_service(resource: str) -> str | None:
    return resource.split(":")[2] if resource.startswith("arn:") else None


def own_service(action: str, resource: str) -> bool:
    """Whether IAM could be asked `action` on `resource`: `*`, or an ARN of the action's service
    (sts:AssumeRole names an IAM role, eks-auth an EKS cluster, SSM's commands an EC2 instance)."""
    service = action.split(":", 1)[0]
    owners = {"sts": {"iam"}, "eks-auth": {"eks"}, "ssm": {"ssm", "ec2"}, "ec2messages": set(), "ssmmessages": set()}
    return resource == "*" or resource_service(resource) in owners.get(service, {service})


def differences(before: dict[str, Any], after: dict[str, Any], env: str, *, own_service_only: bool) -> Iterator[str]:
    for action in ACTIONS:
        for resource in resources(env):
            if own_service_only and not own_service(action, resource):
                continue
            for context in contexts(env):
                was, now = evaluate(before, action, resource, context), evaluate(after, action, resource, context)
                if was != now:
                    yield f"{action} {resource} {context}: {was} -> {now}"


@pytest.fixture(scope="module", params=[False, True], ids=["shipped", "read-buckets"])
def config(request: pytest.FixtureRequest) -> BootstrapConfig:
    return config_with(request.param)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_steps_for_any_request_keep_every_decision(config, env):
    written = boundary_as_written(config, env, account_id=ACCOUNT)
    exact = compact_policy(_without_unreachable_prod_patterns(config, env, written))
    changed = list(differences(written, exact, env, own_service_only=False))
    assert not changed, changed[:20]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_rendered_boundary_keeps_every_decision_of_the_written_one(config, env):
    written = boundary_as_written(config, env, account_id=ACCOUNT)
    rendered = boundary_policy(config, env, account_id=ACCOUNT)
    assert rendered == compact_policy(_merged_by_service(
        config, env, _without_unreachable_prod_patterns(config, env, written)))
    changed = list(differences(written, rendered, env, own_service_only=True))
    assert not changed, changed[:20]


def test_the_corpus_tells_the_steps_from_a_widening(config):
    """The corpus catches a boundary that allows more: without DenyProdBuckets, or without a read
    bucket's write Deny, decisions change."""
    written = boundary_as_written(config, "dev", account_id=ACCOUNT)
    for dropped in ("DenyProdBuckets", "ReadOnlyOfReadBuckets", "DenyOtherProjectsRoles"):
        widened = {**written, "Statement": [s for s in written["Statement"] if s.get("Sid") != dropped]}
        if widened != written:
            assert next(differences(written, widened, "dev", own_service_only=True), None), dropped


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_allow_statements_are_unchanged(config, env):
    def allows(document: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(sorted(s["Action"]) if isinstance(s["Action"], list) else [s["Action"]], s["Resource"] in ("*", ["*"]),
                 str(s.get("Condition"))) for s in document["Statement"] if s["Effect"] == "Allow"]
    written = boundary_as_written(config, env, account_id=ACCOUNT)
    rendered = boundary_policy(config, env, account_id=ACCOUNT)
    assert [(a, star) for a, star, _ in allows(written)] == [(a, star) for a, star, _ in allows(rendered)]


def test_a_pattern_is_subsumed_only_by_a_wider_one_ending_in_a_wildcard():
    assert subsumed_by("arn:aws:s3:::prod-*/*", "arn:aws:s3:::prod-*")
    assert subsumed_by("arn:aws:s3:::*-prod-*/*", "arn:aws:s3:::*-prod-*")
    assert not subsumed_by("arn:aws:s3:::*-prod/*", "arn:aws:s3:::*-prod")   # `*-prod` is no prefix pattern
    assert not subsumed_by("arn:aws:s3:::b", "arn:aws:s3:::b/*")
    assert without_subsumed(["a*", "a*/*", "b", "b", "b/*"]) == ["a*", "b", "b/*"]
