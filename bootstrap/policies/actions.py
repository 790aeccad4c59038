"""What the stacks' roles and the CI roles do, action by action: the services the stacks use, the
boundary's actions by who grants them, the managed policies and service-linked roles, the
program's invokes, the image push and the IAM role actions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    # The platform's contract parameter only (deploy.py ManagePlatformContracts, by name): not the
    # whole service, whose SendCommand reaches instances.
    "aws:ssm/parameter:": "ssm",
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
    # A team stack reads its platforms' contracts (components/team.py): ssm:GetParameter, granted on
    # the environment's contract parameters only (deploy.py ReadPlatformContracts), not on `*`.
    "aws:ssm/getParameter:getParameter": (),
}
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

def services_linked_to(resource_type: str, inputs: Mapping[str, Any]) -> set[str]:
    """The service-linked roles creating this resource (with these engine inputs) needs."""
    return {service for type_token, applies, service in SERVICE_LINKED_ROLE_USES
            if type_token == resource_type and (applies is None or applies(inputs))}
