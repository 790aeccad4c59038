"""A deploy identity per team and environment (issue 41 item 1): the team deploy role, trusted by
the team's repository over GitHub OIDC, and the team boundary it and every role it creates carry.

The team boundary allows only the team's own names and prefixes, so a team stack cannot touch
another team's data even with the policy pack switched off:

- its stacks' state (`team-<team>-<env>`) and the environment's config-secrets key;
- its prefix of the environment's buckets, `teams/<team>/` (components/identity/policies.py
  trainer_policy's `artifacts_prefix`);
- its secrets, `<project>/<env>/teams/<team>/` (components/secrets/store.py);
- its roles and policies, `<project>-<env>-<team>-*` (the team stack's name prefix,
  components/config/stack.py) and its secrets reader `<project>-<env>-team-<team>-secrets`
  (components/identity/policies.py team_secrets_reader_role_name); a role it creates or changes
  must carry this boundary;
- its KMS keys, those tagged `team=<team>` and `stack=team-<team>-<env>` (the team stack's provider
  tags every resource with its team and stack: components/common/tags.py), and their aliases
  `alias/<project>-<env>-<team>-*`; no key another stack made (it carries its stack's tag);
- its alarms (`<project>-<env>-<team>-team-<team>-*`), its dashboard and its budget, by their exact
  names: not a prefix another team's names start with (`vision` is not `vision-x`);
- the contracts its environment's platform stacks publish (SSM parameters, read only);
- on the environment's clusters (the platform's and each MultiKueue worker's): its people's access
  entries, each STANDARD, for one of the registry's members of the team only (`teams.<team>.members`,
  ArnEquals: _members_entries), none without members, in the group `team-<team>-members` only, with
  the View policy scoped to `team-<team>` only; its Pod Identity associations, each passing only
  the team's roles; afterwards only the entries and associations tagged with its team and stack
  (deleting one is how a member taken out of the registry is removed: docs/team-stacks.md). Being
  in the boundary, this holds for every role the team creates, whatever that role's own policy.

Not its EFS access points: CreateAccessPoint has no condition key for the access point's root
directory (Service Authorization Reference, Amazon EFS: only aws:RequestTag and aws:TagKeys), so a
grant would let the team root one at another team's directory; the platform makes them.

The registry's names cannot overlap (bootstrap/config.py refuses `vision` beside `vision-x`).
"""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig, TeamCi
from bootstrap.policies.ci_roles import via_s3
from bootstrap.policies.compact import compact_policy
from bootstrap.policies.names import SECRETS_CONTEXT_KEY, cluster_name, stack_checkpoints, state_metadata
from bootstrap.policies.trust import GITHUB_OIDC_AUDIENCE, GITHUB_OIDC_HOST
from components.cluster.control_plane import READ_ONLY_POLICY, access_policy_arn
from components.config import permissions_boundary
from components.config.platform_contract import contract_parameter_name
from components.config.stack_names import team_name_prefix, team_namespace
from components.facts.regions import arn_partition
from components.observability.budget import budget_name
from components.observability.dashboards import dashboard_name_of
from components.workload import team_deploy_access as deploy_access
from components.workload.team_members import members_group

TEAM_TAG = "team"
"""The tag a team stack's provider puts on every resource (components/common/tags.py)."""
STACK_TAG = "stack"
"""The tag every stack's provider puts on every resource: the stack's name (components/common/tags.py)."""
PROJECT_TAG = "project"
"""The tag the bootstrap's provider puts on its keys: the bootstrap's project (bootstrap/__main__.py)."""


