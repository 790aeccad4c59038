"""EKS access entries: an IAM principal let into a cluster's API with one EKS access policy.

Every such grant of the project is an access entry (type STANDARD) and one association of an EKS
access policy, scoped to the cluster or to namespaces: the control plane's admin and read-only
principals (cluster/control_plane.py), a team's members (workload/team_members.py), a team's
deploy role (workload/team_deploy_access.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws


def access_policy_arn(partition: str, name: str) -> str:
    """An EKS cluster access policy: like a managed IAM policy, AWS's, one per partition."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


def access_entry(name: str, level: str, *, cluster_name: pulumi.Input[str], principal_arn: pulumi.Input[str],
                 policy_arn: pulumi.Input[str], opts: pulumi.ResourceOptions,
                 namespaces: Sequence[str] | None = None, kubernetes_groups: Sequence[str] | None = None) -> None:
    """The access entry `name` of `principal_arn` (in `kubernetes_groups`, if any) and `<name>-<level>`,
    its association of `policy_arn` scoped to `namespaces` (None: the whole cluster), made after the entry."""
    entry = aws.eks.AccessEntry(name, cluster_name=cluster_name, principal_arn=principal_arn, type="STANDARD",
                                kubernetes_groups=None if kubernetes_groups is None else list(kubernetes_groups),
                                opts=opts)
    scope = (aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster") if namespaces is None else
             aws.eks.AccessPolicyAssociationAccessScopeArgs(type="namespace", namespaces=list(namespaces)))
    aws.eks.AccessPolicyAssociation(f"{name}-{level}", cluster_name=cluster_name, principal_arn=principal_arn,
                                    policy_arn=policy_arn, access_scope=scope,
                                    opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[entry])))
