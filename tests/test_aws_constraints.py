"""Values the plans send to AWS that AWS's own API constraints refuse, although the provider's schema
takes them: every AWS resource of every stack's plan against the operation that receives it, as
botocore's API models and the API references' prose state it (tests/aws_api_rows.py: the rows, tests/aws_api_model.py: the check)."""

import json
import re

import aws_api_model as api
import aws_api_rows as rows
import botocore
import pulumi_aws
import pytest
from botocore.loaders import Loader
from stack_configs import MANIFEST_STACKS, ROOT

from offline.plan import Plan, synthesize

# Fewer values than this checked in a plan means the check stopped reading it (a mapping that
# lost its rows, a plan whose records changed shape), not that the plan got simpler.
MIN_CHECKED = {"team-vision-prod": 300, "bootstrap": 200}
MIN_CHECKED_PLATFORM = 2500
FIX = ("fix the component that plans it (or, where the model is wrong, say why in tests/aws_api_rows.py "
       "beside the row)")


@pytest.fixture(scope="module")
def bootstrap_plan() -> Plan:
    """The one-time program's plan (bootstrap/): its roles, policies and state bucket reach AWS too."""
    return synthesize("bootstrap", project_dir=ROOT / "bootstrap")


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_value_a_plan_sends_to_aws_passes_the_api_models(stack, plan_of):
    report = api.check(plan_of(stack).resources)
    assert report.problems == [], f"{FIX}:\n" + "\n".join(report.problems)
    assert report.checked >= MIN_CHECKED.get(stack, MIN_CHECKED_PLATFORM), report.checked


def test_every_value_the_bootstrap_sends_to_aws_passes_the_api_models(bootstrap_plan):
    report = api.check(bootstrap_plan.resources)
    assert report.problems == [], f"{FIX}:\n" + "\n".join(report.problems)
    assert report.checked >= MIN_CHECKED["bootstrap"], report.checked


def test_every_aws_type_in_the_plans_is_mapped_or_declared_unconstrained(plan_of, bootstrap_plan):
    plans = [plan_of(stack) for stack in MANIFEST_STACKS] + [bootstrap_plan]
    planned = {r["type"] for plan in plans for r in plan.resources if r["type"].startswith("aws:")}
    known = set(rows.API) | set(rows.PROSE) | set(rows.UNCONSTRAINED)
    assert planned - known == set(), ("map each new type's constrained inputs to its API operation in "
                                      "tests/aws_api_rows.py API (or list it in UNCONSTRAINED, saying why)")


@pytest.mark.parametrize(("type_token", "call"), [(t, c) for t, calls in rows.API.items() for c in calls],
                         ids=lambda v: v if isinstance(v, str) else v.operation)
def test_each_row_names_a_pulumi_input_and_a_model_member_that_exist(type_token, call):
    module, resource = type_token.split(":")[1].split("/")[0], type_token.split(":")[2]
    package = getattr(pulumi_aws, module)  # a resource's args are <Type>InitArgs where <Type>Args names a nested type
    args = getattr(package, f"{resource}InitArgs", None) or getattr(package, f"{resource}Args")
    for path, member in call.fields.items():
        top = re.sub(r"(?<!^)(?=[A-Z])", "_", path.split(".")[0].removesuffix("[]")).lower()
        assert hasattr(args, top), f"{type_token}: {path} is no input of pulumi_aws.{module}.{resource}Args"
        api.shape_of(call.service, call.operation, member)  # KeyError: no such member in the model


def test_the_models_are_the_ones_the_mapping_was_read_from():
    """A newer botocore may move a model to a new API version or change a shape: re-read the rows
    against it, then update BOTOCORE_VERSION and the pin in requirements-dev.txt together."""
    assert botocore.__version__ == rows.BOTOCORE_VERSION
    for service, version in rows.SERVICES.items():
        assert version in Loader().list_api_versions(service, "service-2"), api.model_file(service)


def _record(type_token: str, inputs: dict, reads: dict | None = None) -> dict:
    return {"type": type_token, "name": "control", "provider": "aws", "inputs": inputs, "propertyDependencies": reads or {}}


