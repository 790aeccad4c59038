"""Kubernetes objects created from their manifests (plain dicts): custom resources and CRDs."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def custom_resource(resource_name: str, manifest: dict[str, Any],
                    opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """The object `manifest` describes (apiVersion, kind, metadata, spec), created as written."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
