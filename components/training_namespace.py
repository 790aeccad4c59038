"""A training namespace: Pod Security labels, quota, default limits and network isolation.

- Pod Security: `baseline` enforced (training pods need no privilege: GPUs and EFA come from
  device plugins), `restricted` warned and audited.
- ResourceQuota caps GPUs (`requests.nvidia.com/gpu`, the only form Kubernetes accepts for
  extended resources), CPU and memory at what the namespace's pools can ever hold; Kueue's
  ClusterQueue decides the fair share inside that cap.
- LimitRange gives every container default requests and limits (the seed: always set limits).
- NetworkPolicies (enforced by the VPC CNI): deny by default; allow traffic between the
  namespace's own pods (rendezvous and NCCL), DNS, HTTPS out (AWS APIs through the VPC
  endpoints and the S3 gateway), and the EKS Pod Identity agent on the node.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.job_sizing import NamespaceQuota

# The EKS Pod Identity agent's link-local address on every node (port 80).
POD_IDENTITY_AGENT = "169.254.170.23/32"


def pod_security_labels(enforce: str) -> dict[str, str]:
    return {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


def namespace(resource_name: str, name: str, *, enforce: str, labels: dict[str, str] | None = None,
              opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels={**pod_security_labels(enforce), **(labels or {})}),
        opts=opts,
    )


DNS_EGRESS = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
# The Kubernetes API and AWS APIs (VPC endpoints, S3 gateway) are all HTTPS.
HTTPS_EGRESS = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
POD_IDENTITY_EGRESS = {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}], "ports": [{"protocol": "TCP", "port": 80}]}


def controller_network_policies(resource_prefix: str, namespace: str, *, ingress_ports: tuple[int, ...],
                                ingress_pods: dict | None = None, opts: pulumi.ResourceOptions) -> None:
    """A controller's namespace (CIS EKS 4.3): deny by default; out: DNS, HTTPS and the Pod
    Identity agent; in: only its webhook / API ports (the API server calls them)."""
    everything: dict = {}
    policies = {
        "default-deny": {"podSelector": everything, "policyTypes": ["Ingress", "Egress"]},
        "allow-operator-egress": {"podSelector": everything, "policyTypes": ["Egress"],
                                  "egress": [DNS_EGRESS, HTTPS_EGRESS, POD_IDENTITY_EGRESS]},
        "allow-webhook-ingress": {
            "podSelector": ingress_pods or everything,
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": port} for port in ingress_ports]}],
        },
    }
    for policy_name, spec in policies.items():
        k8s.networking.v1.NetworkPolicy(
            f"{resource_prefix}-netpol-{policy_name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, namespace=namespace),
            spec=spec, opts=opts)


@dataclass(frozen=True)
class TrainingNamespaceArgs:
    name: str
    environment: str
    team: str | None
    quota: NamespaceQuota
    depends_on: list[pulumi.Resource]


class TrainingNamespace(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace

    def __init__(self, name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TrainingNamespace", name, None, opts)
        labels = {"gpu-training/environment": args.environment}
        if args.team:
            labels["gpu-training/team"] = args.team
        self.namespace = namespace(f"{name}-namespace", args.name, enforce="baseline", labels=labels,
                                   opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        inside = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        self._create_quota(name, args, inside)
        self._create_network_policies(name, args, inside)
        self.register_outputs({"namespace": self.namespace.metadata.name})

    @staticmethod
    def _create_quota(name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions) -> None:
        quota = args.quota
        k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="training-quota", namespace=args.name),
            spec=k8s.core.v1.ResourceQuotaSpecArgs(hard={
                "requests.nvidia.com/gpu": str(quota.gpus),
                "requests.cpu": str(quota.cpu),
                "limits.cpu": str(quota.cpu),
                "requests.memory": f"{quota.memory_gib}Gi",
                "limits.memory": f"{quota.memory_gib}Gi",
                "pods": str(quota.pods),
            }),
            opts=opts,
        )
        k8s.core.v1.LimitRange(
            f"{name}-limits",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="container-defaults", namespace=args.name),
            spec=k8s.core.v1.LimitRangeSpecArgs(limits=[k8s.core.v1.LimitRangeItemArgs(
                type="Container",
                default_request={"cpu": "500m", "memory": "1Gi"},
                default={"cpu": "2", "memory": "4Gi"},
            )]),
            opts=opts,
        )

    @staticmethod
    def _create_network_policies(name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions) -> None:
        def policy(suffix: str, spec: dict) -> None:
            k8s.networking.v1.NetworkPolicy(
                f"{name}-netpol-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=suffix, namespace=args.name),
                spec=spec,
                opts=opts,
            )

        everything = {}
        policy("default-deny", {"podSelector": everything, "policyTypes": ["Ingress", "Egress"]})
        policy("allow-same-namespace", {
            "podSelector": everything,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": everything}]}],
            "egress": [{"to": [{"podSelector": everything}]}],
        })
        policy("allow-dns", {"podSelector": everything, "policyTypes": ["Egress"], "egress": [DNS_EGRESS]})
        # AWS APIs: interface endpoints in the VPC and S3 through its gateway (public IPs).
        policy("allow-https-egress", {"podSelector": everything, "policyTypes": ["Egress"], "egress": [HTTPS_EGRESS]})
        policy("allow-pod-identity-agent", {"podSelector": everything, "policyTypes": ["Egress"],
                                            "egress": [POD_IDENTITY_EGRESS]})