# What a team stack does with its own roles and policies (what Pulumi's aws.iam.Role, RolePolicy,
# RolePolicyAttachment and Policy call), not all of IAM: no users, groups, providers, boundaries.
TEAM_IAM_ACTIONS = (
    "iam:AttachRolePolicy", "iam:CreatePolicy", "iam:CreatePolicyVersion", "iam:CreateRole", "iam:DeletePolicy",
    "iam:DeletePolicyVersion", "iam:DeleteRole", "iam:DeleteRolePolicy", "iam:DetachRolePolicy", "iam:GetPolicy",
    "iam:GetPolicyVersion", "iam:GetRole", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole", "iam:ListPolicyVersions", "iam:ListRolePolicies", "iam:PassRole",
    "iam:PutRolePolicy", "iam:TagPolicy", "iam:TagRole", "iam:UntagPolicy", "iam:UntagRole",
    "iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription",
)
# TEAM_IAM_ACTIONS in fewer characters, for the boundary's 6,144 (sizes.py): on a role or policy of
# the team's these match those actions and, beside them, only reads (ListEntitiesForPolicy,
# Simulate*, GetContextKeysFor*) and SetDefaultPolicyVersion of the team's own policies; what else
# they match takes a user, group, the account or a service-linked role (role/aws-service-role/...),
# none of which the Resource names (tests/test_team_deploy_calls.py compares both over IAM's actions).
TEAM_IAM_ACTION_PATTERNS = ("iam:*Role", "iam:*RolePolic*", "iam:*Policy", "iam:*PolicyVersion*",
                            "iam:ListInstanceProfilesForRole", "iam:UpdateRoleDescription")


def team_deploy_role_name(stacks_project: str, team: str, environment: str) -> str:
    """Under the CI roles' pattern (<project>-ci-*): the environment deploy roles can neither change
    it nor use the state key beyond S3, as for the other CI roles (deploy_guard_policy, keys.py).
    The platform's access entry names it too (components/workload/team_deploy_access.py)."""
    return deploy_access.team_deploy_role_name(stacks_project, team, environment)


def team_boundary_policy_name(stacks_project: str, team: str, environment: str) -> str:
    """Under the boundaries' pattern (<project>-boundary-*): the deploy roles cannot change it. A
    team stack's iamPermissionsBoundary names it (components/config/permissions_boundary.py)."""
    return permissions_boundary.team_boundary_name(stacks_project, environment, team)


def team_stack(team: str, environment: str) -> str:
    return f"team-{team}-{environment}"


def team_subject(team: TeamCi, environment: str) -> str:
    """The `sub` of a deploy job of the team's repository in the GitHub environment named after
    the stage, in GitHub's default claim format (repo:OWNER/REPO:environment:ENV; docs.github.com,
    "OpenID Connect reference"): the environment's deployment-branch rule keeps other branches out."""
    return f"repo:{team.repository}:environment:{environment}"


def team_trust_policy(provider_arn: str, team: TeamCi, environment: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "TeamRepositoryDeploys", "Effect": "Allow", "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": GITHUB_OIDC_AUDIENCE,
                                       f"{GITHUB_OIDC_HOST}:sub": team_subject(team, environment)}}}]}


def _team_iam(config: BootstrapConfig, team: str, environment: str, account_id: str) -> list[dict[str, Any]]:
    """The team's roles and policies, each role created or changed only with the team boundary."""
    project, partition = config.stacks_project, arn_partition(config.region)
    prefix = team_name_prefix(project, team, environment)
    iam = f"arn:{partition}:iam::{account_id}"
    roles = [f"{iam}:role/{prefix}-*", f"{iam}:role/{project}-{environment}-team-{team}-secrets"]
    bounded = {"iam:PermissionsBoundary": f"{iam}:policy/{team_boundary_policy_name(project, team, environment)}"}
    return [
        {"Sid": "TeamRolesAndPolicies", "Effect": "Allow", "Action": list(TEAM_IAM_ACTION_PATTERNS),
         "Resource": [*roles, f"{iam}:policy/{prefix}-*"]},
        {"Sid": "TeamRolesCarryTheTeamBoundary", "Effect": "Deny",
         "Action": ["iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy", "iam:UpdateAssumeRolePolicy"],
         "Resource": roles, "Condition": {"StringNotEquals": bounded}},
        {"Sid": "NoBoundaryChanges", "Effect": "Deny",
         "Action": ["iam:DeleteRolePermissionsBoundary", "iam:PutRolePermissionsBoundary"], "Resource": ["*"]},
    ]


def team_members(config: BootstrapConfig, team: str) -> tuple[str, ...]:
    """The registry's members of `team` (bootstrap/config.py `teams.<team>.members`), as written."""
    return next((row.members for row in config.teams if row.name == team), ())


