"""The permissions boundary every role of an environment's stacks carries (`boundary_policy`):
one managed policy of at most 6,144 characters."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from bootstrap.config import BootstrapConfig
from bootstrap.policies.actions import BOUNDARY_ACTIONS, BOUNDARY_SERVICE_LINKED_ROLES
from bootstrap.policies.compact import compact_policy, literal_prefix
from bootstrap.policies.names import environment_sites, in_partition
from bootstrap.policies.scope import (
    AUTOSCALING_GROUPS,
    BOUNDARY_NEVER_ACTIONS,
    BOUNDARY_PROJECT_EXEMPT_ACTIONS,
    BOUNDARY_PROJECT_SCOPED_RESOURCES,
    CLUSTER_AUTOSCALER_TAG,
    CNI_CLUSTER_TAG,
    EKS_CLUSTER_NAME_TAG,
    ENVIRONMENT_TAG,
    PROJECT_TAG,
    cluster_patterns,
    deny_other_environments,
)
from components.common.kms import log_group_pattern
from components.facts.regions import arn_partition
from components.identity.policies import prod_bucket_patterns

# Metadata reads a boundary allows by verb, not one by one (a boundary is one managed policy of
# at most 6,144 characters: IAM User Guide, "IAM and AWS STS quotas"): every Describe and List of
# a service BOUNDARY_ACTIONS reads, but IAM's (iam:List* would read every role, user and key of
# the account: its two reads stay as they are).
COLLAPSED_VERBS = ("Describe", "List")
EXACT_SERVICES = ("iam",)
# Services the boundary allows whole on their resources of the account only, never on `*`: ELB's
# (AmazonEKSClusterPolicy's classic load balancers, the Load Balancer Controller's ALBs and target
# groups; every ELB action but Describe* takes a load balancer, listener, rule or target group ARN:
# Service Authorization Reference, "Actions defined by Elastic Load Balancing V2"). Their reads
# stay Describe* on `*`.
ACCOUNT_SCOPED_SERVICES = ("elasticloadbalancing",)
# Families of BOUNDARY_ACTIONS the boundary writes as one wildcard each, with every action the
# wildcard matches in the Service Authorization Reference ("Actions, resources, and condition keys
# for <service>"): all of them are in the table, or reads of what the table writes (S3's other
# object-version reads). tests/test_bootstrap.py checks both, and that every family member the
# table lists is written by its family.
ACTION_FAMILIES: dict[str, tuple[str, ...]] = {
    "ec2:*NetworkInterface": ("ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
                              "ec2:DetachNetworkInterface"),
    "ec2:*PrivateIpAddresses": ("ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
    "ec2:*SecurityGroupIngress": ("ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"),
    "ec2messages:*Message*": ("ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
                              "ec2messages:GetMessages"),
    "s3:GetObjectVersion*": ("s3:GetObjectVersion", "s3:GetObjectVersionAcl", "s3:GetObjectVersionAttributes",
                             "s3:GetObjectVersionForReplication", "s3:GetObjectVersionTagging", "s3:GetObjectVersionTorrent"),
    "s3:Replicate*": ("s3:ReplicateDelete", "s3:ReplicateObject", "s3:ReplicateTags"),
    "ssm:PutCo*": ("ssm:PutComplianceItems", "ssm:PutConfigurePackageResult"),
    "ssm:Update*Status": ("ssm:UpdateAssociationStatus", "ssm:UpdateInstanceAssociationStatus"),
    "ssmmessages:*Channel": ("ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
                             "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"),
    # The Load Balancer Controller's WAF calls.
    "waf-regional:*sociateWebACL": ("waf-regional:AssociateWebACL", "waf-regional:DisassociateWebACL"),
    "waf-regional:GetWebACL*": ("waf-regional:GetWebACL", "waf-regional:GetWebACLForResource"),
    "wafv2:*sociateWebACL": ("wafv2:AssociateWebACL", "wafv2:DisassociateWebACL"),
    "wafv2:GetWebACL*": ("wafv2:GetWebACL", "wafv2:GetWebACLForResource"),
    "xray:GetSampling*": ("xray:GetSamplingRules", "xray:GetSamplingStatisticSummaries", "xray:GetSamplingTargets"),
    "xray:PutT*": ("xray:PutTelemetryRecords", "xray:PutTraceSegments"),
}


def _written_as(action: str) -> str | None:
    """How the boundary's `*` statement writes a BOUNDARY_ACTIONS action (None: the account-scoped one does)."""
    service, name = action.split(":", 1)
    verb = next((v for v in COLLAPSED_VERBS if name.startswith(v)), None) if service not in EXACT_SERVICES else None
    if verb:
        return f"{service}:{verb}*"
    if service in ACCOUNT_SCOPED_SERVICES:
        return None
    return next((family for family in ACTION_FAMILIES if fnmatch.fnmatchcase(action, family)), action)


