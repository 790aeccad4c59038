"""The deploy role's documents: its inline policy (`deploy_policy`), what it never does
(`deploy_guard_policy`) and what keeps it to the project (`deploy_scope_policy`)."""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig
from bootstrap.policies.actions import (
    ATTACHABLE_MANAGED_POLICIES,
    BOUNDED_ROLE_ACTIONS,
    FSX_S3_ACCESS_ROLES,
    GLOBAL_SERVICES,
    MANAGED_SERVICES,
    ROLE_ACTIONS,
    SERVICE_LINKED_ROLES,
)
from bootstrap.policies.ci_roles import contract_parameters, program_invokes_statement, via_s3
from bootstrap.policies.names import (
    boundary_policy_arn,
    boundary_policy_name,
    ci_role_pattern,
    cluster_name,
    environment_regions,
    environment_sites,
    environment_stacks,
    in_partition,
    stack_objects,
    state_metadata,
)
from bootstrap.policies.scope import (
    AUTOSCALING_GROUPS,
    CLUSTER_ACCESS_ACTIONS,
    CONTRACT_PARAMETER_ACTIONS,
    ENVIRONMENT_TAG,
    NAME_SCOPED_READS,
    NAME_SCOPED_SERVICES,
    NEVER_ACTIONS,
    PEERING_ACTIONS,
    PROJECT_EXEMPT_ACTIONS,
    PROJECT_SCOPED_RESOURCES,
    PROJECT_TAG,
    RESOURCELESS_ACTIONS,
    SNS_TOPIC_ACTIONS,
    TAGGING_ACTIONS,
    cluster_patterns,
    deny_other_environments,
)
from components.common.kms import log_group_pattern
from components.facts.regions import arn_partition

# The verbs of a service's reads, and the services that have no action of a verb (Service
# Authorization Reference; tests/test_iam_grammar.py checks every IAM action a plan names exists):
# a wildcard that matches no action is an error to IAM's policy validation ("Invalid action").
READ_VERBS = ("Describe", "Get", "List")
NO_READS_OF_VERB = {"autoscaling": ("List",), "eks": ("Get",), "elasticfilesystem": ("Get",), "sns": ("Describe",)}


def _platform_services(services: list[str], partition: str, regions: list[str]) -> list[dict[str, Any]]:
    """Whole services on their resources of these regions only; on `*` (what AWS requires of
    actions without a resource type) only their reads and RESOURCELESS_ACTIONS. An ARN has all six
    fields, the account's and resource's wildcards too (IAM User Guide, "IAM identifiers")."""
    in_region = {"StringEquals": {"aws:RequestedRegion": regions}}
    return [
        {"Sid": "ManagePlatformServices", "Effect": "Allow", "Action": [f"{service}:*" for service in services],
         "Resource": [f"arn:{partition}:{service}:{region}:*:*" for service in services for region in regions],
         "Condition": in_region},
        {"Sid": "ReadPlatformServices", "Effect": "Allow",
         "Action": [*(f"{service}:{verb}*" for service in services for verb in READ_VERBS
                      if verb not in NO_READS_OF_VERB.get(service, ())),
                    *RESOURCELESS_ACTIONS, *NAME_SCOPED_READS], "Resource": ["*"], "Condition": in_region},
    ]


