"""Helm charts installed into the cluster: one place that says how a pinned chart is released."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.facts.node_sizing import check_sized


def helm_release(resource_name: str, *, chart: str, version: str, namespace: str, values: dict[str, Any],
                 opts: pulumi.ResourceOptions, repo: str | None = None) -> k8s.helm.v3.Release:
    """A Helm v3 release of a pinned chart version; the release name is the chart's.

    `chart` is a chart name in `repo`, or an `oci://` reference (then `repo` stays None). The plan
    fails for a chart whose node pods the GPU node sizing does not count (facts/node_sizing.py).
    """
    check_sized(chart.rsplit("/", 1)[-1], kind="Helm chart")
    return k8s.helm.v3.Release(
        resource_name,
        name=chart.rsplit("/", 1)[-1],
        chart=chart,
        version=version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo) if repo else None,
        namespace=namespace,
        values=values,
        # Roll back a failed upgrade instead of leaving a half-applied release.
        atomic=True,
        timeout=600,
        opts=opts,
    )