def boundary_allow_list() -> list[str]:
    """BOUNDARY_ACTIONS as the boundary's `*` statement writes them: Describe*/List* per service,
    ACTION_FAMILIES, and no action of ACCOUNT_SCOPED_SERVICES but its reads."""
    written = {_written_as(a) for group in BOUNDARY_ACTIONS.values() for a in group}
    return sorted(a for a in written if a is not None)


def _own_buckets(config: BootstrapConfig, environment: str) -> list[str]:
    partition = arn_partition(config.region)
    own = f"arn:{partition}:s3:::{config.stacks_project}-{environment}-*"
    return [own, f"{own}/*"]


def _read_bucket_names(config: BootstrapConfig, environment: str) -> tuple[str, ...]:
    return next((env.read_buckets for env in config.environments if env.name == environment), ())


def _bucket_arn(config: BootstrapConfig, name: str) -> str:
    return f"arn:{arn_partition(config.region)}:s3:::{name}"


def _read_buckets(config: BootstrapConfig, environment: str) -> list[str]:
    return [arn for name in _read_bucket_names(config, environment)
            for arn in (_bucket_arn(config, name), f"{_bucket_arn(config, name)}/*")]


def boundary_scoped_resources() -> list[str]:
    """BOUNDARY_PROJECT_SCOPED_RESOURCES of the services in which the boundary allows an action
    that is not an exempt read: in the others (EKS, whose only actions it allows are reads, FSx,
    SNS) the Deny would refuse nothing, and spend the characters the other scopes need."""
    def acts_in(service: str) -> bool:
        return any(action.startswith(f"{service}:") and action not in BOUNDARY_PROJECT_EXEMPT_ACTIONS
                   for action in boundary_allow_list())
    return [arn for arn in BOUNDARY_PROJECT_SCOPED_RESOURCES if acts_in(arn.split(":", 1)[0])]


def _boundary_environment_reach(config: BootstrapConfig, environment: str) -> list[dict[str, Any]]:
    """What a role of the stacks changes only on the environment's own, besides what carries the
    project's tag (issue 41 item 6):
    - network interfaces and Auto Scaling groups: the project's, the CNI's of the environment's
      clusters (CNI_CLUSTER_TAG) or the node groups' of its clusters (CLUSTER_AUTOSCALER_TAG).
      Creating an interface is exempt (a new one has no tags yet: the CNI tags it as it creates
      it), and so is tagging, which only at creation is allowed on an EC2 resource without the
      project's tag (DenyRetaggingOtherEc2): no other project's interface is tagged into the
      environment, nor any other project's resource retagged;
    - log groups: the environment's names (log_group_pattern of each cluster);
    - roles to assume: the environment's names, as well as its tag (DenyRolesOutsideEnvironment):
      a role of another project tagged with the same environment is not one."""
    project, partition = config.stacks_project, arn_partition(config.region)
    clusters = [cluster for cluster, _ in environment_sites(config, environment)]
    interfaces = in_partition(config, "ec2:*:*:network-interface/*")
    return [
        {"Sid": "DenyOtherInterfacesAndGroups", "Effect": "Deny",
         "NotAction": ["ec2:Describe*", "ec2:CreateNetworkInterface", "ec2:CreateTags", "autoscaling:Describe*"],
         "Resource": [*interfaces, *in_partition(config, AUTOSCALING_GROUPS)], "Condition": {"StringNotEquals": {
             f"aws:ResourceTag/{PROJECT_TAG}": project, f"aws:ResourceTag/{CNI_CLUSTER_TAG}": clusters,
             **{f"aws:ResourceTag/{CLUSTER_AUTOSCALER_TAG.format(cluster=cluster)}": "owned" for cluster in clusters}}}},
        {"Sid": "DenyRetaggingOtherEc2", "Effect": "Deny", "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
         "Resource": in_partition(config, "ec2:*:*:*"), "Condition": {
             "StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": project}, "Null": {"ec2:CreateAction": "true"}}},
        {"Sid": "DenyOtherLogGroups", "Effect": "Deny", "Action": ["logs:Create*", "logs:Put*"],
         "NotResource": [f"arn:{partition}:logs:*:*:log-group:{log_group_pattern(cluster)}" for cluster in clusters]},
        {"Sid": "DenyOtherProjectsRoles", "Effect": "Deny", "Action": ["sts:AssumeRole"],
         "NotResource": [f"arn:{partition}:iam::*:role/{project}-{environment}-*"]},
    ]


