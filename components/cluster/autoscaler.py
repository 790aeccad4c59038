"""Cluster Autoscaler: adds nodes for pending pods, removes idle ones, scales GPU pools from zero.

Discovery is by the tags EKS puts on managed node groups' Auto Scaling groups; the node-template
tags from node_pools.py let it size a pool that has no node yet. The priority expander prefers
reserved capacity, then spot, then on-demand when several pools fit a pod. With
provisioning requests enabled it serves Kueue's ProvisioningRequests: all of a gang's nodes in one
scale-up (provisioning_requests.py). Its IAM role (EKS Pod Identity) may change only Auto Scaling
groups tagged as owned by this cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster.pool_scheduling import POOL_LABEL, expander_priorities
from components.common import iam
from components.common.helm import helm_release
from components.config import NodePoolConfig
from components.config.scale_down import ScaleDownConfig
from components.facts.eks_versions import CLUSTER_AUTOSCALER_IMAGE_TAGS
from components.facts.iam_actions import CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS
from components.facts.regions import arn_partition
from components.identity.workload_roles import pod_identity_role

# One chart for every minor; the image tag per minor comes from facts/eks_versions.py (no chart
# packages CA 1.36, and the chart's image tag is a value). 9.57.0 and later grant the autoscaler
# the provisioningrequests(/status) and podtemplates RBAC that provisioning requests need
# (templates/clusterrole.yaml). Verified: tag cluster-autoscaler-chart-9.59.0 (2026-07-21;
# appVersion 1.35.0), in the repo's index.yaml; every value key set below exists in its values.yaml.
CHART_VERSION = "9.59.0"
# How long the autoscaler waits for a node it asked for before it counts the scale-up as failed,
# shrinks the group again and backs it off (clusterstate.go updateScaleRequests, "ScaleUpTimedOut",
# at tag cluster-autoscaler-1.36.1). The flag's default is 15 min (FAQ.md "What are the parameters
# to CA?": max-node-provision-time 15m0s; config/flags/flags.go). A GPU node counts as unready
# until its GPUs are allocatable (kubernetes/autoscaler#461), so the wait covers EC2 launch,
# nodeadm, joining and the device plugins. The stack's own estimate for a p5.48xlarge is about
# 10 min to boot, join and pull the training image (docs/cost.md "Scale-down", prod's
# scaleDown.unneededMinutes; unmeasured): 15 min leaves too little for a slow launch (32 EFA
# interfaces, RAID0 over 8 NVMe, retries), and a timed-out scale-up of a 2-node gang is reverted
# while the gang waits. 30 min is 3x the estimate (the review's N9 asks 30m); Kueue's
# waitForPodsReady timeout counts it as the provisioning part (components/workload/controllers.py).
MAX_NODE_PROVISION_MINUTES = 30
CHART_REPO = "https://kubernetes.github.io/autoscaler"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    cluster_name: str
    """Finds the node groups by tag k8s.io/cluster-autoscaler/<name>: auto-discovery and the role's scope."""
    cluster: aws.eks.Cluster
    """The cluster the autoscaler's Pod Identity association and Helm release belong to."""
    kubernetes_version: str
    """Picks the autoscaler image of the cluster's minor version (CLUSTER_AUTOSCALER_IMAGE_TAGS)."""
    region: str
    """The autoscaler's AWS region (awsRegion) and that of the node group ARNs it may describe."""
    account_id: pulumi.Input[str]
    """The account of the node groups the autoscaler may describe."""
    pools: tuple[NodePoolConfig, ...]
    """The node pools it scales, in the order of the expander's priorities."""
    system_pool: str
    """The pool the autoscaler itself runs on (never scaled to zero)."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the release: the node groups it runs on and the ProvisioningRequest CRD."""
    scale_down: ScaleDownConfig
    """When an empty or underused node is removed."""


def autoscaler_policy(cluster_name: str, region: str, account_id: str) -> str:
    return iam.policy(
        iam.statement(
            ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"], ["*"],
            sid="ScaleOnlyThisClustersGroups",
            conditions={"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}},
        ),
        iam.statement(["eks:DescribeNodegroup"],
                      [f"arn:{arn_partition(region)}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*"],
                      sid="ReadThisClustersNodeGroups"),
        iam.statement(list(CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS), ["*"], sid="DescribeOnly"),
    )


class ClusterAutoscaler(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:ClusterAutoscaler", name, None, opts)
        _, association = pod_identity_role(
            name, account_id=args.account_id, cluster_name=args.cluster.name, namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT, opts=pulumi.ResourceOptions(parent=self),
            policy=pulumi.Output.from_input(args.account_id).apply(
                lambda account: autoscaler_policy(args.cluster_name, args.region, account)))
        helm_release(
            f"{name}-release",
            chart="cluster-autoscaler",
            version=CHART_VERSION,
            repo=CHART_REPO,
            namespace=NAMESPACE,
            values={
                "cloudProvider": "aws",
                "awsRegion": args.region,
                "autoDiscovery": {"clusterName": args.cluster_name},
                # The autoscaler's minor version must equal the cluster's.
                "image": {"tag": CLUSTER_AUTOSCALER_IMAGE_TAGS[args.kubernetes_version]},
                "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
                "extraArgs": {
                    "expander": "priority",
                    # How long an idle (GPU) node is paid for before it goes: stack config
                    # `scaleDown`, its cost in docs/cost.md.
                    "scale-down-unneeded-time": f"{args.scale_down.unneeded_minutes}m",
                    "scale-down-delay-after-add": f"{args.scale_down.delay_after_add_minutes}m",
                    # Kueue's ProvisioningRequests (class best-effort-atomic-scale-up): CA >= 1.30.1
                    # (cluster-autoscaler FAQ, "ProvisioningRequest").
                    "enable-provisioning-requests": "true",
                    "max-node-provision-time": f"{MAX_NODE_PROVISION_MINUTES}m",
                },
                "expanderPriorities": {str(k): v for k, v in expander_priorities(args.cluster_name, args.pools).items()},
                "nodeSelector": {POOL_LABEL: args.system_pool},
                "priorityClassName": "system-cluster-critical",
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association, *args.depends_on]),
        )
        self.register_outputs({})
