"""EKS managed add-ons at the build pinned for the cluster's Kubernetes minor (one place says how)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.facts.eks_versions import ADDON_VERSIONS
from components.facts.node_sizing import check_sized


def managed_addon(resource_name: str, *, cluster_name: pulumi.Input[str], addon_name: str, kubernetes_version: str,
                  opts: pulumi.ResourceOptions, **extra) -> aws.eks.Addon:
    """An EKS managed add-on at the build pinned for the cluster's Kubernetes version. The plan fails
    for an add-on whose node pods the GPU node sizing does not count (facts/node_sizing.py)."""
    check_sized(addon_name, kind="EKS add-on")
    return aws.eks.Addon(
        resource_name,
        cluster_name=cluster_name,
        addon_name=addon_name,
        addon_version=ADDON_VERSIONS[kubernetes_version][addon_name],
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        opts=opts,
        **extra,
    )