def _boundary_project_scope(config: BootstrapConfig, environment: str) -> list[dict[str, Any]]:
    """The boundary's share of deploy_scope_policy: nothing of another project, by tag, by
    cluster name and by bucket name; no tagging a resource into the project (no role of the
    stacks sets the project tag: the deploy role does, at creation)."""
    project = config.stacks_project
    read_buckets = _read_buckets(config, environment)
    statements: list[dict[str, Any]] = [
        {"Sid": "DenyOtherProjects", "Effect": "Deny", "NotAction": list(BOUNDARY_PROJECT_EXEMPT_ACTIONS),
         "Resource": in_partition(config, *boundary_scoped_resources()),
         "Condition": {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": project}}},
        {"Sid": "DenyOtherSecurityGroups", "Effect": "Deny", "NotAction": list(BOUNDARY_PROJECT_EXEMPT_ACTIONS),
         "Resource": in_partition(config, "ec2:*:*:security-group/*"), "Condition": {"StringNotEquals": {
             f"aws:ResourceTag/{PROJECT_TAG}": project,
             f"aws:ResourceTag/{EKS_CLUSTER_NAME_TAG}": [cluster for cluster, _ in environment_sites(config, environment)]}}},
        {"Sid": "DenyOtherClusters", "Effect": "Deny", "Action": ["eks:*"],
         "NotResource": cluster_patterns(config, environment)},
        {"Sid": "DenyOtherBuckets", "Effect": "Deny", "Action": ["s3:*"],
         "NotResource": [*_own_buckets(config, environment), *read_buckets]},
        {"Sid": "DenySettingTheProjectTag", "Effect": "Deny", "Action": ["*"], "Resource": ["*"],
         "Condition": {"Null": {f"aws:RequestTag/{PROJECT_TAG}": "false"}}},
        # (Retagging another project's resources: DenyOtherProjects, which covers the only
        # tagging the boundary allows, ec2:CreateTags; ELB's AddTags is on load balancers only.)
        {"Sid": "DenyNeverActions", "Effect": "Deny", "Action": list(BOUNDARY_NEVER_ACTIONS), "Resource": ["*"]},
        *_boundary_environment_reach(config, environment),
    ]
    if read_buckets:
        statements.append({"Sid": "ReadOnlyOfReadBuckets", "Effect": "Deny",
                           "NotAction": ["s3:GetObject", "s3:ListBucket"], "Resource": read_buckets})
    return statements


def boundary_policy(config: BootstrapConfig, environment: str, *, account_id: str, **_: Any) -> dict[str, Any]:
    """The permissions boundary of every role the environment's stacks create (`boundary_as_written`),
    in the fewest characters that decide every request as it does: a boundary is one managed
    policy of at most 6,144 characters (IAM User Guide, "IAM and AWS STS quotas"), and each
    readBuckets entry adds four ARNs of its name to it."""
    written = boundary_as_written(config, environment, account_id=account_id)
    exact = _without_unreachable_prod_patterns(config, environment, written)
    return compact_policy(_merged_by_service(config, environment, exact))


def boundary_as_written(config: BootstrapConfig, environment: str, *, account_id: str) -> dict[str, Any]:
    """The boundary statement by statement, each with its Sid: whatever a role's own policies say,
    it can take only the actions the stacks' roles take (BOUNDARY_ACTIONS), never on IAM (beyond
    the service-linked role the cluster policy creates), never on another environment's or
    project's resources or data, never on the bootstrap, and assume only roles of its own
    environment. `boundary_policy` renders it shorter, with the same decisions."""
    allowed, partition = boundary_allow_list(), arn_partition(config.region)
    statements: list[dict[str, Any]] = [
        {"Sid": "ActionsOfTheStacksRoles", "Effect": "Allow", "Action": allowed, "Resource": ["*"]},
        {"Sid": "LoadBalancingOfTheAccount", "Effect": "Allow", "Action": [f"{s}:*" for s in ACCOUNT_SCOPED_SERVICES],
         "Resource": [f"arn:{partition}:{s}:*:{account_id}:*" for s in ACCOUNT_SCOPED_SERVICES]},
        {"Sid": "ServiceLinkedRolesOfTheClusterPolicy", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": ["*"], "Condition": {"StringEquals": {"iam:AWSServiceName": list(BOUNDARY_SERVICE_LINKED_ROLES)}}},
        deny_other_environments(environment),
        # Other environments' buckets: DenyOtherBuckets; their secrets, keys and every other
        # resource carry their environment's tag (DenyOtherEnvironments) and one without the
        # project's tag is refused by DenyOtherProjects. The bootstrap's keys carry the bootstrap's
        # project tag (bootstrap/__main__.py), so DenyOtherProjects refuses them too, and their key
        # policies admit no role of the project but the CI roles (keys.py). Naming them again, as
        # the boundary once did, spent the room of the 6,144 characters a managed policy holds
        # (IAM User Guide, "IAM and AWS STS quotas") that the scopes above need. No IAM action but
        # the service-linked role is allowed above, so no IAM write needs a Deny.
        # An untagged role is not the environment's either (StringNotEquals holds on a missing key).
        {"Sid": "DenyRolesOutsideEnvironment", "Effect": "Deny", "Action": ["sts:AssumeRole"], "Resource": ["*"],
         "Condition": {"StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment}}},
        *_boundary_project_scope(config, environment),
    ]
    if environment != "prod" and _read_buckets(config, environment):
        # Prod buckets by any name among the buckets it may read (DenyOtherBuckets refuses the rest).
        statements.append({"Sid": "DenyProdBuckets", "Effect": "Deny", "Action": ["s3:*"],
                           "Resource": prod_bucket_patterns(arn_partition(config.region))})
    return {"Version": "2012-10-17", "Statement": statements}



def _glob_matches(pattern: str, value: str) -> bool:
    """A resource pattern against an ARN: `*` any characters, `?` one (IAM User Guide, "IAM JSON
    policy elements: Resource")."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, value, flags=re.DOTALL) is not None


def _without_unreachable_prod_patterns(config: BootstrapConfig, environment: str,
                                       written: dict[str, Any]) -> dict[str, Any]:
    """DenyProdBuckets, DenyOtherBuckets and ReadOnlyOfReadBuckets of a non-prod boundary with
    readBuckets, with the same decisions in fewer characters. Every S3 ARN but the environment's
    own buckets and its read buckets is refused by DenyOtherBuckets already, so DenyProdBuckets
    decides only on those two:
    - a read bucket whose name is a prod one (its ARN matches a pattern of DenyProdBuckets; the
      patterns come in pairs, bucket and `/*`, so its objects match too) is refused every S3
      action either way: it leaves DenyOtherBuckets' NotResource, which then refuses it (it stays
      in ReadOnlyOfReadBuckets, whose NotAction refuses other services' actions on it too);
    - a pattern whose characters before its first wildcard are not compatible with the own
      buckets' (`arn:aws:s3:::<project>-<env>-`: neither starts the other) matches no own bucket,
      and after the step above no read bucket nor object of one (a bucket name is literal:
      config.py checks it), so it is dropped.
    tests/test_boundary_compaction.py holds both to the decisions of `boundary_as_written`."""
    statements = {s.get("Sid"): s for s in written["Statement"]}
    prod = statements.get("DenyProdBuckets")
    if prod is None:
        return written
    prod_named = {arn for name in _read_bucket_names(config, environment)
                  for arn in (_bucket_arn(config, name), f"{_bucket_arn(config, name)}/*")
                  if any(_glob_matches(p, _bucket_arn(config, name)) for p in prod["Resource"])}
    own_prefix = literal_prefix(_own_buckets(config, environment)[0])

    def reaches_own(pattern: str) -> bool:
        prefix = literal_prefix(pattern)
        return prefix.startswith(own_prefix) or own_prefix.startswith(prefix)

    kept: list[dict[str, Any]] = []
    for statement in written["Statement"]:
        sid = statement.get("Sid")
        if sid == "DenyOtherBuckets":
            statement = {**statement, "NotResource": [r for r in statement["NotResource"] if r not in prod_named]}
        elif sid == "DenyProdBuckets":
            statement = {**statement, "Resource": [r for r in statement["Resource"] if reaches_own(r)]}
        kept.append(statement)
    return {**written, "Statement": kept}


# Denies of one service's actions outside the environment's names each, and the unconditional
# Deny of the never actions: one statement whose NotResource lists every service's names. A
# request names a resource of its own action's service (or `*`): every resource type an action
# takes is its service's (Service Authorization Reference, "Resource types defined by ..."; an
# sts:AssumeRole names an IAM role), and the services' ARN patterns here are disjoint (arn:<p>:eks,
# :s3, :logs, :iam), so each action meets only its own service's patterns, as before.
MERGED_BY_SERVICE = ("DenyOtherClusters", "DenyOtherBuckets", "DenyOtherLogGroups", "DenyOtherProjectsRoles",
                     "DenyNeverActions")


def _merged_by_service(config: BootstrapConfig, environment: str, exact: dict[str, Any]) -> dict[str, Any]:
    """MERGED_BY_SERVICE as one statement, and ReadOnlyOfReadBuckets on `<bucket>*` for each read
    bucket whose name no own bucket's starts with: its other matches are S3 ARNs DenyOtherBuckets
    refuses whole already, or another read bucket's whose writes it refuses too.
    tests/test_boundary_compaction.py holds both to `boundary_as_written` on requests that name a
    resource of their action's service."""
    merged: dict[str, Any] = {"Sid": "DenyOutsideTheEnvironmentsNames", "Effect": "Deny", "Action": [],
                              "NotResource": []}
    own_prefix = literal_prefix(_own_buckets(config, environment)[0])
    statements: list[dict[str, Any]] = []
    for statement in exact["Statement"]:
        sid = statement.get("Sid")
        if sid in MERGED_BY_SERVICE:
            merged["Action"] += statement["Action"]
            merged["NotResource"] += statement.get("NotResource", [])
            if not any(s is merged for s in statements):
                statements.append(merged)
        elif sid == "ReadOnlyOfReadBuckets":
            buckets = [r for r in statement["Resource"] if not r.endswith("/*")]
            shortened = [f"{r}*" if not (r.startswith(own_prefix) or own_prefix.startswith(r)) else r for r in buckets]
            objects = [f"{r}/*" for r, short in zip(buckets, shortened, strict=True) if short == r]
            statements.append({**statement, "Resource": [*shortened, *objects]})
        else:
            statements.append(statement)
    return {**exact, "Statement": statements}

# The verbs of a service's reads, and the services that have no action of a verb (Service
# Authorization Reference; tests/test_iam_grammar.py checks every IAM action a plan names exists):
