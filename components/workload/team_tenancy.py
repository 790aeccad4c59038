"""What a team's deploy role may not make in its own namespace, made for it by the platform stack
from its registry of teams (`teams`, components/config/teams.py), on its own cluster (a
MultiKueue worker's platform stack makes the same for the manager's teams on the worker):

    Namespace `team-<team>` -> ResourceQuota `training-quota` + LimitRange `container-defaults`
    -> RoleBinding `team-deployer` of the group `team-<team>-deployers` to the ClusterRole
       `gpu-training-team-deployer` (one per cluster)

Why the platform: the team deploy role's access entry (team_deploy_access.py) carries
AmazonEKSAdminPolicy scoped to `team-<team>`, and that policy, like Kubernetes' `admin`, grants no
write of namespaces, resourcequotas or limitranges and nothing of any custom resource (EKS User
Guide, "Review access policy permissions", AmazonEKSAdminPolicy). The namespace and its caps are
what the team must not change, so the platform owns them; the custom resources the team stack
makes are the team's own business, so the platform grants them in that namespace only.

The ClusterRole is cluster-scoped (a team cannot edit it: its admin rights are namespaced) and is
bound by a RoleBinding, so it grants its rules in `team-<team>` alone (Kubernetes documentation,
"Using RBAC Authorization", RoleBinding and ClusterRoleBinding: "a RoleBinding may also reference
a ClusterRole to grant the permissions defined in that ClusterRole to resources inside the
RoleBinding's namespace"). The team may delete or re-subject that RoleBinding (admin writes
rolebindings), which reaches no further than its namespace.

Each object has the name, labels and spec the team stack gave it before (namespace.py makes both),
so a running team's namespace changes hands without being recreated (docs/team-stacks.md,
"Moving a team's namespace to the platform").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from components.common.manifests import built_in_object
from components.config import NodePoolConfig
from components.config.teams import TeamQueueConfig
from components.workload.multikueue import WORKER_GROUP
from components.workload.namespace import namespace_quota_and_limits, training_namespace
from components.workload.sizing import namespace_quota

DEPLOYER_CLUSTER_ROLE = "gpu-training-team-deployer"
DEPLOYER_BINDING = "team-deployer"

# What Pulumi's Kubernetes provider does to an object it manages: reads it (refresh, the
# await logic's watch), creates it by server-side apply (a PATCH, which the API server also
# authorizes as `create` when the object does not exist yet), updates and deletes it.
MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]


def team_deployers_group(team: str) -> str:
    """The Kubernetes group of team `team`'s deploy role (its access entry's kubernetesGroups)."""
    return f"team-{team}-deployers"


def deployer_cluster_role() -> dict[str, Any]:
    """The custom resources a team stack makes (JobSet, LocalQueue, SecretStore, ExternalSecret), and
    every permission the Roles it makes and the roles it binds grant. Kubernetes lets a Role, or a
    RoleBinding of a role, be created only by whoever holds every permission in it (Kubernetes
    documentation, "Using RBAC Authorization", Privilege escalation prevention), and reads what one
    holds from RBAC objects only: AmazonEKSAdminPolicy's rights, granted by EKS's authorizer, do not
    count, so with it alone a RoleBinding of `view` is refused (aws/containers-roadmap#2682). Hence
    the built-in rules below, each within AmazonEKSAdminPolicy (nothing the team could not already
    do in its namespace): the `team-member` Role's (team_members.py), `trainer-progress`'s
    (progress_access.py) and `checkpoint-cleanup`'s. On a MultiKueue worker the team stack binds
    the `multikueue-manager` ClusterRole in its namespace (multikueue.py worker_cluster_role) through
    `bind` on that one role, not by holding its rules: those write Kueue Workloads and their status,
    and a Workload's `status.admission` is Kueue's record of a quota reservation, so a team that
    could write it could admit its own work past its queue (Kubernetes documentation, "Using RBAC
    Authorization": a user may create a binding to a role it holds `bind` on). No write of any
    status, no ClusterQueue, no cluster-scoped kind: a RoleBinding grants a ClusterRole's rules
    inside its namespace only. tests/test_team_tenancy.py checks every Role and RoleBinding of the
    team plan against it."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": DEPLOYER_CLUSTER_ROLE, "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
            "rules": [
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": MANAGE},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/finalizers"], "verbs": ["update"]},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": MANAGE},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["external-secrets.io"], "resources": ["secretstores", "externalsecrets"],
                 "verbs": MANAGE},
                # Built-in, within AmazonEKSAdminPolicy: held through RBAC so that they may be granted.
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch", "create"]},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
                 "resourceNames": [WORKER_GROUP]},
            ]}


def deployer_role_binding(team: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": DEPLOYER_BINDING, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "gpu-training"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DEPLOYER_CLUSTER_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team_deployers_group(team)}]}


def team_namespace_resource_name(team: str) -> str:
    """The Pulumi name of team `team`'s namespace in the platform stack (its quota and limits add
    `-quota`, `-limits`; part of their URNs)."""
    return f"team-{team}-namespace"


def team_tenancies(rows: Sequence[TeamQueueConfig], *, environment: str, pools: Sequence[NodePoolConfig],
                   depends_on: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions) -> None:
    """Each registered team's namespace, its caps and its deployers' binding; the ClusterRole once.
    `pools`: the cluster's GPU pools (a row's quota names some of them: the namespace's cap)."""
    if not rows:
        return
    cluster_role = built_in_object("team-deployer-cluster-role", deployer_cluster_role(), opts)
    for row in rows:
        name = team_namespace_resource_name(row.name)
        made = training_namespace(name, row.namespace, environment=environment, team=row.name,
                                  opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                      depends_on=list(depends_on))))
        inside = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[made]))
        quota_pools = [pool for pool in pools if pool.name in row.gpu_quota]
        namespace_quota_and_limits(name, row.namespace, namespace_quota(quota_pools), inside)
        built_in_object(f"team-{row.name}-deployer-binding", deployer_role_binding(row.name, row.namespace),
                        pulumi.ResourceOptions.merge(inside, pulumi.ResourceOptions(depends_on=[made, cluster_role])))
