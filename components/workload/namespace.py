"""A training namespace: Pod Security labels, quota, default limits and network isolation.

- Pod Security: `baseline` enforced (training pods need no privilege: GPUs and EFA come from
  device plugins), `restricted` warned and audited.
- ResourceQuota caps GPUs (`requests.nvidia.com/gpu`, the only form Kubernetes accepts for
  extended resources), CPU and memory at what the namespace's pools can ever hold; Kueue's
  ClusterQueue decides the fair share inside that cap.
- LimitRange gives every container default requests and a memory limit (no container runs
  without limits; memory is what a leaking trainer exhausts, while CPU shares already keep every pod's
  CPU request, so CPU is not capped by default).
- NetworkPolicies (enforced by the VPC CNI): deny by default; allow traffic between the
  namespace's own pods (rendezvous and NCCL), DNS, HTTPS out (AWS APIs through the VPC
  endpoints and the S3 gateway), and the EKS Pod Identity agent on the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.common.namespaces import (
    DNS_EGRESS,
    HTTPS_EGRESS,
    POD_IDENTITY_EGRESS,
    LabelSelector,
    NetworkPolicySpec,
    namespace,
)
from components.workload.sizing import NamespaceQuota


@dataclass(frozen=True)
class TrainingNamespaceArgs:
    name: str
    """The namespace's name."""
    environment: str
    """Labels the namespace (gpu-training/environment)."""
    team: str | None
    """A team stack's team, labelled on the namespace; None for the platform's."""
    quota: NamespaceQuota
    """The GPUs, CPUs and memory the namespace may request at most."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the namespace (platform stacks: the node groups)."""
    made_by_platform: bool = False
    """A team's namespace: the platform stack makes it, its ResourceQuota and LimitRange from its
    registry of teams (team_tenancy.py); this component then makes the network policies only."""


QUOTA_NAME = "training-quota"
LIMITS_NAME = "container-defaults"


def namespace_labels(environment: str, team: str | None) -> dict[str, str]:
    """The labels a training namespace carries besides Pod Security's."""
    return {"gpu-training/environment": environment, **({"gpu-training/team": team} if team else {})}


def training_namespace(resource_name: str, name: str, *, environment: str, team: str | None,
                       opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    return namespace(resource_name, name, enforce="baseline", labels=namespace_labels(environment, team), opts=opts)


def namespace_quota_and_limits(resource_prefix: str, namespace_name: str, quota: NamespaceQuota,
                               opts: pulumi.ResourceOptions) -> None:
    """The namespace's ResourceQuota and its containers' default requests and limits."""
    k8s.core.v1.ResourceQuota(
        f"{resource_prefix}-quota",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=QUOTA_NAME, namespace=namespace_name),
        spec=k8s.core.v1.ResourceQuotaSpecArgs(hard={
            "requests.nvidia.com/gpu": str(quota.gpus),
            # No limits.cpu: training pods request CPU without a cap (training_job.py), and a
            # quota on limits.cpu would reject every pod that sets none.
            "requests.cpu": str(quota.cpu),
            "requests.memory": f"{quota.memory_gib}Gi",
            "limits.memory": f"{quota.memory_gib}Gi",
            "pods": str(quota.pods),
        }),
        opts=opts,
    )
    k8s.core.v1.LimitRange(
        f"{resource_prefix}-limits",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=LIMITS_NAME, namespace=namespace_name),
        spec=k8s.core.v1.LimitRangeSpecArgs(limits=[k8s.core.v1.LimitRangeItemArgs(
            type="Container",
            default_request={"cpu": "500m", "memory": "1Gi"},
            # Memory only: a default CPU limit would cap a trainer that sets none at 2 cores.
            default={"memory": "4Gi"},
        )]),
        opts=opts,
    )


class TrainingNamespace(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace | None
    """None where the platform makes it (made_by_platform)."""
    name: pulumi.Output[str]
    """The namespace's name: an output of the Namespace where this component makes it."""

    def __init__(self, name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TrainingNamespace", name, None, opts)
        if args.made_by_platform:
            # The platform's, already there (it is deployed first): the team's objects go in by name.
            self.namespace = None
            self.name = pulumi.Output.from_input(args.name)
            inside = pulumi.ResourceOptions(parent=self)
        else:
            self.namespace = training_namespace(f"{name}-namespace", args.name, environment=args.environment,
                                                team=args.team,
                                                opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
            self.name = self.namespace.metadata.name
            inside = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
            namespace_quota_and_limits(name, args.name, args.quota, inside)
        self._create_network_policies(name, args, inside)
        self.register_outputs({"namespace": self.name})

    @staticmethod
    def _create_network_policies(name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions) -> None:
        def policy(suffix: str, spec: NetworkPolicySpec) -> None:
            k8s.networking.v1.NetworkPolicy(
                f"{name}-netpol-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=suffix, namespace=args.name),
                spec=spec,
                opts=opts,
            )

        everything: LabelSelector = {}
        policy("default-deny", {"pod_selector": everything, "policy_types": ["Ingress", "Egress"]})
        policy("allow-same-namespace", {
            "pod_selector": everything,
            "policy_types": ["Ingress", "Egress"],
            "ingress": [{"from_": [{"pod_selector": everything}]}],
            "egress": [{"to": [{"pod_selector": everything}]}],
        })
        policy("allow-dns", {"pod_selector": everything, "policy_types": ["Egress"], "egress": [DNS_EGRESS]})
        # AWS APIs: interface endpoints in the VPC and S3 through its gateway (public IPs).
        policy("allow-https-egress", {"pod_selector": everything, "policy_types": ["Egress"], "egress": [HTTPS_EGRESS]})
        policy("allow-pod-identity-agent", {"pod_selector": everything, "policy_types": ["Egress"],
                                            "egress": [POD_IDENTITY_EGRESS]})
