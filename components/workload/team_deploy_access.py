"""Each registered team's deploy role on the platform's cluster: rights in the team's namespace only.

The bootstrap makes a deploy role per team and environment, `<project>-ci-team-<team>-<env>`
(bootstrap/policies/teams.py, team_deploy_role_name), in the account the environment's stacks
deploy into. For each row of the platform's registry of teams (`teams`, components/config/teams.py)
the platform stack gives that role an EKS access entry (type STANDARD) whose one Kubernetes group is
`team-<team>-deployers`, and one access policy, AmazonEKSAdminPolicy, scoped to the namespace
`team-<team>`.

Why AmazonEKSAdminPolicy and not AmazonEKSEditPolicy: a team stack makes a Role and RoleBinding in
its namespace (components/workload/team_members.py). The EKS access policies' permissions "are
similar to the permissions in the Kubernetes user-facing cluster roles" (EKS User Guide, "Review
access policy permissions"), and of those `admin` grants "read/write access to most resources in a
namespace, including the ability to create roles and role bindings within the namespace" while
`edit` "does not allow viewing or modifying roles or role bindings" (Kubernetes documentation,
"Using RBAC Authorization", User-facing roles). `admin` allows no write to the namespace itself or
its ResourceQuota (same page), which the platform's admission policies also hold
(workload/tenant_admission.py). Creating a Role or RoleBinding also needs every permission it
grants held through RBAC, which an access policy is not (aws/containers-roadmap#2682): the group's
ClusterRole holds those (team_tenancy.py deployer_cluster_role).

What the access policy does not cover (EKS access policies are fixed lists of built-in resources,
none aggregated): the custom resources a team stack makes (JobSet, LocalQueue, SecretStore,
ExternalSecret), which the group's RoleBinding in `team-<team>` grants, and the namespace itself,
its ResourceQuota and LimitRange, which the platform makes (both: team_tenancy.py). Its
PersistentVolumes (cluster-scoped) are still the team stack's: docs/team-stacks.md, "A team's
deploy identity".
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components.cluster.control_plane import access_policy_arn
from components.config.teams import TeamQueueConfig
from components.workload.team_tenancy import team_deployers_group

TEAM_DEPLOY_POLICY = "AmazonEKSAdminPolicy"


def team_deploy_role_name(project: str, team: str, environment: str) -> str:
    """Team `team`'s deploy role in `environment`, which the bootstrap makes under this name
    (bootstrap/policies/teams.py team_deploy_role_name calls this)."""
    return f"{project}-ci-team-{team}-{environment}"


def team_deploy_role_arn(partition: str, account_id: str, project: str, team: str, environment: str) -> str:
    return f"arn:{partition}:iam::{account_id}:role/{team_deploy_role_name(project, team, environment)}"


def team_deploy_entry_name(team: str) -> str:
    """The Pulumi name of team `team`'s access entry in the platform stack (part of its URN)."""
    return f"team-{team}-deploy-access"


def team_deploy_access(rows: Sequence[TeamQueueConfig], *, project: str, environment: str,
                       cluster_name: pulumi.Input[str], account_id: pulumi.Input[str], partition: str,
                       opts: pulumi.ResourceOptions) -> None:
    """An access entry per registered team, its one association scoped to `team-<team>`."""
    for row in rows:
        name = team_deploy_entry_name(row.name)
        principal = pulumi.Output.from_input(account_id).apply(
            lambda account, team=row.name: team_deploy_role_arn(partition, account, project, team, environment))
        entry = aws.eks.AccessEntry(name, cluster_name=cluster_name, principal_arn=principal, type="STANDARD",
                                    kubernetes_groups=[team_deployers_group(row.name)], opts=opts)
        aws.eks.AccessPolicyAssociation(
            f"{name}-admin", cluster_name=cluster_name, principal_arn=principal,
            policy_arn=access_policy_arn(partition, TEAM_DEPLOY_POLICY),
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="namespace", namespaces=[row.namespace]),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[entry])))
