"""Issue #41 item 5: bypasses of a team's tenancy that the pack once let through, each added to the
real team plan. The pack evaluates what an IAM document allows (gpu_training_policy/evaluator.py)
on resources outside the team's tenancy, instead of matching probe ARNs whose names (a bucket
ending in 000000000000, a team called zz-other-team) no real document names; a resource's team is
its stack's, never a provider's tag; and a team's names are its own exactly, not by prefix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import plan_records
from gpu_training_policy import POLICIES
from gpu_training_policy.evaluator import ALLOW, IMPLICIT_DENY, allows_outside, evaluate
from gpu_training_policy.offline import evaluate as run_pack
from records import aws_provider, cost_tags, find, resource, with_changes

TEAM = "team-vision-prod"
ARTIFACTS = "gpu-training-prod-artifacts-123456789012"  # the platform's artifacts bucket, as the team plan names it
ACCOUNT = "123456789012"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def document(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: Any, res: Any, **condition: Any) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": action, "Resource": res}
    return {**statement, "Condition": condition} if condition else statement


def role_policy(*statements: dict[str, Any], provider: str = "aws") -> dict[str, Any]:
    """An inline policy of the team's own trainer role (so only what it allows can be refused)."""
    trainer = find(plan_records(TEAM), "aws:iam/role:Role", "team-trainer")
    return resource(ROLE_POLICY, "bypass-policy", {"role": "team-trainer-id", "policy": document(*statements)},
                    stack=TEAM, provider=provider, depends={"role": [trainer]})


def refused(*added: dict[str, Any]) -> set[str]:
    """The policies that refuse the last added record, added to the real team plan."""
    violations = run_pack(with_changes(plan_records(TEAM), add=added), POLICIES)
    return {v.policy for v in violations if v.level == "mandatory" and v.urn == added[-1]["urn"]}


BYPASSES = {
    "another team's objects in the real artifacts bucket": role_policy(
        allow("s3:GetObject", f"arn:aws:s3:::{ARTIFACTS}/teams/nlp/*")),
    "a wildcard partition": role_policy(allow("s3:DeleteObject", f"arn:*:s3:::{ARTIFACTS}/teams/nlp/*")),
    "an upper-case service prefix": role_policy(allow("S3:PutObject", f"arn:aws:s3:::{ARTIFACTS}/teams/nlp/*")),
    "another team's secrets under a wildcard partition": role_policy(allow(
        "secretsmanager:GetSecretValue", f"arn:*:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/teams/nlp/*")),
    "a team name that extends this one (vision-x)": role_policy(allow(
        "s3:GetObject", f"arn:aws:s3:::{ARTIFACTS}/teams/vision-x/*")),
    "another environment's artifacts": role_policy(allow(
        "s3:GetObject", "arn:aws:s3:::gpu-training-staging-artifacts-123456789012/teams/vision/*")),
    "every prefix of the artifacts bucket listed": role_policy(allow(
        "s3:ListBucket", f"arn:aws:s3:::{ARTIFACTS}", StringLike={"s3:prefix": "teams/*"})),
}


@pytest.mark.parametrize("bypass", BYPASSES, ids=list(BYPASSES))
def test_the_pack_refuses_the_bypass(bypass):
    assert refused(BYPASSES[bypass]), f"let through: {bypass}"


def test_a_second_provider_tagged_as_another_team_does_not_make_its_resources_that_teams():
    """The stack's name says the team; a provider's `team` tag does not change it."""
    other = {**aws_provider(TEAM, {**cost_tags(TEAM), "team": "nlp"}), "name": "aws-nlp"}
    other["urn"] = other["urn"].removesuffix("::aws") + "::aws-nlp"
    policy = role_policy(allow("s3:GetObject", f"arn:aws:s3:::{ARTIFACTS}/teams/nlp/*"), provider="aws-nlp")
    assert refused(other, policy)


def test_a_role_named_in_a_longer_teams_namespace_is_refused():
    """`gpu-training-prod-team-vision-x-secrets` is team vision-x's reader, not a role of vision's."""
    role = resource("aws:iam/role:Role", "bypass-role", {
        "name": "gpu-training-prod-team-vision-x-secrets", "assumeRolePolicy": document({
            "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"})},
        stack=TEAM)
    assert refused(role)


