"""Issue #41 item 4: a team's people get access to the team's namespace only (components/workload/
team_members.py), from the team stack's `members`."""

import json

import pytest
from stack_configs import PROJECT, raw_config
from test_team_stack import STACK, load_team, manifests

from components.config import ConfigError, TeamStackConfig, load_stack_config
from components.workload.team_members import entry_name, members_group

NAMESPACE = "team-vision"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
# What the job command (`gpu-training job submit|status|logs|stop|list`, its job_command/cluster.py)
# does in the namespace: (API group, resource, verb).
READ = ("get", "list", "watch")
JOB_COMMAND_NEEDS = {("jobset.x-k8s.io", "jobsets", verb) for verb in ("create", *READ, "delete")} | {
    ("jobset.x-k8s.io", "jobsets/finalizers", "update"),       # owned objects with blockOwnerDeletion
    ("kueue.x-k8s.io", "workloads", "patch"),                 # stop: the Workload made inactive
    *(("kueue.x-k8s.io", resource, verb) for resource in ("workloads", "localqueues") for verb in READ),
    *(("", resource, verb) for resource in ("pods", "events") for verb in READ), ("", "pods/log", "get"),
    *((group, resource, verb) for group, resource in (("", "configmaps"), ("policy", "poddisruptionbudgets"))
      for verb in (*READ, "create"))}  # create only: the job context is never rewritten


def grants(rules):
    return {(group, resource, verb) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def members_of_stack_file():
    config = load_stack_config(raw_config(STACK), project=PROJECT, stack=STACK)
    assert isinstance(config, TeamStackConfig)
    return config.members


def test_each_member_gets_an_entry_in_the_namespace_group_and_view_of_the_namespace_only(plan_of):
    plan = plan_of(STACK)
    members = members_of_stack_file()
    assert members, "the example team stack lists its people"
    entries = {e["inputs"]["principalArn"]: e["inputs"] for e in plan.of_type(ENTRY)}
    assert set(entries) == set(members)
    cluster = plan_of("prod").outputs["platformContract"]["resources"]["clusterName"]
    for entry in entries.values():
        assert entry["clusterName"] == cluster
        assert entry["type"] == "STANDARD"
        assert entry["kubernetesGroups"] == [members_group(NAMESPACE)]
        assert "userName" not in entry
    associations = [a["inputs"] for a in plan.of_type(ASSOCIATION)]
    assert {a["principalArn"] for a in associations} == set(members)
    for association in associations:
        assert association["accessScope"] == {"type": "namespace", "namespaces": [NAMESPACE]}
        assert association["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def test_the_member_role_grants_the_job_command_and_nothing_cluster_wide(plan_of):
    plan = plan_of(STACK)
    (role,) = [r for r in manifests(plan, "Role") if r["metadata"]["name"] == "team-member"]
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role["rules"]) == JOB_COMMAND_NEEDS
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert not {"secrets", "pods/exec", "pods/attach", "roles", "rolebindings"} & set(rule["resources"])
    (binding,) = [b for b in manifests(plan, "RoleBinding") if b["metadata"]["name"] == "team-member"]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-member"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": members_group(NAMESPACE)}]
    # The group is bound nowhere else: no cluster-wide binding of it, in this plan or the platform's.
    for stack in (STACK, "prod"):
        for kind in ("ClusterRoleBinding", "RoleBinding"):
            for other in manifests(plan_of(stack), kind):
                if other is not binding:
                    assert members_group(NAMESPACE) not in json.dumps(other.get("subjects", [])), other


def test_no_members_no_access_entries(plan_of):
    config = load_team(raw_config(STACK) | {f"{PROJECT}:members": []}, platform_plan=plan_of("prod"))
    assert isinstance(config, TeamStackConfig) and config.members == ()


ADMIN = "arn:aws:iam::111122223333:role/ml-platform-admin"  # one of prod's cluster.adminPrincipals


@pytest.mark.parametrize(("members", "expected"), [
    (["arn:aws:iam::111122223333:user/alice"], "gpu-training:members[0]: is not an IAM role ARN"),
    (["vision-researchers"], "gpu-training:members[0]: is not an IAM role ARN"),
    (["arn:aws:sts::111122223333:assumed-role/vision/alice"], "gpu-training:members[0]: is not an IAM role ARN"),
    (["arn:aws-cn:iam::111122223333:role/vision"], "gpu-training:members[0]: is in the partition aws-cn"),
    ([ADMIN], "gpu-training:members[0]: already has the platform's access entry (cluster.adminPrincipals)"),
    (["arn:aws:iam::111122223333:role/v", "arn:aws:iam::111122223333:role/v"], "gpu-training:members: lists a role twice"),
    ("arn:aws:iam::111122223333:role/v", "gpu-training:members: must be a list"),
])
def test_bad_members_are_refused_naming_the_key(members, expected, plan_of):
    with pytest.raises(ConfigError) as raised:
        load_team(raw_config(STACK) | {f"{PROJECT}:members": members}, platform_plan=plan_of("prod"))
    assert any(e.startswith(expected) for e in raised.value.errors), raised.value.errors


def test_a_role_with_a_path_is_a_member():
    """Access entries take a role's path (EKS User Guide, "Create access entries")."""
    arn = "arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_vision_0123456789abcdef"
    config = load_stack_config(raw_config(STACK) | {f"{PROJECT}:members": [arn]}, project=PROJECT, stack=STACK)
    assert isinstance(config, TeamStackConfig) and config.members == (arn,)


def test_members_is_a_team_key_only():
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw_config("prod") | {f"{PROJECT}:members": [ADMIN]}, project=PROJECT, stack="prod")
    assert any(e.startswith("gpu-training:members") for e in raised.value.errors), raised.value.errors


@pytest.mark.parametrize(("first", "second"), [
    ("arn:aws:iam::111122223333:role/a-b", "arn:aws:iam::111122223333:role/a/b"),   # path or dash
    ("arn:aws:iam::111122223333:role/ml", "arn:aws:iam::444455556666:role/ml"),     # two accounts
])
def test_roles_that_read_alike_get_resource_names_of_their_own(first, second):
    """Pulumi refuses two resources of one name (a duplicate URN), which would end the plan with
    an engine error instead of naming members[i]."""
    assert entry_name(first) != entry_name(second)
    assert entry_name("arn:aws:iam::111122223333:role/ml/vision").startswith("role-ml-vision-")
