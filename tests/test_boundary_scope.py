"""The permissions boundary keeps a role that holds `*:*` to the project's own route tables, Auto
Scaling groups, log groups, network interfaces and roles (issue 41 item 6), and the deploy role
accepts a peering only from the environment's own VPCs.

Each bypass below is another project's resource in the same account, reached by an action the
boundary allows a role of the stacks (BOUNDARY_ACTIONS): it is Deny under each environment's
boundary; the same action on the project's own resource of that kind stays Allow.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from iam_eval import ALLOW, DENY, evaluate, evaluate_bounded
from stack_configs import PLATFORM_STACKS, environment_of, region_of

from bootstrap import policies
from offline.plan import Plan

ACCOUNT = "123456789012"
INLINE_STAR = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
OTHER = {"aws:ResourceTag/project": "other-project"}


@pytest.fixture(scope="module")
def bootstrap(plan_of) -> Plan:
    return plan_of("bootstrap")


def boundary(plan: Plan, env: str) -> dict[str, Any]:
    record = next(r for r in plan.of_type("aws:iam/policy:Policy")
                  if r["inputs"]["name"] == policies.boundary_policy_name("gpu-training", env))
    return json.loads(record["inputs"]["policy"])


def cluster(stack: str) -> str:
    """The stack's cluster (components/config/stack.py: gpu-training-<stack>)."""
    return f"gpu-training-{stack}"


# (action, resource ARN, tags of the resource) for another project's resource; {region} and
# {cluster} are the stack's. Each action is one the boundary allows a role of the stacks.
BYPASSES = [
    ("ec2:CreateRoute", "arn:aws:ec2:{region}:" + ACCOUNT + ":route-table/rtb-other", {}),
    ("ec2:DeleteRoute", "arn:aws:ec2:{region}:" + ACCOUNT + ":route-table/rtb-other", OTHER),
    ("autoscaling:UpdateAutoScalingGroup",
     f"arn:aws:autoscaling:{{region}}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/other-asg", {}),
    ("autoscaling:TerminateInstanceInAutoScalingGroup",
     f"arn:aws:autoscaling:{{region}}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/other-asg",
     {"aws:ResourceTag/k8s.io/cluster-autoscaler/other-cluster": "owned"}),
    ("autoscaling:SetDesiredCapacity",
     f"arn:aws:autoscaling:{{region}}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/other-asg", OTHER),
    ("logs:PutRetentionPolicy", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/lambda/other-app", {}),
    ("logs:PutRetentionPolicy", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/containerinsights/other-cluster/application", {}),
    ("logs:PutLogEvents", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/lambda/other-app:log-stream:x", {}),
    ("logs:CreateLogGroup", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/other/audit", {}),
    ("ec2:DeleteNetworkInterface", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-other", {}),
    ("ec2:ModifyNetworkInterfaceAttribute", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-other",
     {"aws:ResourceTag/cluster.k8s.amazonaws.com/name": "other-cluster"}),
    ("ec2:AssignPrivateIpAddresses", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-other", OTHER),
    ("ec2:DetachNetworkInterface", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-other", {}),
    # A role of another project that carries the same environment tag.
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/other-project-deployer", {"aws:ResourceTag/environment": "{env}"}),
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/ml-admin", {"aws:ResourceTag/environment": "{env}", **OTHER}),
]

# The project's own resource of each kind, as the stacks make it: what must stay Allow.
OWN = [
    ("ec2:CreateRoute", "arn:aws:ec2:{region}:" + ACCOUNT + ":route-table/rtb-own", "PROJECT"),
    ("autoscaling:UpdateAutoScalingGroup",
     f"arn:aws:autoscaling:{{region}}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/eks-pool-1",
     {"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}),
    ("autoscaling:TerminateInstanceInAutoScalingGroup",
     f"arn:aws:autoscaling:{{region}}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/eks-pool-1",
     {"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}),
    ("logs:PutRetentionPolicy", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/containerinsights/{{cluster}}/application", {}),
    ("logs:PutLogEvents",
     f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/containerinsights/{{cluster}}/performance:log-stream:node-1", {}),
    ("logs:CreateLogGroup", f"arn:aws:logs:{{region}}:{ACCOUNT}:log-group:/aws/containerinsights/{{cluster}}/dataplane", {}),
    # The CNI's own interfaces (tagged with the cluster by the CNI) and a node's primary one
    # (tagged with the project through the launch template).
    ("ec2:DeleteNetworkInterface", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-cni",
     {"aws:ResourceTag/cluster.k8s.amazonaws.com/name": "{cluster}"}),
    ("ec2:AssignPrivateIpAddresses", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/eni-primary", "PROJECT"),
    ("ec2:CreateNetworkInterface", f"arn:aws:ec2:{{region}}:{ACCOUNT}:network-interface/*",
     {"aws:RequestTag/cluster.k8s.amazonaws.com/name": "{cluster}"}),
    # External Secrets assumes a team's secrets reader of its environment.
    ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-{{env}}-team-vision-secrets", "PROJECT"),
]


def request(stack: str, resource: str, tags: dict[str, str] | str) -> tuple[str, dict[str, str]]:
    env = environment_of(stack)
    names = {"region": region_of(stack), "cluster": cluster(stack), "env": env}
    given = {"aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/environment": env} if tags == "PROJECT" else tags
    assert isinstance(given, dict)
    context = {key.format(**names): value.format(**names) for key, value in given.items()}
    context.setdefault("aws:ResourceTag/environment", env)  # the environment tag alone is no pass
    return resource.format(**names), {**context, "aws:RequestedRegion": names["region"]}


def star_role_outcome(bootstrap, stack: str, action: str, resource: str, tags: dict[str, str] | str) -> tuple[str, str]:
    """What a role allowed `*` inline, under its environment's boundary, gets for `action` on
    `resource`, and the request and outcome in words."""
    arn, context = request(stack, resource, tags)
    outcome = evaluate_bounded(INLINE_STAR, boundary(bootstrap, environment_of(stack)), action, arn, context)
    return outcome, f"{stack}: {action} on {arn} with {context}: {outcome}"


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
@pytest.mark.parametrize(("action", "resource", "tags"), BYPASSES)
def test_a_star_role_under_the_boundary_is_refused_another_projects_resource(bootstrap, stack, action, resource, tags):
    outcome, asked = star_role_outcome(bootstrap, stack, action, resource, tags)
    assert outcome == DENY, asked


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
@pytest.mark.parametrize(("action", "resource", "tags"), OWN)
def test_a_star_role_under_the_boundary_still_reaches_the_projects_own(bootstrap, stack, action, resource, tags):
    outcome, asked = star_role_outcome(bootstrap, stack, action, resource, tags)
    assert outcome == ALLOW, asked


def test_a_role_tagged_with_the_environment_but_named_outside_it_is_not_assumable(bootstrap):
    """The environment tag alone was enough before: any project's role tagged environment=prod."""
    tagged = {"aws:ResourceTag/environment": "prod", "aws:ResourceTag/project": "gpu-training"}
    document = boundary(bootstrap, "prod")
    assert evaluate(document, "sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-dev-team-vision-secrets",
                    tagged) == DENY
    assert evaluate(document, "sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-team-vision-secrets",
                    tagged) == ALLOW