ROLE, NODE_GROUP = "aws:iam/role:Role", "aws:eks/nodeGroup:NodeGroup"
SG, SG_RULE = "aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
REFUSED = [
    # (type, inputs, what the message says): each is a value a lenient check lets through.
    (ROLE, {"name": "r" * 65}, "65 characters; the API takes 1 to 64 (iam CreateRole RoleName"),
    (ROLE, {"name": "gpu training"}, "does not match the pattern [\\w+=,.@-]+"),  # a prefix of it matches
    (NODE_GROUP, {"capacityType": "Spot"}, "is not one of ON_DEMAND, SPOT, CAPACITY_BLOCK"),
    (NODE_GROUP, {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, "is not one of NO_SCHEDULE"),
    (NODE_GROUP, {"labels": {"k" * 64: "v"}}, "64 characters; the API takes 1 to 63"),
    (SG, {"description": "Lustre LNET between the file system's servers"}, "ec2 CreateSecurityGroup Description"),
    (SG_RULE, {"description": "NCCL from the node's pods"}, "ec2 IpRange Description"),
    (SG_RULE, {"ipProtocol": "all"}, "ec2 IpPermission IpProtocol"),
    ("aws:cloudwatch/logGroup:LogGroup", {"retentionInDays": 45}, "Possible values are"),
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {"period": 90}, "any multiple of 60"),
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {"alarmActions": ["arn:aws:sns:us-east-1:1:t"] * 6}, "6 items; the API takes 0 to 5"),
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {"metricQueries": [{"id": "m", "returnData": False}, {"id": "e", "returnData": True}],
                                                "namespace": "GpuTraining"}, "cannot include the Namespace"),
    # an omitted returnData is true: two results for one alarm
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {"metricQueries": [{"id": "steps"}, {"id": "breach", "returnData": True}]},
     "specify ReturnData as False"),
    ("aws:efs/accessPoint:AccessPoint", {"tags": {"owner": "ml's team"}}, "['owner'] = \"ml's team\": does not match"),
    ("aws:efs/accessPoint:AccessPoint", {"rootDirectory": {"path": "/a/b/c/d/e"}}, "efs CreateAccessPoint RootDirectory.Path"),
    ("aws:s3/bucket:Bucket", {"bucket": "Gpu-Training-Dev"}, "S3 User Guide, bucket naming rules"),
    ("aws:s3/bucket:Bucket", {"bucket": "192.168.5.4"}, "not an IP address"),
    ("aws:s3/bucket:Bucket", {"tags": {"AWS:owner": "x"}}, "the aws: prefix is reserved"),
    ("aws:iam/rolePolicy:RolePolicy", {"policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "read-datasets", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})}, "IAM takes A-Z, a-z and 0-9 only"),
    ("aws:iam/role:Role", {"assumeRolePolicy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Pods", "Effect": "Allow"}, {"Sid": "Pods", "Effect": "Allow"}]})}, "appears twice"),
    ("aws:kms/key:Key", {"deletionWindowInDays": 31}, "between 7 and 30"),  # the model's shape allows 1-365
    ("aws:secretsmanager/secret:Secret", {"name": "gpu-training/dev/hf-tokens"}, "hyphen followed by six characters"),
    ("aws:fsx/lustreFileSystem:LustreFileSystem", {"storageCapacity": 3600}, "increments of 2400 GiB"),
    ("aws:ec2/launchTemplate:LaunchTemplate", {"metadataOptions": {"httpTokens": "Required"}}, "is not one of optional, required"),
    ("aws:ec2/vpc:Vpc", {"tags": {"k" * 128: "v"}}, "EC2 takes at most 127 characters"),
    ("aws:ecr/lifecyclePolicy:LifecyclePolicy", {"policy": json.dumps({"rules": []})}, "the API takes 100 to 30720"),
]


@pytest.mark.parametrize(("type_token", "inputs", "says"), REFUSED, ids=[f"{t.split(':')[2]}-{i}" for i, (t, _, _) in enumerate(REFUSED)])
def test_the_check_refuses_what_aws_refuses(type_token, inputs, says):
    problems = "\n".join(api.check([_record(type_token, inputs)]).problems)
    assert says in problems, problems


