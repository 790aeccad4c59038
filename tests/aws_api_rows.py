"""The rows the plans are checked against (tests/aws_api_model.py runs them): which AWS API
operation receives each Pulumi resource's inputs (API), and the constraints the API references
state only in words (PROSE). The provider's schema checks none of these: a plan that breaks one
synthesises, previews, and fails on the first `pulumi up`.

Source of the models: botocore 1.44.18 (BOTOCORE_VERSION, pinned in requirements-dev.txt), the files
botocore/data/<service>/<api version>/service-2.json.gz named in SERVICES; a row's member path names
a member of the operation's input shape, whose min/max length, pattern, enum, numeric range and
list or map size apply. Most prose constraints are quoted from the same files' documentation
strings (source "<service> <shape or operation> <member>"); the others name their page.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import regex

BOTOCORE_VERSION = "1.44.18"
# service -> the API version of its model file, botocore/data/<service>/<version>/service-2.json.gz
SERVICES = {"autoscaling": "2011-01-01", "budgets": "2016-10-20", "ce": "2017-10-25", "cloudwatch": "2010-08-01",
            "ec2": "2016-11-15", "ecr": "2015-09-21", "efs": "2015-02-01", "eks": "2017-11-01",
            "fsx": "2018-03-01", "iam": "2010-05-08", "kms": "2014-11-01", "logs": "2014-03-28",
            "s3": "2006-03-01", "secretsmanager": "2017-10-17", "sns": "2010-03-31", "ssm": "2014-11-06"}


@dataclass(frozen=True)
class Call:
    """The API operation that receives a resource's inputs. `fields` maps a Pulumi input path to
    the member path in the operation's input shape: `a.b` nests, `a[]` is each list element. A
    Pulumi map (tags, labels, dimensions) goes whole to a map shape or a list of Key/Value pairs."""
    service: str
    operation: str
    fields: Mapping[str, str]


TAGS = {"tags": "Tags"}
EC2_TAGS = {"tags": "TagSpecifications[].Tags"}



def nested(pulumi_prefix: str, api_prefix: str, *members: str, **renamed: str) -> dict[str, str]:
    """The rows of one nested block: `<pulumi_prefix>.<member>` -> `<api_prefix>.<Member>` for each
    member the API names the same but capitalised, `<pulumi_prefix>.<key>` -> `<api_prefix>.<value>`
    for each renamed one."""
    return {f"{pulumi_prefix}.{member}": f"{api_prefix}.{member[:1].upper()}{member[1:]}" for member in members} | {
        f"{pulumi_prefix}.{key}": f"{api_prefix}.{value}" for key, value in renamed.items()}


# Pulumi type (pulumi-aws 7.x token) -> the operations its inputs reach, for the fields that carry
# a constraint (names, descriptions, enums, ranges, tags). Fields without one are left out.
API: dict[str, tuple[Call, ...]] = {
    "aws:autoscaling/tag:Tag": (
        Call("autoscaling", "CreateOrUpdateTags", {"tag.key": "Tags[].Key", "tag.value": "Tags[].Value"}),),
    "aws:budgets/budget:Budget": (Call("budgets", "CreateBudget", {
        "name": "Budget.BudgetName", "budgetType": "Budget.BudgetType", "timeUnit": "Budget.TimeUnit",
        "limitAmount": "Budget.BudgetLimit.Amount", "limitUnit": "Budget.BudgetLimit.Unit",
        "notifications": "NotificationsWithSubscribers",
        **nested("notifications[]", "NotificationsWithSubscribers[].Notification",
                 "comparisonOperator", "notificationType", "threshold", "thresholdType")}),),
    "aws:costexplorer/costAllocationTag:CostAllocationTag": (Call("ce", "UpdateCostAllocationTagsStatus", {
        "tagKey": "CostAllocationTagsStatus[].TagKey", "status": "CostAllocationTagsStatus[].Status"}),),
    "aws:cloudwatch/dashboard:Dashboard": (Call("cloudwatch", "PutDashboard", {"dashboardName": "DashboardName"}),),
    "aws:cloudwatch/logGroup:LogGroup": (
        Call("logs", "CreateLogGroup", {"name": "logGroupName", "tags": "tags"}),
        Call("logs", "PutRetentionPolicy", {"retentionInDays": "retentionInDays"})),
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": (Call("logs", "PutMetricFilter", {
        "name": "filterName", "pattern": "filterPattern",
        **nested("metricTransformation", "metricTransformations[]", name="metricName", namespace="metricNamespace",
                 value="metricValue", unit="unit", dimensions="dimensions")}),),
    "aws:cloudwatch/metricAlarm:MetricAlarm": (Call("cloudwatch", "PutMetricAlarm", {
        "name": "AlarmName", "alarmDescription": "AlarmDescription", "comparisonOperator": "ComparisonOperator",
        "evaluationPeriods": "EvaluationPeriods", "datapointsToAlarm": "DatapointsToAlarm", "period": "Period",
        "metricName": "MetricName", "namespace": "Namespace", "statistic": "Statistic", "dimensions": "Dimensions",
        "treatMissingData": "TreatMissingData", "alarmActions": "AlarmActions", "okActions": "OKActions",
        "metricQueries": "Metrics", **nested("metricQueries[]", "Metrics[]", "id", "expression", "label"),
        **nested("metricQueries[].metric", "Metrics[].MetricStat.Metric", "metricName", "namespace", "dimensions"),
        **nested("metricQueries[].metric", "Metrics[].MetricStat", "period", "stat"), "tags": "Tags"}),),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": (Call("ec2", "CreateTags", {"tags": "Tags"}),),
    "aws:ec2/eip:Eip": (Call("ec2", "AllocateAddress", {"domain": "Domain", **EC2_TAGS}),),
    "aws:ec2/flowLog:FlowLog": (Call("ec2", "CreateFlowLogs", {
        "trafficType": "TrafficType", "logDestinationType": "LogDestinationType", **EC2_TAGS}),),
    "aws:ec2/internetGateway:InternetGateway": (Call("ec2", "CreateInternetGateway", EC2_TAGS),),
    "aws:ec2/launchTemplate:LaunchTemplate": (Call("ec2", "CreateLaunchTemplate", {
        "description": "VersionDescription",
        "blockDeviceMappings[].ebs.volumeType": "LaunchTemplateData.BlockDeviceMappings[].Ebs.VolumeType",
        **nested("metadataOptions", "LaunchTemplateData.MetadataOptions", "httpTokens", "httpEndpoint"),
        **nested("tagSpecifications[]", "LaunchTemplateData.TagSpecifications[]", "resourceType", "tags"), **EC2_TAGS}),),
    "aws:ec2/natGateway:NatGateway": (Call("ec2", "CreateNatGateway", EC2_TAGS),),
    "aws:ec2/placementGroup:PlacementGroup": (Call("ec2", "CreatePlacementGroup", {"strategy": "Strategy", **EC2_TAGS}),),
    "aws:ec2/routeTable:RouteTable": (Call("ec2", "CreateRouteTable", EC2_TAGS),),
    "aws:ec2/securityGroup:SecurityGroup": (Call("ec2", "CreateSecurityGroup", EC2_TAGS),),
    "aws:ec2/subnet:Subnet": (Call("ec2", "CreateSubnet", EC2_TAGS),),
    "aws:ec2/vpc:Vpc": (Call("ec2", "CreateVpc", EC2_TAGS),),
    "aws:ec2/vpcEndpoint:VpcEndpoint": (Call("ec2", "CreateVpcEndpoint", {"vpcEndpointType": "VpcEndpointType", **EC2_TAGS}),),
    "aws:ec2/vpcPeeringConnection:VpcPeeringConnection": (Call("ec2", "CreateVpcPeeringConnection", EC2_TAGS),),
    "aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter": (Call("ec2", "CreateTags", {"tags": "Tags"}),),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": (Call("ecr", "PutLifecyclePolicy", {"policy": "lifecyclePolicyText"}),),
    "aws:ecr/repository:Repository": (Call("ecr", "CreateRepository", {
        "name": "repositoryName", "imageTagMutability": "imageTagMutability",
        "encryptionConfigurations[].encryptionType": "encryptionConfiguration.encryptionType", "tags": "tags"}),),
    "aws:efs/accessPoint:AccessPoint": (Call("efs", "CreateAccessPoint", {
        "posixUser.uid": "PosixUser.Uid", "posixUser.gid": "PosixUser.Gid",
        "rootDirectory.path": "RootDirectory.Path",
        **nested("rootDirectory.creationInfo", "RootDirectory.CreationInfo", "ownerUid", "ownerGid", "permissions"), **TAGS}),),
    "aws:efs/backupPolicy:BackupPolicy": (Call("efs", "PutBackupPolicy", {"backupPolicy.status": "BackupPolicy.Status"}),),
    "aws:efs/fileSystem:FileSystem": (
        Call("efs", "CreateFileSystem", {"creationToken": "CreationToken", "performanceMode": "PerformanceMode",
                                         "throughputMode": "ThroughputMode", **TAGS}),
        Call("efs", "PutLifecycleConfiguration", {
            "lifecyclePolicies": "LifecyclePolicies", "lifecyclePolicies[].transitionToIa": "LifecyclePolicies[].TransitionToIA",
            "lifecyclePolicies[].transitionToPrimaryStorageClass": "LifecyclePolicies[].TransitionToPrimaryStorageClass"})),
    "aws:eks/accessEntry:AccessEntry": (Call("eks", "CreateAccessEntry", {"tags": "tags"}),),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        Call("eks", "AssociateAccessPolicy", {"accessScope.type": "accessScope.type"}),),
    "aws:eks/addon:Addon": (
        Call("eks", "CreateAddon", {"resolveConflictsOnCreate": "resolveConflicts", "tags": "tags"}),
        Call("eks", "UpdateAddon", {"resolveConflictsOnUpdate": "resolveConflicts"})),
    "aws:eks/cluster:Cluster": (Call("eks", "CreateCluster", {
        "name": "name", "accessConfig.authenticationMode": "accessConfig.authenticationMode",
        "upgradePolicy.supportType": "upgradePolicy.supportType", "enabledClusterLogTypes": "logging.clusterLogging[].types",
        "tags": "tags"}),),
    "aws:eks/nodeGroup:NodeGroup": (Call("eks", "CreateNodegroup", {
        "amiType": "amiType", "capacityType": "capacityType", "labels": "labels", "taints": "taints",
        "taints[].key": "taints[].key", "taints[].value": "taints[].value", "taints[].effect": "taints[].effect",
        "scalingConfig.minSize": "scalingConfig.minSize", "scalingConfig.maxSize": "scalingConfig.maxSize",
        "scalingConfig.desiredSize": "scalingConfig.desiredSize",
        "updateConfig.maxUnavailable": "updateConfig.maxUnavailable",
        "updateConfig.updateStrategy": "updateConfig.updateStrategy", "tags": "tags"}),),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": (Call("eks", "CreatePodIdentityAssociation", {"tags": "tags"}),),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (Call("fsx", "CreateDataRepositoryAssociation", {
        "fileSystemPath": "FileSystemPath", "s3.autoExportPolicy.events": "S3.AutoExportPolicy.Events",
        "s3.autoImportPolicy.events": "S3.AutoImportPolicy.Events", **TAGS}),),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (Call("fsx", "CreateFileSystem", {
        "storageCapacity": "StorageCapacity", "storageType": "StorageType", "fileSystemTypeVersion": "FileSystemTypeVersion",
        "deploymentType": "LustreConfiguration.DeploymentType",
        "perUnitStorageThroughput": "LustreConfiguration.PerUnitStorageThroughput",
        "metadataConfiguration.mode": "LustreConfiguration.MetadataConfiguration.Mode", **TAGS}),),
    "aws:iam/role:Role": (Call("iam", "CreateRole", {
        "name": "RoleName", "path": "Path", "description": "Description", "assumeRolePolicy": "AssumeRolePolicyDocument",
        "maxSessionDuration": "MaxSessionDuration", "permissionsBoundary": "PermissionsBoundary", **TAGS}),),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": (Call("iam", "CreateOpenIDConnectProvider", {
        "url": "Url", "clientIdLists": "ClientIDList", "thumbprintLists": "ThumbprintList", **TAGS}),),
    "aws:iam/policy:Policy": (Call("iam", "CreatePolicy", {
        "name": "PolicyName", "path": "Path", "description": "Description", "policy": "PolicyDocument", **TAGS}),),
    "aws:iam/rolePolicy:RolePolicy": (Call("iam", "PutRolePolicy", {"name": "PolicyName", "policy": "PolicyDocument"}),),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": (Call("iam", "AttachRolePolicy", {"policyArn": "PolicyArn"}),),
    "aws:kms/alias:Alias": (Call("kms", "CreateAlias", {"name": "AliasName"}),),
    "aws:kms/key:Key": (
        Call("kms", "CreateKey", {"description": "Description", "policy": "Policy", "tags": "Tags"}),
        Call("kms", "ScheduleKeyDeletion", {"deletionWindowInDays": "PendingWindowInDays"})),
    "aws:s3/bucket:Bucket": (Call("s3", "PutBucketTagging", {"tags": "Tagging.TagSet"}),),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (Call("s3", "PutBucketLifecycleConfiguration", {
        "rules[].id": "LifecycleConfiguration.Rules[].ID", "rules[].status": "LifecycleConfiguration.Rules[].Status"}),),
    "aws:s3/bucketLogging:BucketLogging": (Call("s3", "PutBucketLogging", {
        "targetObjectKeyFormat.partitionedPrefix.partitionDateSource":
            "BucketLoggingStatus.LoggingEnabled.TargetObjectKeyFormat.PartitionedPrefix.PartitionDateSource"}),),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": (Call("s3", "PutBucketOwnershipControls", {
        "rule.objectOwnership": "OwnershipControls.Rules[].ObjectOwnership"}),),
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": (Call("s3", "PutBucketReplication", {
        "rules[].status": "ReplicationConfiguration.Rules[].Status",
        "rules[].deleteMarkerReplication.status": "ReplicationConfiguration.Rules[].DeleteMarkerReplication.Status",
        "rules[].sourceSelectionCriteria.sseKmsEncryptedObjects.status":
            "ReplicationConfiguration.Rules[].SourceSelectionCriteria.SseKmsEncryptedObjects.Status"}),),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (Call("s3", "PutBucketEncryption", {
        "rules[].applyServerSideEncryptionByDefault.sseAlgorithm":
            "ServerSideEncryptionConfiguration.Rules[].ApplyServerSideEncryptionByDefault.SSEAlgorithm"}),),
    "aws:s3/bucketVersioning:BucketVersioning": (Call("s3", "PutBucketVersioning", {
        "versioningConfiguration.status": "VersioningConfiguration.Status"}),),
    "aws:secretsmanager/secret:Secret": (
        Call("secretsmanager", "CreateSecret", {"name": "Name", "description": "Description", **TAGS}),),
    "aws:sns/topic:Topic": (Call("sns", "CreateTopic", {"tags": "Tags"}),),
    "aws:ssm/parameter:Parameter": (Call("ssm", "PutParameter", {
        "name": "Name", "description": "Description", "type": "Type", "tier": "Tier", **TAGS}),),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (Call("ec2", "AuthorizeSecurityGroupEgress", {
        "description": "IpPermissions[].IpRanges[].Description", **EC2_TAGS}),),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (Call("ec2", "AuthorizeSecurityGroupIngress", {
        "description": "IpPermissions[].IpRanges[].Description", **EC2_TAGS}),),
}
# Types whose inputs carry no constraint beyond ids, ARNs and booleans (a SecretVersion's value is
# "[secret]" in the plan), listed so that a new type in a plan is a decision, not a gap.
UNCONSTRAINED = ("aws:ec2/routeTableAssociation:RouteTableAssociation", "aws:efs/fileSystemPolicy:FileSystemPolicy",
                 "aws:efs/mountTarget:MountTarget", "aws:s3/bucketPolicy:BucketPolicy",
                 "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
                 "aws:secretsmanager/secretVersion:SecretVersion", "aws:sns/topicPolicy:TopicPolicy")


# --- constraints the API references state in words ---------------------------------------------

@dataclass(frozen=True)
class Prose:
    """A constraint stated in an API reference's text, not in the model's shapes."""
    field: str
    """Pulumi input path, as in Call.fields; "" for the resource's inputs as a whole."""
    accepts: Callable[[Any], bool]
    says: str
    """What the reference says (quoted where it is the model's own documentation)."""
    source: str


