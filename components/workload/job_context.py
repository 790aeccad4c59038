"""The team stack's job context ConfigMap (components/config/job_context.py says what it holds and
why): `gpu-training job submit` reads it with the caller's namespace-scoped `get`, so an ad-hoc
job is judged against the platform and team stack as deployed."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.config.job_context import JOB_CONTEXT_CONFIG_MAP

LABELS = {"app.kubernetes.io/name": JOB_CONTEXT_CONFIG_MAP, "app.kubernetes.io/part-of": "gpu-training"}


def job_context_config_map(resource_name: str, namespace: pulumi.Input[str], data: Mapping[str, str],
                           opts: pulumi.ResourceOptions) -> k8s.core.v1.ConfigMap:
    """`namespace`: the namespace's name as an output, so the ConfigMap waits for the namespace."""
    return k8s.core.v1.ConfigMap(resource_name, metadata={"name": JOB_CONTEXT_CONFIG_MAP, "namespace": namespace,
                                                          "labels": dict(LABELS)},
                                 data=dict(data), opts=opts)
