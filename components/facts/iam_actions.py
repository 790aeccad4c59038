"""IAM actions AWS authorises only on Resource "*": the Service Authorization Reference lists no
resource type for them, so a statement naming them can name no narrower resource.

One home for that fact: the statements that use "*" for them (the Cluster Autoscaler's role) and
the test that allows "*" for nothing else (tests/test_iam_policies.py) both read it here.
"""

from __future__ import annotations

# The read-only calls the Cluster Autoscaler needs (kubernetes/autoscaler
# cluster-autoscaler/cloudprovider/aws/README.md, "Permissions").
CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
# The registry login of the CI roles that pull or push images (ECR API Reference, GetAuthorizationToken).
ECR_LOGIN_ACTION = "ecr:GetAuthorizationToken"
RESOURCE_STAR_ONLY_ACTIONS = frozenset({*CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS, ECR_LOGIN_ACTION})
