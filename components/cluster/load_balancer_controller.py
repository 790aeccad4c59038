"""AWS Load Balancer Controller: turns the viewer's Ingresses into one Application Load Balancer.

Installed from its published chart (eks/aws-load-balancer-controller, https://aws.github.io/eks-charts)
into kube-system, on the system pool, with an EKS Pod Identity role carrying the IAM policy the
project documents for the pinned version (docs/install/iam_policy.json at the app version's tag,
stored verbatim in components/facts/aws_load_balancer_controller_iam_policy.json with its source
and commit; the stack's partition is written into its ARNs here).

What it makes is bounded by the Ingresses (components/workload/viewer.py): an internal ALB (unless
`viewer.internetFacing`), IP targets, and the security group components/network planned, which
it attaches by Name tag and whose rules it leaves alone. It is not the default for Services of
type LoadBalancer (`enableServiceMutatorWebhook: false`): the platform makes none, and the
webhook's `failurePolicy: Fail` would make every such Service wait on this controller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from components.cluster.pool_scheduling import POOL_LABEL
from components.common.helm import helm_release
from components.facts.regions import arn_partition
from components.identity.workload_roles import pod_identity_role

# Chart 3.5.0 is app v3.5.0 (helm/aws-load-balancer-controller/Chart.yaml at tag v3.5.0, commit
# 11eb202c97e4ae2ee45e0658c4cde9a4b59f33d4, 2026-08-03; the chart eks-charts publishes is that one).
# Every value key set below is in that tag's values.yaml.
CHART_VERSION = "3.5.0"
APP_VERSION = "v3.5.0"
CHART_REPO = "https://aws.github.io/eks-charts"
CHART = "aws-load-balancer-controller"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
POLICY_FILE = Path(__file__).resolve().parent.parent / "facts" / "aws_load_balancer_controller_iam_policy.json"
# The chart leaves resources unset (values.yaml `resources: {}`, its commented example: cpu 100m,
# memory 128Mi). Requests as that example; a memory limit with room for the informers' caches of
# a large cluster's pods, services and nodes.
RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}


def documented_policy(partition: str = "aws") -> dict[str, Any]:
    """The controller's documented IAM policy of APP_VERSION, in the stack's partition."""
    stored = json.loads(POLICY_FILE.read_text())
    assert stored["tag"] == APP_VERSION, f"{POLICY_FILE.name} is of {stored['tag']}, the chart runs {APP_VERSION}"
    text = json.dumps(stored["policy"])
    return json.loads(text.replace('"arn:aws:', f'"arn:{partition}:'))


def policy_actions(policy: dict[str, Any]) -> list[str]:
    """Every action the policy allows (a permissions boundary must allow them all)."""
    actions: set[str] = set()
    for statement in policy["Statement"]:
        action = statement["Action"]
        actions.update([action] if isinstance(action, str) else action)
    return sorted(actions)


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    cluster_name: str
    """The cluster whose Ingresses it serves (the chart's clusterName: it tags what it makes with it)."""
    cluster: aws.eks.Cluster
    """The cluster of the Pod Identity association and the Helm release."""
    region: str
    """Its AWS region, and the partition of its policy's ARNs."""
    account_id: pulumi.Input[str]
    """The account of the Pod Identity role's trust."""
    vpc_id: pulumi.Input[str]
    """The VPC of the load balancers (given, so the pod need not ask the instance metadata)."""
    system_pool: str
    """The pool it runs on."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the release: the node groups it runs on."""


class LoadBalancerController(pulumi.ComponentResource):
    def __init__(self, name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:LoadBalancerController", name, None, opts)
        # checkov CKV_AWS_290/CKV_AWS_355 (writes and restrictable actions on "*"), deliberately:
        # the policy is the controller's published one, verbatim (its own tag conditions scope the
        # writes to what it created); the environment's permissions boundary caps it to the
        # project's resources (bootstrap/policies/boundary.py, tests/test_checkov_plans.py JUSTIFIED).
        self.role, association = pod_identity_role(
            name, account_id=args.account_id, policy=json.dumps(documented_policy(arn_partition(args.region))),
            cluster_name=args.cluster.name, namespace=NAMESPACE, service_account=SERVICE_ACCOUNT,
            opts=pulumi.ResourceOptions(parent=self))
        self.release = helm_release(
            f"{name}-release", chart=CHART, version=CHART_VERSION, repo=CHART_REPO, namespace=NAMESPACE,
            values=controller_values(args.cluster_name, args.region, args.vpc_id, args.system_pool),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association, *args.depends_on]))
        self.register_outputs({"roleArn": self.role.arn})


def controller_values(cluster_name: str, region: str, vpc_id: pulumi.Input[str], system_pool: str) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "nodeSelector": {POOL_LABEL: system_pool},
        "resources": RESOURCES,
        # Ingresses name their class (`alb`); nothing else becomes this controller's by default.
        "ingressClassConfig": {"default": False},
        "enableServiceMutatorWebhook": False,
        # The VPC CNI gives pods VPC addresses: the ALB sends to the pods, not through node ports.
        "defaultTargetType": "ip",
    }