def _members_entries(config: BootstrapConfig, team: str, environment: str, account_id: str) -> list[dict[str, Any]]:
    """Access entries for the registry's members of the team and no other role, and the View
    association of those entries; none of either for a team without members.

    In the boundary, so it holds for every role the team creates as well as its deploy role: a role
    `<project>-<env>-<team>-*` carries this boundary whatever its own policy (`eks:*`, say) and its
    trust (TeamRolesCarryTheTeamBoundary). eks:principalArn is CreateAccessEntry's key (Service
    Authorization Reference, Amazon EKS) and holds the request's principalArn as written. ArnEquals
    compares it per ARN component, case-sensitively (IAM User Guide, "IAM JSON policy elements:
    Condition operators", ARN operators), with each member as the registry writes it: an ARN spelt
    otherwise (another case, another path) is refused even when IAM would resolve it to a member,
    never the reverse; a role of the project's in another case (`GPU-Training-ci-deploy-prod`, the
    same role to IAM, whose role names are not case-sensitive) is no member (bootstrap/config.py
    refuses the project's roles, case folded). ArnEquals takes wildcards as ArnLike does, so each
    member is a literal ARN, without `*`, `?` or `${` (bootstrap/config.py ROLE_ARN)."""
    members = team_members(config, team)
    if not members:
        return []
    project, partition = config.stacks_project, arn_partition(config.region)
    eks, cluster, stack = f"arn:{partition}:eks:*:{account_id}", cluster_name(project, environment), team_stack(team, environment)
    namespace = team_namespace(team)
    requested = {f"aws:RequestTag/{TEAM_TAG}": team, f"aws:RequestTag/{STACK_TAG}": stack}
    own = {f"aws:ResourceTag/{TEAM_TAG}": team, f"aws:ResourceTag/{STACK_TAG}": stack}
    return [
        # A member, never a node type, no user name of its own (EKS derives one from the role), no
        # group but the one only the namespace's RoleBinding names (components/workload/team_members.py).
        {"Sid": "TeamMembersEntries", "Effect": "Allow", "Action": ["eks:CreateAccessEntry"],
         "Resource": [f"{eks}:cluster/{cluster}"],
         "Condition": {"StringEquals": {**requested, "eks:accessEntryType": "STANDARD"},
                       "ForAllValues:StringEquals": {"eks:kubernetesGroups": [members_group(namespace)]},
                       "ArnEquals": {"eks:principalArn": list(members)},
                       # ForAllValues holds on a key the request lacks (IAM User Guide, "Set
                       # operators for multivalued context keys"): the group must be there.
                       "Null": {"eks:username": "true", "eks:kubernetesGroups": "false"}}},
        {"Sid": "TeamMembersViewTheirNamespace", "Effect": "Allow", "Action": ["eks:AssociateAccessPolicy"],
         "Resource": [f"{eks}:access-entry/{cluster}/*"],
         "Condition": {"StringEquals": {**own, "eks:accessScope": "namespace",
                                        "eks:policyArn": access_policy_arn(partition, READ_ONLY_POLICY)},
                       "ForAllValues:StringEquals": {"eks:namespaces": [namespace]},
                       "Null": {"eks:namespaces": "false"}}},
    ]