@pytest.mark.parametrize("name", ["gpu-training-prod-vision-x-trainer", "gpu-training-prod-audio-trainer",
                                  "gpu-training-staging-vision-trainer"])
def test_a_role_under_another_teams_stack_prefix_is_refused(name):
    """The team stack's own prefix (`<project>-<env>-<team>-`, its trainer's) is the team's, by
    exact team and environment: not a longer team's, another team's or another environment's."""
    role = resource("aws:iam/role:Role", "bypass-role", {
        "name": name, "assumeRolePolicy": document({
            "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"})},
        stack=TEAM)
    assert refused(role)


def test_the_trainer_role_takes_the_team_stacks_own_prefix():
    trainer = find(plan_records(TEAM), "aws:iam/role:Role", "team-trainer")
    assert trainer["inputs"]["name"] == "gpu-training-prod-vision-trainer"


def test_a_secret_store_assuming_the_reader_of_a_team_whose_name_extends_this_one_is_refused():
    store = resource("kubernetes:external-secrets.io/v1:SecretStore", "bypass-store", {
        "metadata": {"name": "bypass", "namespace": "team-vision"}, "spec": {"provider": {"aws": {
            "service": "SecretsManager", "region": "us-east-1",
            "role": f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-team-vision-x-secrets"}}}},
        stack=TEAM, provider="platform-cluster")
    assert refused(store)


@pytest.mark.parametrize("condition", [
    {"StringEquals": {"aws:RequestTag/eks-cluster-name": "gpu-training-prod"}},          # no namespace at all
    {"StringLike": {"aws:RequestTag/kubernetes-namespace": "team-*"}},                    # every team's
    {"StringEquals": {"aws:RequestTag/kubernetes-namespace": ["team-vision", "team-nlp"]}},
])
def test_a_role_that_pod_identity_hands_to_another_teams_pods_is_refused(condition):
    """Trust policies too: Pod Identity tags the session with the pod's namespace; a team role must
    not be assumable with another team's."""
    role = resource("aws:iam/role:Role", "bypass-role", {"assumeRolePolicy": document({
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": condition})}, stack=TEAM)
    assert refused(role)


ALARM = {"comparisonOperator": "GreaterThanThreshold", "evaluationPeriods": 1, "metricName": "m", "namespace": "n",
         "period": 60, "statistic": "Average", "threshold": 1}


@pytest.mark.parametrize(("type_", "inputs"), [
    ("aws:cloudwatch/dashboard:Dashboard", {"dashboardName": "gpu-training-prod-training"}),          # the platform's
    ("aws:cloudwatch/dashboard:Dashboard", {"dashboardName": "gpu-training-prod-vision-x-training"}),  # vision-x's
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {**ALARM, "name": "gpu-training-prod-gpu-idle"}),       # the platform's
    ("aws:cloudwatch/metricAlarm:MetricAlarm", {**ALARM, "name": "gpu-training-prod-vision-x-team-vision-x-job-no-step"}),
], ids=["platform dashboard", "longer team's dashboard", "platform alarm", "longer team's alarm"])
def test_names_the_platform_or_another_team_owns_are_refused_exactly(type_, inputs):
    """CloudWatch replaces a dashboard or alarm of the same name: a team's are its own form exactly."""
    assert "team-stack-scope" in refused(resource(type_, "bypass-name", inputs, stack=TEAM))


def test_a_bucket_policy_is_evaluated_too():
    """A resource policy of a team stack (here on the platform's artifacts bucket, which other
    policies refuse as well) is asked the same question as an identity policy."""
    policy = resource("aws:s3/bucketPolicy:BucketPolicy", "bypass-bucket-policy", {"bucket": ARTIFACTS, "policy": document({
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/x"}, "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{ARTIFACTS}/teams/nlp/*"})}, stack=TEAM)
    assert "team-iam-scope" in refused(policy)


def test_the_team_plan_passes_with_the_real_arns_a_preview_gives():
    """Offline, the plan's key and secret ARNs are the mock engine's; a preview gives real ones
    (the platform's outputs are known): the trainer's policy with those passes too, and one key
    named by id is not another team's; every key through S3 for any bucket is."""
    real = {"arn:aws:mock:us-east-1:123456789012:key/storage-buckets-data-key":
            f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "arn:aws:mock:us-east-1:123456789012:key/team-secrets-key":
            f"arn:aws:kms:us-east-1:{ACCOUNT}:key/0987dcba-09fe-87dc-65ba-ab0987654321",
            "arn:aws:mock:us-east-1:123456789012:secret/team-secrets-wandb-api-key":
            f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/teams/vision/wandb-api-key-AbCdEf"}
    records = json.loads(json.dumps(plan_records(TEAM)))
    for record in records:
        if record["type"] == ROLE_POLICY:
            for mock, arn in real.items():
                record["inputs"]["policy"] = record["inputs"]["policy"].replace(mock, arn)
    assert not [v for v in run_pack(records, POLICIES) if v.level == "mandatory"]
    every_key = role_policy(allow("kms:Decrypt", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/*",
                                  StringEquals={"kms:ViaService": "s3.us-east-1.amazonaws.com"}))
    assert "team-iam-scope" in refused(every_key)


def test_an_existing_datasets_bucket_is_read_only_where_the_pack_is_told_so():
    """storage.datasetsBucket names a bucket of any name: the policy's sharedReadBuckets says every
    team may read it (only read it); unnamed, reading it is outside the tenancy."""
    records = json.loads(json.dumps(plan_records(TEAM)))
    for record in records:
        if record["type"] == ROLE_POLICY:
            record["inputs"]["policy"] = record["inputs"]["policy"].replace("gpu-training-prod-datasets-123456789012",
                                                                            "corp-datasets")
    def mandatory(config: dict[str, Any]) -> set[str]:
        return {v.policy for v in run_pack(records, POLICIES, config) if v.level == "mandatory"}
    assert mandatory({}) == {"team-iam-scope"}
    shared = {"team-iam-scope": {"sharedReadBuckets": ["corp-datasets"]}}
    assert mandatory(shared) == set()
    write = role_policy(allow("s3:PutObject", "arn:aws:s3:::corp-datasets/*"))
    assert {v.policy for v in run_pack(with_changes(records, add=(write,)), POLICIES, shared)
            if v.level == "mandatory" and v.urn == write["urn"]} == {"team-iam-scope"}


def test_the_team_plan_itself_passes():
    violations = run_pack(plan_records(TEAM), POLICIES)
    assert not [v for v in violations if v.level == "mandatory"]


# --- the evaluator, on cases a text match gets wrong ------------------------------------------------

@pytest.mark.parametrize(("statements", "action", "arn", "context", "outcome"), [
    ([allow("S3:PutObject", "arn:*:s3:::b/*")], "s3:putobject", "arn:aws:s3:::b/k", {}, ALLOW),
    ([allow("s3:*", "arn:aws:s3:::b/*"), {"Effect": "Deny", "NotAction": "s3:Get*", "Resource": "*"}],
     "s3:PutObject", "arn:aws:s3:::b/k", {}, "Deny"),
    ([{"Effect": "Allow", "Action": "s3:GetObject", "NotResource": "arn:aws:s3:::b/teams/vision/*"}],
     "s3:GetObject", "arn:aws:s3:::b/teams/nlp/k", {}, ALLOW),
    ([allow("s3:ListBucket", "arn:aws:s3:::b", StringLike={"s3:prefix": "teams/vision/*"})],
     "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "teams/nlp/"}, IMPLICIT_DENY),
    # A condition on a key the question does not fix may hold: an Allow counts, a Deny does not.
    ([allow("s3:GetObject", "*", StringEquals={"aws:SourceVpce": "vpce-1"})], "s3:GetObject", "arn:aws:s3:::b/k", {}, ALLOW),
    ([allow("s3:GetObject", "*"), {"Effect": "Deny", "Action": "s3:*", "Resource": "*",
                                   "Condition": {"StringEquals": {"aws:SourceVpce": "vpce-1"}}}],
     "s3:GetObject", "arn:aws:s3:::b/k", {}, ALLOW),
    # ArnEquals takes wildcards as ArnLike does: this Allow holds for every role of the account.
    ([allow("s3:GetObject", "*", ArnEquals={"aws:PrincipalArn": "arn:aws:iam::1:role/*"})],
     "s3:GetObject", "arn:aws:s3:::b/k", {"aws:PrincipalArn": "arn:aws:iam::1:role/nlp"}, ALLOW),
    # Each ARN component is matched on its own: the account's `*` does not take `1:log-group`, so
    # the resource `/a:b` is not `log-group:/a:b`, this ArnNotLike holds and the Allow grants.
    ([allow("s3:GetObject", "*", ArnNotLike={"aws:SourceArn": "arn:aws:logs:r:*:/a:b"})],
     "s3:GetObject", "arn:aws:s3:::b/k", {"aws:SourceArn": "arn:aws:logs:r:1:log-group:/a:b"}, ALLOW),
    # A pattern of fewer than six components has no documented reading: an Allow's may hold.
    ([allow("s3:GetObject", "*", ArnLike={"aws:PrincipalArn": "*"})],
     "s3:GetObject", "arn:aws:s3:::b/k", {"aws:PrincipalArn": "arn:aws:iam::1:role/nlp"}, ALLOW),
])
def test_the_evaluator(statements, action, arn, context, outcome):
    assert evaluate({"Statement": statements}, action, arn, context) == outcome


def test_allows_outside_names_the_request():
    found = allows_outside({"Statement": [allow("s3:Get*", f"arn:*:s3:::{ARTIFACTS}/*")]},
                           lambda action, arn: "teams/vision/" not in arn)
    assert found and found[0][0].lower().startswith("s3:get")


# Issue #41 item 4: a team stack makes its people's access entries (components/workload/
# team_members.py); none may reach beyond the team's namespace.
MEMBER = f"arn:aws:iam::{ACCOUNT}:role/vision-researchers"
VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def association(policy_arn: str = VIEW, **scope: Any) -> dict[str, Any]:
    return resource("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "bypass-association", {
        "clusterName": "gpu-training-prod", "principalArn": MEMBER, "policyArn": policy_arn,
        "accessScope": scope or {"type": "namespace", "namespaces": ["team-vision"]}}, stack=TEAM)


def entry(**inputs: Any) -> dict[str, Any]:
    return resource("aws:eks/accessEntry:AccessEntry", "bypass-entry", {
        "clusterName": "gpu-training-prod", "principalArn": MEMBER, "type": "STANDARD", **inputs}, stack=TEAM)


@pytest.mark.parametrize("added", [
    association(type="cluster"),
    association(type="namespace", namespaces=["team-*"]),               # EKS takes wildcards in a scope
    association(type="namespace", namespaces=["team-nlp"]),
    association(type="namespace", namespaces=["team-vision", "team-nlp"]),
    association(type="namespace", namespaces=[]),
    association("arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy"),
    association("arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"),
    entry(kubernetesGroups=["system:masters"]),
    entry(kubernetesGroups=["team-vision-members", "multikueue-manager"]),  # a group a ClusterRoleBinding names
    entry(kubernetesGroups=["team-nlp-members"]),                           # another team's people
    entry(kubernetesGroups=["team-vision-members"], userName="cluster-admin"),
    entry(type="EC2_LINUX"),
], ids=["cluster scope", "wildcard namespace", "another namespace", "two namespaces", "no namespace", "namespace admin",
        "cluster admin", "system:masters", "a cluster-bound group", "another team's group", "a chosen user name",
        "a node's entry type"])
def test_a_team_stack_grants_its_people_no_more_than_view_and_its_group_in_its_namespace(added):
    assert "team-stack-scope" in refused(added)


def test_a_team_namespace_binds_no_other_teams_people():
    binding = resource("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "bypass-binding", {
        "metadata": {"name": "bypass", "namespace": "team-vision"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-member"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-nlp-members"}]},
        stack=TEAM, provider="platform-cluster")
    assert "team-stack-scope" in refused(binding)


def test_the_team_plans_own_access_entries_pass():
    """The real plan's entries and association are in the plan the pack passes (test_the_team_plan_itself_passes)."""
    records = plan_records(TEAM)
    assert [r for r in records if r["type"] == "aws:eks/accessEntry:AccessEntry"]
    assert [r for r in records if r["type"] == "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"]
    # and the same grant, written by hand, passes too: the refusals above are about what they change
    assert not refused(association()) and not refused(entry(kubernetesGroups=["team-vision-members"]))