def _pattern(expression: str) -> Callable[[Any], bool]:
    compiled = regex.compile(expression)
    return lambda value: isinstance(value, str) and compiled.fullmatch(value) is not None


def _one_of(*allowed: Any) -> Callable[[Any], bool]:
    return lambda value: value in allowed


def _between(low: int, high: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and low <= value <= high


def _user_data_fits(value: Any) -> bool:
    return isinstance(value, str) and len(base64.b64decode(value)) <= 16 * 1024


def _bucket_name(value: Any) -> bool:
    """S3 User Guide, "General purpose bucket naming rules" (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""
    if not (isinstance(value, str) and regex.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", value)) or ".." in value:
        return False
    try:
        ipaddress.IPv4Address(value)
        return False
    except ValueError:
        pass
    return not value.startswith(("xn--", "sthree-", "amzn-s3-demo-")) and \
        not value.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"))


def _lustre_capacity(value: Any) -> bool:
    return isinstance(value, int) and (value in (1200, 2400) or (value > 0 and value % 2400 == 0))


# "Valid characters: a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*", up to 255 (security groups
# and their rules' descriptions alike).
EC2_SG_TEXT = r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]{0,255}"
SG_RULE_DESCRIPTION = Prose("description", _pattern(EC2_SG_TEXT), 'up to 255 of "a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*"',
                            "ec2 IpRange Description")
SG_RULE_PROTOCOL = Prose("ipProtocol", _pattern(r"tcp|udp|icmp|icmpv6|-1|[0-9]{1,3}"),
                         '"tcp, udp, icmp, icmpv6" or a protocol number, "-1" for all', "ec2 IpPermission IpProtocol")
SG_RULE_PORTS = (Prose("fromPort", _between(-1, 65535), "a port, or -1 (all ICMP types)", "ec2 IpPermission FromPort"),
                 Prose("toPort", _between(-1, 65535), "a port, or -1 (all ICMP codes)", "ec2 IpPermission ToPort"))

METRIC_ALARM_SINGLE_METRIC = {"namespace", "metricName", "dimensions", "period", "unit", "statistic", "extendedStatistic"}

PROSE: dict[str, tuple[Prose, ...]] = {
    "aws:cloudwatch/logGroup:LogGroup": (Prose(
        "retentionInDays", _one_of(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                                   2922, 3288, 3653),
        '"Possible values are: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, ... 3653"', "logs Days"),),
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": (Prose(
        "metricTransformation.dimensions", lambda v: len(v) <= 3, '"One metric filter can include as many as three dimensions"',
        "logs MetricTransformation dimensions"),),
    "aws:cloudwatch/dashboard:Dashboard": (Prose(
        "dashboardName", _pattern(r"[A-Za-z0-9_-]{1,255}"), '"The maximum length is 255, and valid characters are '
        'A-Z, a-z, 0-9, "-", and "_""', "cloudwatch PutDashboard DashboardName"),),
    "aws:cloudwatch/metricAlarm:MetricAlarm": (
        Prose("", lambda inputs: not inputs.get("metricQueries") or not set(inputs) & METRIC_ALARM_SINGLE_METRIC,
              '"If you use the Metrics parameter, you cannot include the Namespace, MetricName, Dimensions, Period, '
              'Unit, Statistic, or ExtendedStatistic parameters"', "cloudwatch PutMetricAlarm Metrics"),
        Prose("metricQueries", lambda queries: sum(q.get("returnData") is not False for q in queries) == 1,
              '"specify true for the one expression result to use as the alarm. For all other metrics and expressions '
              '... specify ReturnData as False" (omitted, it is true)', "cloudwatch MetricDataQuery ReturnData"),
        Prose("metricQueries[].metric.period", lambda v: v in (1, 5, 10, 20, 30) or (isinstance(v, int) and v > 0 and v % 60 == 0),
              '"the period can be 1, 5, 10, 20, 30, 60, or any multiple of 60"', "cloudwatch MetricStat Period"),
        Prose("metricQueries[].id", _pattern(r"[a-z][A-Za-z0-9_]{0,254}"), '"letters, numbers, and underscore. The first '
              'character must be a lowercase letter"', "cloudwatch MetricDataQuery Id"),
        Prose("period", lambda v: v in (10, 20, 30) or (isinstance(v, int) and v > 0 and v % 60 == 0),
              '"Valid values are 10, 20, 30, and any multiple of 60"', "cloudwatch PutMetricAlarm Period"),
        Prose("treatMissingData", _one_of("breaching", "notBreaching", "ignore", "missing"),
              '"Valid Values: breaching | notBreaching | ignore | missing"', "cloudwatch PutMetricAlarm TreatMissingData")),
    "aws:ec2/flowLog:FlowLog": (Prose("maxAggregationInterval", _one_of(60, 600),
                                      '"The possible values are 60 seconds (1 minute) or 600 seconds (10 minutes)"',
                                      "ec2 CreateFlowLogs MaxAggregationInterval"),),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        Prose("name", _pattern(r"[a-zA-Z0-9\(\)\.\-/_]{3,128}"), "3-128 of [a-zA-Z0-9().-/_] (the LaunchTemplateName "
              "shape of the other launch template operations; CreateLaunchTemplate's member is a plain String)",
              "ec2 shape LaunchTemplateName"),
        Prose("userData", _user_data_fits, '"User data is limited to 16 KB" (before base64)',
              "ec2 RequestLaunchTemplateData UserData"),
        Prose("metadataOptions.httpPutResponseHopLimit", _between(1, 64), '"Possible values: Integers from 1 to 64"',
              "ec2 LaunchTemplateInstanceMetadataOptionsRequest HttpPutResponseHopLimit"),
        Prose("networkInterfaces[].interfaceType", _one_of("interface", "efa", "efa-only"),
              '"Valid values: interface | efa | efa-only"',
              "ec2 LaunchTemplateInstanceNetworkInterfaceSpecificationRequest InterfaceType")),
    "aws:ec2/placementGroup:PlacementGroup": (Prose("name", _pattern(r"[\x00-\x7f]{1,255}"), '"Up to 255 ASCII characters"',
                                                    "ec2 CreatePlacementGroup GroupName"),),
    "aws:ec2/securityGroup:SecurityGroup": (
        Prose("description", _pattern(EC2_SG_TEXT), 'up to 255 of "a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*"',
              "ec2 CreateSecurityGroup Description"),
        Prose("name", lambda v: _pattern(EC2_SG_TEXT)(v) and not v.startswith("sg-"),
              "the same characters, up to 255, \"Can't start with sg-\"", "ec2 CreateSecurityGroup GroupName")),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (SG_RULE_DESCRIPTION, SG_RULE_PROTOCOL, *SG_RULE_PORTS),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (SG_RULE_DESCRIPTION, SG_RULE_PROTOCOL, *SG_RULE_PORTS),
    "aws:eks/nodeGroup:NodeGroup": (Prose(
        "nodeGroupName", _pattern(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,62}"), "alphanumeric characters, hyphens and underscores, "
        "starting with an alphanumeric character, at most 63", "Amazon EKS User Guide, create-managed-node-group"),),
    "aws:eks/accessEntry:AccessEntry": (Prose(
        "type", _one_of("STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX"),
        '"Valid values are STANDARD, FARGATE_LINUX, EC2_LINUX, EC2_WINDOWS, EC2, HYBRID_LINUX, and HYPERPOD_LINUX"',
        "eks CreateAccessEntry type"),),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        Prose("storageCapacity", _lustre_capacity, '"1200 GiB, 2400 GiB, and increments of 2400 GiB" (SSD)',
              "fsx CreateFileSystem StorageCapacity"),
        Prose("perUnitStorageThroughput", _one_of(125, 250, 500, 1000), '"For PERSISTENT_2 SSD storage: 125, 250, 500, '
              '1000 MB/s/TiB"', "fsx CreateFileSystemLustreConfiguration PerUnitStorageThroughput")),
    "aws:kms/alias:Alias": (Prose("name", lambda v: isinstance(v, str) and v.startswith("alias/") and not v.startswith("alias/aws/"),
                                  '"must begin with alias/" and "cannot begin with alias/aws/"', "kms CreateAlias AliasName"),),
    "aws:kms/key:Key": (Prose("deletionWindowInDays", _between(7, 30), '"it must be between 7 and 30, inclusive"',
                              "kms ScheduleKeyDeletion PendingWindowInDays"),),
    "aws:s3/bucket:Bucket": (Prose("bucket", _bucket_name, "3-63 of a-z 0-9 . -, a letter or digit at both ends, no '..', "
                                   "not an IP address, no reserved prefix or suffix", "S3 User Guide, bucket naming rules"),),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        Prose("rules[].id", _pattern(r".{1,255}"), '"The value cannot be longer than 255 characters"', "s3 LifecycleRule ID"),
        Prose("rules[].expiration.days", _between(1, 2**31 - 1), '"The value must be a non-zero positive integer"',
              "s3 LifecycleExpiration Days"),
        Prose("rules[].noncurrentVersionExpiration.noncurrentDays", _between(1, 2**31 - 1), '"The value must be a non-zero positive integer"',
              "s3 NoncurrentVersionExpiration NoncurrentDays"),
        Prose("rules[].abortIncompleteMultipartUpload.daysAfterInitiation", _between(1, 2**31 - 1),
              "a positive number of days", "s3 AbortIncompleteMultipartUpload DaysAfterInitiation")),
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": (Prose(
        "rules[].id", _pattern(r".{1,255}"), '"The maximum value is 255 characters"', "s3 ReplicationRule ID"),),
    "aws:secretsmanager/secret:Secret": (
        Prose("name", lambda v: _pattern(r"[A-Za-z0-9/_+=.@-]{1,512}")(v) and not regex.search(r"-[A-Za-z0-9]{6}$", v),
              '"ASCII letters, numbers, and the following characters: /_+=.@-" and "Do not end your secret name with a '
              'hyphen followed by six characters"', "secretsmanager CreateSecret Name"),
        Prose("recoveryWindowInDays", _between(7, 30), '"The number of days from 7 to 30"',
              "secretsmanager DeleteSecret RecoveryWindowInDays")),
    "aws:ssm/parameter:Parameter": (Prose(
        "name", lambda v: _pattern(r"/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,14}")(v)
        and not regex.match(r"/?(aws|ssm)", v, flags=regex.IGNORECASE),
        '"A parameter name can\'t be prefixed with "aws" or "ssm" (case-insensitive)", "only the following symbols and '
        'letters: a-zA-Z0-9_.-", "limited to a maximum depth of fifteen levels"', "ssm PutParameter Name"),
        # The value's size is its tier's (AWS Systems Manager User Guide, "Managing parameter tiers":
        # Standard 4 KB, Advanced 8 KB), which the model does not carry.
        Prose("insecureValue", lambda v: len(v.encode()) <= 8192, '"Advanced parameters: 8 KB"',
              "AWS Systems Manager User Guide, Managing parameter tiers"),),
    "aws:sns/topic:Topic": (Prose("name", _pattern(r"[A-Za-z0-9_-]{1,256}"), '"only uppercase and lowercase ASCII letters, '
                                  'numbers, underscores, and hyphens, ... between 1 and 256 characters"', "sns CreateTopic Name"),),
    "aws:sns/topicSubscription:TopicSubscription": (Prose(
        "protocol", _one_of("http", "https", "email", "email-json", "sms", "sqs", "application", "lambda", "firehose"),
        '"Supported protocols include: http, https, email, email-json, sms, sqs, application, lambda, firehose"',
        "sns Subscribe Protocol"),),
}


def tag_problems(tags: Mapping[str, Any], type_token: str) -> list[str]:
    """Tagging AWS Resources (docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html): keys
    1-128 characters, values 0-256, the aws: prefix reserved (any case); EC2's Tag Key: "a maximum of
    127 Unicode characters. May not begin with aws:" (S3's tag shapes state no lengths at all)."""
    found = [f"tag key {key!r}: the aws: prefix is reserved" for key in tags if key.lower().startswith("aws:")]
    found += [f"tag {key!r}: keys take 1-128 characters, values 0-256" for key, value in tags.items()
              if not 1 <= len(key) <= 128 or (isinstance(value, str) and len(value) > 256)]
    if type_token.startswith(("aws:ec2/", "aws:vpc/")):
        found += [f"tag key {key!r}: EC2 takes at most 127 characters" for key in tags if len(key) > 127]
    return found
