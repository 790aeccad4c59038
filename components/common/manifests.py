"""Kubernetes objects created from their manifests (plain dicts): built-in kinds, custom resources and CRDs."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Fields the API server refuses to change on an object (a CEL rule `self == oldSelf` in the CRD):
# a new value replaces the object. Kueue v0.19.2 LocalQueue spec.clusterQueue
# (schemas/crds/kueue.x-k8s.io_localqueues.yaml, "field is immutable").
IMMUTABLE_FIELDS = {"LocalQueue": ["spec.clusterQueue"]}


def checkov_skips(reasons: dict[str, str]) -> dict[str, str]:
    """Accepted deviations as annotations, justified where a reviewer reads them: checkov's skip
    syntax, `checkov.io/skip<N>: <CHECK>=<reason>` numbered from 1."""
    return {f"checkov.io/skip{i}": f"{check}={reason}" for i, (check, reason) in enumerate(reasons.items(), 1)}



def app_metadata(name: str, namespace: str, skip_reasons: dict[str, str]) -> dict[str, Any]:
    """`metadata` of app `name`'s object of that name in `namespace`: its labels (Kubernetes docs,
    "Recommended Labels") and the checkov deviations it accepts."""
    return {"name": name, "namespace": namespace, "annotations": checkov_skips(skip_reasons),
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "gpu-training"}}


def job_spec(*, labels: dict[str, str], pod_spec: dict[str, Any], backoff_limit: int, deadline_seconds: int) -> dict[str, Any]:
    """A batch/v1 JobSpec (a Job's, or a CronJob's jobTemplate's): `pod_spec` labelled `labels`,
    retried `backoff_limit` times, stopped after `deadline_seconds` in all."""
    return {
        "backoffLimit": backoff_limit,
        "activeDeadlineSeconds": deadline_seconds,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }

# The typed resource of each built-in kind the components make from a manifest.
BUILT_IN_KINDS: dict[str, Callable[..., pulumi.CustomResource]] = {
    "ServiceAccount": k8s.core.v1.ServiceAccount, "ConfigMap": k8s.core.v1.ConfigMap, "Secret": k8s.core.v1.Secret,
    "Role": k8s.rbac.v1.Role, "RoleBinding": k8s.rbac.v1.RoleBinding, "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding, "Job": k8s.batch.v1.Job, "CronJob": k8s.batch.v1.CronJob,
    "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
    "ValidatingAdmissionPolicy": k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    "ValidatingAdmissionPolicyBinding": k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
}


def built_in_object(resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The object of a built-in kind that `manifest` describes, as its typed resource: each field
    after apiVersion and kind is the argument of its name in snake case (roleRef -> role_ref)."""
    fields = {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): value for key, value in manifest.items()
              if key not in ("apiVersion", "kind")}
    kind = manifest["kind"]
    if kind not in BUILT_IN_KINDS:
        raise KeyError(f"{kind}: add its typed resource to BUILT_IN_KINDS (components/common/manifests.py)")
    return BUILT_IN_KINDS[kind](resource_name, **fields, opts=opts)


def custom_resource(resource_name: str, manifest: dict[str, Any],
                    opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """The object `manifest` describes (apiVersion, kind, metadata, spec), created as written; one
    whose immutable field changes is replaced (deleted first: the new one has the same name)."""
    immutable = IMMUTABLE_FIELDS.get(manifest["kind"])
    if immutable:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=immutable, delete_before_replace=True))
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
