"""A team's people on the platform's cluster: rights in the team's namespace, nothing cluster-wide.

For each role of the team stack's `members` (components/config/team_members.py):
- an EKS access entry (type STANDARD) whose only Kubernetes group is the namespace's members group
  `<namespace>-members`, with no user name of its own (EKS derives it from the role);
- the access policy AmazonEKSViewPolicy scoped to the namespace: what Kubernetes' user-facing
  `view` role reads there (EKS User Guide, "Review access policy permissions"; no Secrets);
- and, bound to the group by a RoleBinding in the namespace, the Role `team-member`: what the
  job command (`gpu-training job submit|status|logs|stop|list`) does. EKS access policies are
  fixed lists of built-in resources: unlike Kubernetes' `edit` ClusterRole, whose aggregation
  picks up custom resources, none of them covers JobSets or Kueue's objects (same page: "If the
  permissions in the access policies don't meet your needs, then create Kubernetes RBAC objects
  and specify group names for your access entries").

Why the team stack, not the platform, makes these: who may work in a team's namespace is the
team's business, changed in the team's repository, and every grant here stops at the namespace:
the access policy's scope is the one namespace (never a wildcard: EKS takes `team-*`), the group
is bound only by this namespace's RoleBinding, and Kubernetes refuses a Role that grants more
than its creator holds (RBAC escalation prevention). The policy pack refuses a team stack's
access entry or association that reaches further (policy/gpu_training_policy/tenancy.py), and
the team's deploy role can be held to the same in IAM (condition keys eks:accessScope,
eks:namespaces, eks:policyArn, eks:kubernetesGroups: docs/security.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.cluster.control_plane import READ_ONLY_POLICY
from components.common.access_entries import access_entry, access_policy_arn
from components.common.manifests import built_in_object
from components.common.partition import provider_partition
from components.workload.namespaced import NamespacedArgs

ROLE = "team-member"
RBAC_GROUP = "rbac.authorization.k8s.io"
READ = ["get", "list", "watch"]


def members_group(namespace: str) -> str:
    """The Kubernetes group of a namespace's members: only that namespace's RoleBinding names it."""
    return f"{namespace}-members"


def member_rules() -> list[dict[str, Any]]:
    """The job command's rights, in the namespace only (its requests: job_command/cluster.py of
    the job command): submit, watch and delete JobSets; make each one's hyperparameters ConfigMap
    and, for a gang off spot, its PodDisruptionBudget, both owned by the JobSet with
    `blockOwnerDeletion` (which the OwnerReferencesPermissionEnforcement admission plugin, where it
    is on, grants only to who may update the owner's `finalizers`); stop a run by patching its
    Kueue Workload inactive; follow workloads and the local queue; read pods, their logs and events.
    No Secrets, no pods/exec, no Role or binding."""
    return [
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
         "verbs": ["create", "get", "list", "watch", "delete"]},  # no patch: a member never edits a stack's JobSet
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*READ, "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": READ},
        {"apiGroups": [""], "resources": ["pods", "events"], "verbs": READ},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": [*READ, "create"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": [*READ, "create"]},
    ]


def role_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {"name": ROLE, "namespace": namespace},
            "rules": member_rules()}


def role_binding_manifest(namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": ROLE, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": ROLE},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": members_group(namespace)}]}


def entry_name(principal_arn: str) -> str:
    """A resource name per role: its path and name, and 8 hex digits of the whole ARN, since
    `role/a-b` and `role/a/b`, or one role name in two accounts, would read alike
    (`role/ml/vision` -> `role-ml-vision-<hash>`)."""
    digest = hashlib.sha256(principal_arn.encode()).hexdigest()[:8]
    return f"{principal_arn.split(':', 5)[-1].replace('/', '-')}-{digest}"


@dataclass(frozen=True, kw_only=True)
class TeamMembersArgs(NamespacedArgs):
    """namespace: the team's `team-<team>`, the only one the members reach, where the Role and its binding live."""

    cluster_name: pulumi.Input[str]
    """The platform's cluster (its contract's clusterName)."""
    members: Sequence[str]
    """IAM role ARNs (TeamStackConfig.members)."""


class TeamMembers(pulumi.ComponentResource):
    """Access entries, their namespace-scoped view policy, and the namespace's `team-member` Role."""

    def __init__(self, name: str, args: TeamMembersArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TeamMembers", name, None, opts)
        self._name, self._args = name, args
        self._create_role()
        partition = provider_partition(self)
        for arn in args.members:
            self._create_entry(arn, partition)
        self.register_outputs({})

    def _create_role(self) -> None:
        args = self._args
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        created = built_in_object(f"{self._name}-role", role_manifest(args.namespace), child)
        built_in_object(f"{self._name}-binding", role_binding_manifest(args.namespace),
                        pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[created])))

    def _create_entry(self, principal_arn: str, partition: pulumi.Output[str]) -> None:
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        access_entry(f"{self._name}-{entry_name(principal_arn)}", "view", cluster_name=args.cluster_name,
                     principal_arn=principal_arn, policy_arn=partition.apply(lambda p: access_policy_arn(p, READ_ONLY_POLICY)),
                     namespaces=[args.namespace], kubernetes_groups=[members_group(args.namespace)], opts=child)