def _team_cluster_objects(config: BootstrapConfig, team: str, environment: str, account_id: str) -> list[dict[str, Any]]:
    """Its members' access entries on the environment's cluster (_members_entries) and its Pod
    Identity associations on every cluster of the environment, with the condition keys of the
    Service Authorization Reference, Amazon EKS: a create is judged by its request (aws:RequestTag,
    eks:*), everything after it by the tags the team stack's provider put on the entry or
    association (aws:ResourceTag: access-entry and podidentityassociation take it)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    eks, cluster, stack = f"arn:{partition}:eks:*:{account_id}", cluster_name(project, environment), team_stack(team, environment)
    requested = {f"aws:RequestTag/{TEAM_TAG}": team, f"aws:RequestTag/{STACK_TAG}": stack}
    own = {f"aws:ResourceTag/{TEAM_TAG}": team, f"aws:ResourceTag/{STACK_TAG}": stack}
    return [
        *_members_entries(config, team, environment, account_id),
        # No condition key names the namespace or service account (CreatePodIdentityAssociation
        # takes aws:RequestTag and aws:TagKeys only): the role it passes is the team's (iam:PassRole
        # in TeamRolesAndPolicies). Its trust, which the team may rewrite (no condition key of
        # UpdateAssumeRolePolicy shows the document), decides whose pods get it; an association
        # in another namespace squats that service account (docs/security.md, the tenant boundary).
        {"Sid": "TeamPodIdentities", "Effect": "Allow", "Action": ["eks:CreatePodIdentityAssociation"],
         "Resource": [f"{eks}:cluster/{cluster}*"], "Condition": {"StringEquals": requested}},
        # Its tags are who owns it, so no tag call may set or remove `team` or `stack` (aws:TagKeys
        # names each key a TagResource sets or an UntagResource removes): retagged, its own entry or
        # association would be team nlp's or the platform's; untagged, no one's. The provider's
        # updates send only the tags that change (terraform-provider-aws internal/service/eks/
        # tags_gen.go updateTags), and a stack's `team` and `stack` never do. The other actions
        # send no aws:TagKeys, which ForAllValues passes (IAM User Guide, "Set operators for
        # multivalued context keys"); an untag always names its keys (EKS API Reference,
        # UntagResource: tagKeys is required).
        # Its own entries whoever's role they are for: a member taken out of the registry keeps
        # its entry until the team stack deletes it (docs/team-stacks.md, the removal order).
        # Not eks:UpdateAccessEntry: it takes new groups and a user name, and no condition key
        # judges the request's. The provider updates an entry's groups in place (terraform-provider-aws
        # internal/service/eks/access_entry.go: kubernetes_groups is not ForceNew), so a change of
        # the members group's name needs the entries replaced (delete, create), not updated.
        {"Sid": "TeamEntriesAndAssociations", "Effect": "Allow", "Action": [
            "eks:DeleteAccessEntry", "eks:DescribeAccessEntry", "eks:DisassociateAccessPolicy",
            "eks:ListAssociatedAccessPolicies", "eks:*PodIdentityAssociation", "eks:*Tag*"],
         "Resource": [f"{eks}:access-entry/{cluster}/*", f"{eks}:podidentityassociation/{cluster}*"],
         "Condition": {"StringEquals": own, "ForAllValues:StringNotEquals": {"aws:TagKeys": [TEAM_TAG, STACK_TAG]}}},
    ]


def team_state_objects(bucket_arn: str, project: str, stack: str) -> list[str]:
    """names.py stack_objects in fewer characters, for the boundary's 6,144: its state file, and one
    pattern for its history, backups, journal and lock (`.pulumi/<kind>/[organization/]<project>/<stack>/*`),
    which matches no other stack's object (tests/test_team_deploy_roles.py compares both)."""
    return [*stack_checkpoints(bucket_arn, project, stack), f"{bucket_arn}/.pulumi/*/{project}/{stack}/*"]


