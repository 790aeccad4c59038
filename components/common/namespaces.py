"""Namespaces under Pod Security that start from deny-all, and the traffic every controller needs.

Used by the training namespaces and by the controllers' own namespaces (Kueue, JobSet, External
Secrets): one definition of the labels and the baseline NetworkPolicies (CIS EKS 4.2, 4.3).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

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


# The Kubernetes SDK's TypedDicts: the type checker catches a misspelt field. Their keys are the
# SDK's snake_case names, which it sends to the API server as the usual camelCase.
EgressRule = k8s.networking.v1.NetworkPolicyEgressRuleArgsDict
NetworkPolicySpec = k8s.networking.v1.NetworkPolicySpecArgsDict
LabelSelector = k8s.meta.v1.LabelSelectorArgsDict

DNS_EGRESS: EgressRule = {
    "to": [{"namespace_selector": {"match_labels": {"kubernetes.io/metadata.name": "kube-system"}},
            "pod_selector": {"match_labels": {"k8s-app": "kube-dns"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
# The Kubernetes API and AWS APIs (VPC endpoints, S3 gateway) are all HTTPS.
HTTPS_EGRESS: EgressRule = {"to": [{"ip_block": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
POD_IDENTITY_EGRESS: EgressRule = {"to": [{"ip_block": {"cidr": POD_IDENTITY_AGENT}}], "ports": [{"protocol": "TCP", "port": 80}]}


def controller_network_policies(resource_prefix: str, namespace: str, *, ingress_ports: tuple[int, ...],
                                ingress_pods: LabelSelector | None = None, opts: pulumi.ResourceOptions) -> None:
    """A controller's namespace (CIS EKS 4.3): deny by default; out: DNS, HTTPS and the Pod
    Identity agent; in: only its webhook / API ports (the API server calls them)."""
    everything: LabelSelector = {}
    policies: dict[str, NetworkPolicySpec] = {
        "default-deny": {"pod_selector": everything, "policy_types": ["Ingress", "Egress"]},
        "allow-operator-egress": {"pod_selector": everything, "policy_types": ["Egress"],
                                  "egress": [DNS_EGRESS, HTTPS_EGRESS, POD_IDENTITY_EGRESS]},
        "allow-webhook-ingress": {
            "pod_selector": ingress_pods or everything,
            "policy_types": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": port} for port in ingress_ports]}],
        },
    }
    for policy_name, spec in policies.items():
        k8s.networking.v1.NetworkPolicy(
            f"{resource_prefix}-netpol-{policy_name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, namespace=namespace),
            spec=spec, opts=opts)
