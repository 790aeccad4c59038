"""Versions pinned per Kubernetes minor: EKS managed add-ons and the matching Cluster Autoscaler.

A Kubernetes version is supported here only when every add-on has a pinned build for it.
To add one, take the builds from
`aws eks describe-addon-versions --kubernetes-version <minor> --addon-name <name>` and the
autoscaler release of the same minor (the autoscaler's minor must equal the cluster's).
"""

from __future__ import annotations

ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.33": {
        "vpc-cni": "v1.20.1-eksbuild.1",
        "kube-proxy": "v1.33.3-eksbuild.4",
        "coredns": "v1.12.2-eksbuild.4",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "eks-node-monitoring-agent": "v1.4.0-eksbuild.2",
        # Storage CSI drivers (data/mounts.py); verify the builds as above before the first real up.
        "aws-efs-csi-driver": "v2.2.0-eksbuild.1",
        "aws-mountpoint-s3-csi-driver": "v2.2.2-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.7.0-eksbuild.1",
    },
    "1.34": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.34.3-eksbuild.2",
        "coredns": "v1.13.2-eksbuild.1",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "eks-node-monitoring-agent": "v1.4.0-eksbuild.2",
        "aws-efs-csi-driver": "v2.2.0-eksbuild.1",
        "aws-mountpoint-s3-csi-driver": "v2.2.2-eksbuild.1",
        "amazon-cloudwatch-observability": "v4.7.0-eksbuild.1",
    },
}

CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {"1.33": "v1.33.1", "1.34": "v1.34.0"}

SUPPORTED_KUBERNETES_VERSIONS = tuple(sorted(set(ADDON_VERSIONS) & set(CLUSTER_AUTOSCALER_IMAGE_TAGS)))
