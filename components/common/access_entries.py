"""EKS access entries: a principal let into a cluster's API with one EKS access policy, scoped to the
cluster or to namespaces (control_plane.py's admins and viewers, a team's members and deploy role)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def access_policy_arn(partition: str, name: str) -> str:
    """An EKS cluster access policy: like a managed IAM policy, AWS's, one per partition."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


def access_entry(name: str, level: str, *, cluster_name: pulumi.Input[str], principal_arn: pulumi.Input[str],
                 policy_arn: pulumi.Input[str], opts: pulumi.ResourceOptions,
                 namespaces: list[str] | None = None, kubernetes_groups: list[str] | None = None) -> None:
    """The access entry `name` of `principal_arn` (in `kubernetes_groups`, if any) and `<name>-<level>`,
    its association of `policy_arn` scoped to `namespaces` (None: the whole cluster), made after the entry."""
    entry = aws.eks.AccessEntry(name, cluster_name=cluster_name, principal_arn=principal_arn, type="STANDARD",
                                kubernetes_groups=kubernetes_groups, opts=opts)
    scope = (aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster") if namespaces is None else
             aws.eks.AccessPolicyAssociationAccessScopeArgs(type="namespace", namespaces=namespaces))
    aws.eks.AccessPolicyAssociation(f"{name}-{level}", cluster_name=cluster_name, principal_arn=principal_arn,
                                    policy_arn=policy_arn, access_scope=scope,
                                    opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[entry])))