def deploy_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                  secrets_key_arns: dict[str, str], oidc_provider_arn: str) -> dict[str, Any]:
    """`secrets_key_arns`: every environment's secrets-provider key (the others are denied)."""
    project, region, partition = config.stacks_project, config.region, arn_partition(config.region)
    role_arns = f"arn:{partition}:iam::{account_id}:role/*"
    own_objects = [arn for stack in environment_stacks(config, environment) for arn in stack_objects(bucket_arn, project, stack)]
    services = sorted(set(MANAGED_SERVICES.values()) - {"iam", "s3", "ssm", *GLOBAL_SERVICES, *NAME_SCOPED_SERVICES})
    own_tag = {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment}
    bounded = {"iam:PermissionsBoundary": boundary_policy_arn(project, environment, account_id, partition)}
    attachable = [f"arn:{partition}:iam::aws:policy/{name}" for name in ATTACHABLE_MANAGED_POLICIES]
    statements: list[dict[str, Any]] = [
        # The state of this environment's stacks, nothing else in the bucket.
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "ReadStateMetadata", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [state_metadata(bucket_arn)]},
        {"Sid": "WriteStateOfEnvironment", "Effect": "Allow", "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
         "Resource": own_objects},
        {"Sid": "UseStateKeyThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [state_key_arn], "Condition": via_s3(region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"],
         "Resource": [secrets_key_arns[environment]]},
        program_invokes_statement(),
        # The services the stacks create resources in, in the stacks' regions only.
        *_platform_services(services, partition, environment_regions(config, environment)),
        # Each platform stack's log groups and alarms, in its region, by its names.
        {"Sid": "ManageEnvironmentLogsAndAlarms", "Effect": "Allow", "Action": ["cloudwatch:*", "logs:*"], "Resource": [
            arn for site, site_region in environment_sites(config, environment) for arn in (
                f"arn:{partition}:logs:{site_region}:{account_id}:log-group:{log_group_pattern(site)}",
                f"arn:{partition}:cloudwatch:{site_region}:{account_id}:alarm:{site}-*",
                # Dashboards are global (no region in their ARN): the stacks' and their teams'.
                f"arn:{partition}:cloudwatch::{account_id}:dashboard/{site}-*")]},
        # Each platform stack's contract, in its region, by its name (components/platform.py
        # _publish_contract); its team stacks read it (the preview role too: ci_roles.py).
        {"Sid": "ManagePlatformContracts", "Effect": "Allow", "Action": list(CONTRACT_PARAMETER_ACTIONS),
         "Resource": contract_parameters(config, environment, account_id)},
        # The environment's budgets (named <project>-<environment>[-<team>]-monthly).
        {"Sid": "ManageEnvironmentBudgets", "Effect": "Allow", "Action": ["budgets:*"],
         "Resource": [f"arn:{partition}:budgets::{account_id}:budget/{project}-{environment}-*"]},
        {"Sid": "ManageEnvironmentBuckets", "Effect": "Allow", "Action": ["s3:*"],
         "Resource": [f"arn:{partition}:s3:::{project}-{environment}-*"]},
        # IAM: roles of this environment only (they carry its tag from the stacks' provider), and
        # every role it creates or gives permissions to carries the environment's boundary.
        {"Sid": "CreateBoundedEnvironmentRoles", "Effect": "Allow", "Action": ["iam:CreateRole"],
         "Resource": [role_arns], "Condition": {"StringEquals": {f"aws:RequestTag/{ENVIRONMENT_TAG}": environment,
                                                                 **bounded}}},
        {"Sid": "ChangeBoundedEnvironmentRoles", "Effect": "Allow", "Action": list(BOUNDED_ROLE_ACTIONS),
         "Resource": [role_arns], "Condition": {"StringEquals": {**own_tag, **bounded}}},
        {"Sid": "AttachListedManagedPolicies", "Effect": "Allow", "Action": ["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
         "Resource": [role_arns], "Condition": {"StringEquals": {**own_tag, **bounded},
                                                "ArnEquals": {"iam:PolicyARN": attachable}}},
        {"Sid": "UseEnvironmentRoles", "Effect": "Allow", "Action": list(ROLE_ACTIONS), "Resource": [role_arns],
         "Condition": {"StringEquals": own_tag}},
        {"Sid": "ReadManagedPolicies", "Effect": "Allow", "Action": ["iam:GetPolicy", "iam:GetPolicyVersion"],
         "Resource": [f"arn:{partition}:iam::aws:policy/*"]},
        {"Sid": "CreateServiceLinkedRoles", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": ["*"], "Condition": {"StringEquals": {"iam:AWSServiceName": list(SERVICE_LINKED_ROLES)}}},
        {"Sid": "LetFsxReachLinkedBuckets", "Effect": "Allow", "Action": ["iam:AttachRolePolicy", "iam:PutRolePolicy"],
         "Resource": [f"arn:{partition}:iam::{account_id}:{FSX_S3_ACCESS_ROLES}"]},
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _tagging_scope(project: str) -> list[dict[str, Any]]:
    """Tag-then-read fails: no request sets the project tag to another value, and no tag of a
    resource that carries another project's tag changes."""
    return [
        {"Sid": "DenyOtherProjectTagValues", "Effect": "Deny", "Action": ["*"], "Resource": ["*"], "Condition": {
            "StringNotEquals": {f"aws:RequestTag/{PROJECT_TAG}": project},
            "Null": {f"aws:RequestTag/{PROJECT_TAG}": "false"}}},
        {"Sid": "DenyRetaggingOtherProjects", "Effect": "Deny", "Action": list(TAGGING_ACTIONS), "Resource": ["*"],
         "Condition": {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": project},
                       "Null": {f"aws:ResourceTag/{PROJECT_TAG}": "false"}}},
    ]


def deploy_guard_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                        secrets_key_arns: dict[str, str], oidc_provider_arn: str) -> dict[str, Any]:
    """What the deploy role never does, whatever `deploy_policy` allows: another environment's
    resources and secrets, the bootstrap, the boundaries, other roles by chaining, peering outside
    the environment, another project's tags (other projects' resources: deploy_scope_policy). A
    managed policy of its own beside the inline one: inline, it left no room for another regional
    site, each of which adds its region's resources to ManagePlatformServices, and a role's inline
    policies hold 10,240 characters together (IAM User Guide, "IAM and AWS STS quotas"). The
    deploy role can neither change nor detach it (DenyCiIdentityAndBoundaries)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    other_keys = [arn for env, arn in sorted(secrets_key_arns.items()) if env != environment]
    statements: list[dict[str, Any]] = [
        deny_other_environments(environment),
        {"Sid": "DenyTaggingIntoOtherEnvironments", "Effect": "Deny", "Action": ["*"], "Resource": ["*"], "Condition": {
            "StringNotEquals": {f"aws:RequestTag/{ENVIRONMENT_TAG}": environment},
            "Null": {f"aws:RequestTag/{ENVIRONMENT_TAG}": "false"}}},
        {"Sid": "DenyBoundaryChanges", "Effect": "Deny",
         "Action": ["iam:DeleteRolePermissionsBoundary", "iam:PutRolePermissionsBoundary"], "Resource": ["*"]},
        {"Sid": "DenyStateBucketSettings", "Effect": "Deny", "NotAction": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "DenyBootstrapState", "Effect": "Deny", "Action": ["s3:*"],
         "Resource": [f"{bucket_arn}/.pulumi/*/{config.project}/*"]},
        {"Sid": "DenyManagingBootstrapKeys", "Effect": "Deny", "NotAction": ["kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": [state_key_arn, secrets_key_arns[environment]]},
        {"Sid": "DenyBootstrapAliases", "Effect": "Deny", "Action": ["kms:*"],
         "Resource": [f"arn:{partition}:kms:*:{account_id}:alias/{project}-pulumi-*"]},
        {"Sid": "DenyCiIdentityAndBoundaries", "Effect": "Deny", "Action": ["iam:*"],
         "Resource": [f"arn:{partition}:iam::{account_id}:role/{ci_role_pattern(project)}", oidc_provider_arn,
                      f"arn:{partition}:iam::{account_id}:policy/{boundary_policy_name(project, '*')}",
                      f"arn:{partition}:iam::{account_id}:policy/{ci_role_pattern(project)}"]},
        {"Sid": "DenyRoleChaining", "Effect": "Deny", "Action": ["sts:AssumeRole"], "Resource": ["*"]},
        *_peering_scope(config, environment, account_id),
        *_peering_tagging_scope(config, environment, account_id),
        # Another project's tags, never: here rather than in deploy_scope_policy, which each
        # regional site lengthens (its clusters), since TAGGING_ACTIONS names its services one by one.
        *_tagging_scope(project),
    ]
    if other_keys:
        statements.append({"Sid": "DenyOtherEnvironmentsSecrets", "Effect": "Deny", "Action": ["kms:*"], "Resource": other_keys})
    return {"Version": "2012-10-17", "Statement": statements}


def _peering_scope(config: BootstrapConfig, environment: str, account_id: str) -> list[dict[str, Any]]:
    """PEERING_ACTIONS only between VPCs of the environment (issue 41 item 6). What IAM sees of a
    peering (Service Authorization Reference, Amazon EC2: the vpc-peering-connection resource of
    Create/AcceptVpcPeeringConnection takes ec2:AccepterVpc and ec2:RequesterVpc, VPC ARNs, and
    aws:ResourceTag, its own tags; the vpc resource is the requester VPC on create and the accepter
    VPC on accept, with its tags): never the tags of the *other* side's VPC. So:
    - the VPC a call names carries the environment's and the project's tags;
    - the other side's VPC is in the account and in one of the environment's regions (an ARN
      holds its region);
    - a connection is requested with the environment's tag (tag-on-create, which the provider
      does: terraform-provider-aws internal/service/ec2/vpc_peering_connection.go,
      resourceVPCPeeringConnectionCreate's TagSpecifications; DenyTaggingIntoOtherEnvironments
      keeps it the requester's own) and never loses it (no DeleteTags). Within one
      Region the connection is one resource, so another environment's accept meets that tag and
      DenyOtherEnvironments refuses it. Across Regions the accepter's side is a copy without the
      requester's tags: there both VPCs' Regions are the accepting environment's, which another
      environment can meet only if the two share two Regions (peering_gaps warns of that)."""
    vpcs = in_partition(config, *(f"ec2:{region}:{account_id}:vpc/*" for region in environment_regions(config, environment)))
    vpc_resources, connections = in_partition(config, "ec2:*:*:vpc/*"), in_partition(config, "ec2:*:*:vpc-peering-connection/*")
    return [
        {"Sid": "PeerOnlyTheEnvironmentsVpcs", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
         "Resource": vpc_resources, "Condition": {"StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment}}},
        {"Sid": "PeerOnlyTheProjectsVpcs", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
         "Resource": vpc_resources, "Condition": {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": config.stacks_project}}},
        *({"Sid": f"PeerOnlyInTheAccountAndRegions{side}", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
           "Resource": connections, "Condition": {"ArnNotLike": {f"ec2:{side}Vpc": vpcs}}}
          for side in ("Accepter", "Requester")),
        {"Sid": "RequestPeeringsTaggedWithTheEnvironment", "Effect": "Deny", "Action": ["ec2:CreateVpcPeeringConnection"],
         "Resource": connections, "Condition": {"Null": {f"aws:RequestTag/{ENVIRONMENT_TAG}": "true"}}},
        {"Sid": "KeepPeeringsTags", "Effect": "Deny", "Action": ["ec2:DeleteTags"], "Resource": connections},
    ]


def peering_gaps(config: BootstrapConfig) -> list[str]:
    """The warnings for pairs of environments that share two Regions or more: between those, a
    connection requested across Regions by one can be accepted by the other (_peering_scope)."""
    regions = {env.name: set(environment_regions(config, env.name)) for env in config.environments}
    names = sorted(regions)
    return [f"environments {first} and {second} share the Regions {', '.join(sorted(regions[first] & regions[second]))}: "
            f"IAM cannot refuse {second}'s deploy role a peering that {first}'s VPC requests from one of them to "
            f"{second}'s VPC in another, nor the reverse (docs/security.md, \"The permissions boundary\"); give "
            "each pair of environments one Region in common at most to close it"
            for index, first in enumerate(names) for second in names[index + 1:]
            if len(regions[first] & regions[second]) >= 2]


def _peering_tagging_scope(config: BootstrapConfig, environment: str, account_id: str) -> list[dict[str, Any]]:
    """Tagging a peering connection (the accepter Region's side is tagged after its acceptance,
    not at creation: exempt from DenyAdoptingOtherProjectsEc2): not one that joins a VPC outside
    the account, where the request says which VPCs it joins (Null:
    a request without the key is not refused by this)."""
    vpcs = in_partition(config, f"ec2:*:{account_id}:vpc/*")
    return [{"Sid": f"TagOnlyTheEnvironmentsPeerings{side}", "Effect": "Deny", "Action": ["ec2:CreateTags"],
             "Resource": in_partition(config, "ec2:*:*:vpc-peering-connection/*"),
             "Condition": {"ArnNotLike": {f"ec2:{side}Vpc": vpcs}, "Null": {f"ec2:{side}Vpc": "false"}}}
            for side in ("Accepter", "Requester")]


# What using a key is (components/common/kms.py KEY_USE_ACTIONS).
def deploy_scope_policy(config: BootstrapConfig, environment: str, *, account_id: str, **_: Any) -> dict[str, Any]:
    """What keeps the deploy role off other projects' resources in the account: a managed policy
    attached to the deploy role beside its inline one, which it could not hold as well (IAM User
    Guide, "IAM and AWS STS quotas": 10,240 characters of inline policy per role, 6,144 per
    managed policy). The deploy role can neither change nor detach it (DenyCiIdentityAndBoundaries)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    prefix = cluster_name(project, environment)
    clusters = [cluster for cluster, _ in environment_sites(config, environment)]
    project_tag = {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": project}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DenyOtherProjects", "Effect": "Deny", "NotAction": list(PROJECT_EXEMPT_ACTIONS),
         "Resource": in_partition(config, *PROJECT_SCOPED_RESOURCES), "Condition": project_tag},
        {"Sid": "DenyOtherTopicNames", "Effect": "Deny", "Action": list(SNS_TOPIC_ACTIONS),
         "NotResource": [f"arn:{partition}:sns:*:*:{prefix}-*"]},
        # The clusters' node group groups, or the project's (keys of one operator: all must fail).
        {"Sid": "DenyOtherAutoScalingGroups", "Effect": "Deny", "NotAction": ["autoscaling:Describe*"],
         "Resource": in_partition(config, AUTOSCALING_GROUPS), "Condition": {"StringNotEquals": {
             f"aws:ResourceTag/{PROJECT_TAG}": project,
             **{f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned" for cluster in clusters}}}},
        {"Sid": "DenySharing", "Effect": "Deny", "Action": list(NEVER_ACTIONS), "Resource": ["*"]},
        # Access to a cluster (an entry, a pod identity, an add-on or node group that runs code in
        # it) only on this environment's cluster, by name as well as by tag.
        {"Sid": "DenyOtherClusters", "Effect": "Deny", "Action": list(CLUSTER_ACCESS_ACTIONS),
         "NotResource": cluster_patterns(config, environment)},
        # Tag-on-create of secrets and repositories goes through TagResource (exempt above), so
        # those are scoped by the names the stacks give them: no other project's secret or
        # repository can be tagged into the project, then read.
        {"Sid": "DenyTaggingOtherSecrets", "Effect": "Deny",
         "Action": ["secretsmanager:TagResource", "secretsmanager:UntagResource"],
         "NotResource": [f"arn:{partition}:secretsmanager:*:*:secret:{project}/{environment}/*"]},
        {"Sid": "DenyTaggingOtherRepositories", "Effect": "Deny", "Action": ["ecr:TagResource", "ecr:UntagResource"],
         "NotResource": [f"arn:{partition}:ecr:*:*:repository/{cluster}/*" for cluster in clusters]},
        # (Tag-then-read by retagging: _tagging_scope, in deploy_guard_policy for the room it takes.)
        # A data repository association exports a file system's files to a bucket: its creation is
        # exempt above (the new association has no tags), not on another project's file system.
        {"Sid": "DenyLinkingOtherFileSystems", "Effect": "Deny", "Action": ["fsx:CreateDataRepositoryAssociation"],
         "Resource": [f"arn:{partition}:fsx:*:*:file-system/*"], "Condition": project_tag},
        # Tagging an existing EC2 resource (no ec2:CreateAction: not tag-on-create) needs it to be
        # the project's already. Security groups excepted: the VPC's default group is created
        # untagged by EC2 and adopted by the stack (aws.ec2.DefaultSecurityGroup), which tags it
        # first, then changes its rules (terraform-provider-aws internal/service/ec2/
        # vpc_default_security_group.go, resourceDefaultSecurityGroupCreate). Peering connections
        # too: the accepter Region's side of the manager's is tagged by its accepter after the
        # acceptance, not at creation; which connections may be tagged is held to the account and
        # regions by the VPCs they join (deploy_guard_policy, TagOnlyTheEnvironmentsPeerings*).
        {"Sid": "DenyAdoptingOtherProjectsEc2", "Effect": "Deny", "Action": ["ec2:CreateTags"],
         "Resource": in_partition(config, *(arn for arn in PROJECT_SCOPED_RESOURCES if arn.startswith("ec2:")
                                           and ":security-group/" not in arn and ":vpc-peering-connection/" not in arn)),
         "Condition": {**project_tag, "Null": {"ec2:CreateAction": "true"}}},
    ]}
