"""What lets a trainer pod keep its run's progress on itself, and nothing more.

The launcher of global rank 0 merge-patches one annotation, `gpu-training/progress`, on its own
pod once a minute (trainer/launcher/status_publisher.py), so anyone with read rights on the
namespace's pods sees step, rate, ETA, loss, newest checkpoint and restarts without the job
command (docs/team-stacks.md, "Progress on the job itself"). Least privilege, in three layers:

- the pod gets an API token only in the trainer container, projected (bound to the pod, expiring;
  the service account still says automountServiceAccountToken: false): training_job.py;
- a Role per training namespace grants the `trainer` service account `patch` on `pods`, nothing
  else (no get, list, create, delete; no subresource such as pods/exec or pods/ephemeralcontainers):
  RBAC cannot name pods that do not exist yet (resourceNames are fixed names), so
- a cluster-wide ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30)
  admits a `trainer` account's change to a pod only if it is the pod its token is bound to and
  only this annotation changes. The API server puts the bound pod's name in the token's user
  info (`authentication.kubernetes.io/pod-name`, kubernetes/kubernetes pkg/serviceaccount/util.go
  PodNameKey); a token not bound to a pod carries none and is refused.

Why not the others (Kubernetes docs, "Using RBAC Authorization", resourceNames; "Determine the
Reason for Pod Failure", termination messages): a ConfigMap per run needs create rights, which RBAC
cannot limit by name, so it would need the same policy and leave objects behind; a termination
message is read only after the container ended.

The policy is cluster-scoped, so the platform stack makes it (a team stack may not: policy pack,
`team-namespace-scope`); the Role and its binding are the tenant's (platform and team namespaces,
and a MultiKueue worker's copy of each team namespace).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.common.manifests import built_in_object
from components.identity.workload_roles import TRAINER_SERVICE_ACCOUNT
from components.workload.namespaced import NamespacedArgs

PROGRESS_ANNOTATION = "gpu-training/progress"  # trainer/launcher/status_publisher.py ANNOTATION
ROLE_NAME = "trainer-progress"
POLICY_NAME = "gpu-training-trainer-progress"
# The user info key of the pod a service account token is bound to (a list of one name).
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"


def role_rules() -> list[dict[str, Any]]:
    """Patch pods, only: the admission policy narrows it to the caller's own pod and annotation."""
    return [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]


def role_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
            "rules": role_rules()}


def role_binding_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": ROLE_NAME, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": TRAINER_SERVICE_ACCOUNT, "namespace": namespace}]}


def _or_empty(path: str, empty: str) -> str:
    """CEL: the field at `path` (object.metadata.labels), or `empty` where the object has none."""
    owner, field = path.rsplit(".", 1)
    return f"(has({owner}.{field}) ? {path} : {empty})"


# Standard CEL only (has, in, all, ==), so tests/test_progress_access.py evaluates the same text.
VARIABLES = {
    "new_annotations": _or_empty("object.metadata.annotations", "{}"),
    "old_annotations": _or_empty("oldObject.metadata.annotations", "{}"),
}
VALIDATIONS = (
    (f"'{POD_NAME_EXTRA}' in request.userInfo.extra && "
     f"request.userInfo.extra['{POD_NAME_EXTRA}'] == [object.metadata.name]",
     "a trainer may change only the pod its token is bound to"),
    ("object.spec == oldObject.spec", f"a trainer may change only the annotation {PROGRESS_ANNOTATION} of its pod"),
    (f"{_or_empty('object.metadata.labels', '{}')} == {_or_empty('oldObject.metadata.labels', '{}')}",
     "a trainer may not change its pod's labels (Services and controllers select pods by them)"),
    (f"{_or_empty('object.metadata.finalizers', '[]')} == {_or_empty('oldObject.metadata.finalizers', '[]')} && "
     f"{_or_empty('object.metadata.ownerReferences', '[]')} == {_or_empty('oldObject.metadata.ownerReferences', '[]')}",
     "a trainer may not change its pod's finalizers or owners"),
    (f"variables.old_annotations.all(k, k == '{PROGRESS_ANNOTATION}' || "
     "(k in variables.new_annotations && variables.new_annotations[k] == variables.old_annotations[k])) && "
     f"variables.new_annotations.all(k, k == '{PROGRESS_ANNOTATION}' || k in variables.old_annotations)",
     f"a trainer may change only the annotation {PROGRESS_ANNOTATION} of its pod"),
)
MATCH_TRAINER = f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{TRAINER_SERVICE_ACCOUNT}'"


def admission_policy_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
        "spec": {
            # An error in the policy refuses the patch: a progress annotation is never worth an
            # open door (the launcher logs the refusal once and goes on training).
            "failurePolicy": "Fail",
            # Updates (a patch is one) of pods themselves; RBAC gives the account no subresource.
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                    "resources": ["pods"]}]},
            "matchConditions": [{"name": "trainer-service-account", "expression": MATCH_TRAINER}],
            "variables": [{"name": name, "expression": expression} for name, expression in VARIABLES.items()],
            "validations": [{"expression": expression, "message": message, "reason": "Forbidden"}
                            for expression, message in VALIDATIONS],
        },
    }


def admission_policy_binding_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
        # Every namespace: the match condition picks the `trainer` accounts, wherever a tenant is.
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }


@dataclass(frozen=True, kw_only=True)
class TrainerProgressRoleArgs(NamespacedArgs):
    """namespace: whose `trainer` account may patch its own pod's progress; depends_on: it and that account."""


class TrainerProgressRole(pulumi.ComponentResource):
    """The tenant's side: the Role (patch pods) and its binding to the `trainer` service account."""

    def __init__(self, name: str, args: TrainerProgressRoleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TrainerProgressRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        created = built_in_object(f"{name}-role", role_manifest(args.namespace), child)
        built_in_object(f"{name}-binding", role_binding_manifest(args.namespace),
                        pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, created]))
        self.register_outputs({})


class ProgressAdmissionPolicy(pulumi.ComponentResource):
    """The cluster's side: the policy that keeps every `trainer` account to its own pod's annotation."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:ProgressAdmissionPolicy", name, None, opts)
        created = built_in_object(f"{name}-policy", admission_policy_manifest(), pulumi.ResourceOptions(parent=self))
        built_in_object(f"{name}-binding", admission_policy_binding_manifest(),
                        pulumi.ResourceOptions(parent=self, depends_on=[created]))
        self.register_outputs({})