ACCEPTED = [
    # (type, inputs, reads): what a too strict check would refuse.
    (ROLE, {"name": "gpu-training.ci+deploy=prod@x,1"}, None),
    ("aws:efs/accessPoint:AccessPoint", {"tags": {"équipe": "vision été"}}, None),  # \p{L} and \p{Z}: letters, spaces
    ("aws:eks/addon:Addon", {"tags": {}, "resolveConflictsOnCreate": "OVERWRITE"}, None),  # an empty map is not sent: EKS's TagMap min 1 does not apply
    ("aws:autoscaling/tag:Tag", {"tag": {"key": "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu",
                                         "value": "true:NoSchedule"}}, None),
    # a value made of another resource's output is unknown: its stand-in is not judged, the literal beside it is
    ("aws:ec2/launchTemplate:LaunchTemplate", {"networkInterfaces": [{"interfaceType": "efa-only", "securityGroups": ["fabric-id"]}]},
     {"networkInterfaces": ["urn:pulumi:dev::gpu-training::gpu-training:network:SecurityGroups$aws:ec2/securityGroup:SecurityGroup::fabric"]}),
    ("aws:efs/accessPoint:AccessPoint", {"fileSystemId": "checkpoints-efs-fs-id", "tags": {"Name": "x"}},
     {"fileSystemId": ["urn:pulumi:dev::gpu-training::t$aws:efs/fileSystem:FileSystem::checkpoints-efs-fs"]}),
]


@pytest.mark.parametrize(("type_token", "inputs", "reads"), ACCEPTED, ids=[f"{t.split(':')[2]}-{i}" for i, (t, _, _) in enumerate(ACCEPTED)])
def test_the_check_accepts_what_aws_accepts(type_token, inputs, reads):
    report = api.check([_record(type_token, inputs, reads)])
    assert report.problems == []
    assert report.checked > 0


def test_a_row_that_names_a_structure_or_gives_a_scalar_member_a_list_is_a_mapping_error():
    with pytest.raises(ValueError, match="map the members one by one"):
        list(api.shape_problems("eks", "NodegroupScalingConfig", {"minSize": 1}, api.Report()))
    with pytest.raises(ValueError, match="map the members one by one"):
        list(api.shape_problems("iam", "roleNameType", ["a", "b"], api.Report()))


def test_a_literal_beside_an_output_is_still_checked():
    reads = {"networkInterfaces": ["urn:pulumi:dev::p::t$aws:ec2/securityGroup:SecurityGroup::fabric"]}
    inputs = {"networkInterfaces": [{"interfaceType": "EFA", "securityGroups": ["fabric-id"]}]}
    problems = api.check([_record("aws:ec2/launchTemplate:LaunchTemplate", inputs, reads)]).problems
    assert len(problems) == 1 and "networkInterfaces[0].interfaceType = 'EFA': \"Valid values: interface | efa | efa-only\"" in problems[0], problems


def test_the_providers_default_tags_count_with_a_resources_own():
    provider = {"type": "pulumi:providers:aws", "name": "aws", "inputs": {"defaultTags": json.dumps({"tags": {
        f"t{i}": "v" for i in range(45)}})}}
    problems = api.check([provider, _record(ROLE, {"tags": {f"own{i}": "v" for i in range(6)}})]).problems
    assert any("51 items; the API takes 0 to 50 (iam CreateRole Tags" in p for p in problems), problems


def test_a_roles_inline_policies_count_together():
    role = "urn:pulumi:dev::p::t$aws:iam/role:Role::trainer"
    document = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                                   "Resource": "arn:aws:s3:::b/" + "x" * 4000}]})
    policies = [{"type": "aws:iam/rolePolicy:RolePolicy", "name": f"p{i}", "inputs": {"policy": document, "role": "trainer-id"},
                 "propertyDependencies": {"role": [role]}} for i in range(3)]
    two, three = api.check(policies[:2]).problems, api.check(policies).problems
    assert two == [] and len(three) == 1 and "role trainer: inline policies of" in three[0], three