def team_boundary_policy(config: BootstrapConfig, team: str, environment: str, *, account_id: str, bucket_arn: str,
                         state_key_arn: str, secrets_key_arn: str) -> dict[str, Any]:
    """The team deploy role's policy and permissions boundary, and the boundary of every role the
    team's stacks create: the team's names and prefixes only (this module's docstring)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    prefix = team_name_prefix(project, team, environment)
    buckets = f"arn:{partition}:s3:::{project}-{environment}-*"
    stack = team_stack(team, environment)
    # A key is the team's when the team stack of this environment made it: the provider tags every
    # resource with its team and stack (components/common/tags.py); a key of the platform or of the
    # team's stack in another environment carries another stack.
    own_key = {f"aws:ResourceTag/{TEAM_TAG}": team, f"aws:ResourceTag/{STACK_TAG}": stack}
    # Without Sids and one-value lists (compact.py: the same decisions), for the 6,144 characters.
    return compact_policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "WriteTeamState", "Effect": "Allow", "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
         "Resource": [state_metadata(bucket_arn), *team_state_objects(bucket_arn, project, stack)]},
        {"Sid": "UseStateKeyThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [state_key_arn], "Condition": via_s3(config.region)},
        # Only its own stack's data key: a team stack's secrets provider names the stack as its
        # encryption context (names.py team_secrets_provider_url), which KMS binds to the
        # ciphertext; the platform's and other teams' stacks' data keys carry none or their own.
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [secrets_key_arn],
         "Condition": {"StringEquals": {f"kms:EncryptionContext:{SECRETS_CONTEXT_KEY}": stack}}},
        {"Sid": "TeamPrefixOfTheBuckets", "Effect": "Allow", "Action": ["s3:*Object", "s3:*ObjectVersion*",
                                                                       "s3:AbortMultipartUpload"],
         "Resource": [f"{buckets}/teams/{team}/*"]},
        {"Sid": "ListTeamPrefix", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
         "Resource": [buckets], "Condition": {"StringLike": {"s3:prefix": [f"teams/{team}/*"]}}},
        {"Sid": "TeamSecrets", "Effect": "Allow", "Action": ["secretsmanager:*"],
         "Resource": [f"arn:{partition}:secretsmanager:*:{account_id}:secret:{project}/{environment}/teams/{team}/*"]},
        # Tags on creation (CreateKey's Tags need kms:TagResource too); tagging a key that exists
        # is TeamKeys' (the team's own) alone: NoOtherKeys refuses any other key that carries a stack.
        {"Sid": "CreateTeamKeys", "Effect": "Allow", "Action": ["kms:CreateKey", "kms:TagResource"], "Resource": ["*"],
         "Condition": {"StringEquals": {f"aws:RequestTag/{TEAM_TAG}": team, f"aws:RequestTag/{STACK_TAG}": stack}}},
        {"Sid": "TeamKeys", "Effect": "Allow", "Action": ["kms:*"],
         "Resource": [f"arn:{partition}:kms:*:{account_id}:key/*"], "Condition": {"StringEquals": own_key}},
        {"Sid": "TeamKeyAliases", "Effect": "Allow", "Action": ["kms:*Alias"],
         "Resource": [f"arn:{partition}:kms:*:{account_id}:alias/{prefix}-*"]},
        # The provider reads an alias back through ListAliases, which takes no resource (Service
        # Authorization Reference, AWS KMS): it lists names and key ids only.
        {"Sid": "ListKeyAliases", "Effect": "Allow", "Action": ["kms:ListAliases"], "Resource": ["*"]},
        # Exact names, or a prefix ending in the team's namespace: `<prefix>-*` would take team
        # vision-x's too. Alarms: components/observability/training_metrics.py alarm_name.
        {"Sid": "TeamAlarmsDashboardsBudget", "Effect": "Allow", "Action": ["budgets:*", "cloudwatch:*"], "Resource": [
            f"arn:{partition}:cloudwatch:*:{account_id}:alarm:{prefix}-{team_namespace(team)}-*",
            f"arn:{partition}:cloudwatch::{account_id}:dashboard/{dashboard_name_of(prefix)}",
            f"arn:{partition}:budgets::{account_id}:budget/{budget_name(prefix)}"]},
        # Reads of the environment's clusters (the Kubernetes provider's endpoint and CA) and of its
        # platform stacks' contracts (components/team.py published_contract): `<env>*` is the
        # environment's stacks, `prod` and `prod-<region>` (stack_names.py: no environment's name
        # starts with another's). One statement for both, for the 6,144: each action names no
        # resource of the other's service.
        {"Sid": "ReadTheEnvironmentsPlatform", "Effect": "Allow", "Action": ["eks:DescribeCluster", "ssm:GetParameter"],
         "Resource": [f"arn:{partition}:eks:*:{account_id}:cluster/{cluster_name(project, environment)}*",
                      f"arn:{partition}:ssm:*:{account_id}:parameter{contract_parameter_name(project, f'{environment}*')}"]},
        *_team_cluster_objects(config, team, environment, account_id),
        *_team_iam(config, team, environment, account_id),
        # No other stack's key, whatever an Allow above matches: the platform's, another team's, the
        # team's own in another environment, the bootstrap's (each carries its stack; only a key
        # being created has none). Except using a key's data keys, which only the Allows above grant,
        # each for one key ARN and one use: the bootstrap's state key through S3, its secrets key for
        # the team's own stack's data key. An exemption by the bootstrap's tag instead would let the
        # team re-tag those keys as its own (CreateTeamKeys' kms:TagResource), then own them (TeamKeys).
        {"Sid": "NoOtherKeys", "Effect": "Deny", "NotAction": ["kms:CreateKey", "kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [f"arn:{partition}:kms:*:{account_id}:key/*"],
         "Condition": {"StringNotEquals": {f"aws:ResourceTag/{STACK_TAG}": stack},
                       "Null": {f"aws:ResourceTag/{STACK_TAG}": "false"}}},
    ]})

