"""Issue #41 item 1: each registered team's deploy role (the bootstrap's `<project>-ci-team-<team>-<env>`)
reaches the platform's cluster in its namespace only, by an access entry the platform stack makes
from its registry of teams (components/workload/team_deploy_access.py)."""

import pytest
from stack_configs import PROJECT, environment_of, raw_config

from bootstrap.policies.teams import team_deploy_role_name as bootstrap_role_name
from components.workload.team_deploy_access import team_deploy_role_name

ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
ADMIN_IN_NAMESPACE = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy"


def raw_config_teams(stack):
    return raw_config(stack).get(f"{PROJECT}:teams", [])


@pytest.mark.parametrize("stack", ["prod", "prod-usw2"])
def test_each_registered_team_deploy_role_gets_admin_of_its_namespace_only(plan_of, stack):
    plan = plan_of(stack)
    environment = environment_of(stack)  # prod-usw2's teams deploy with prod's roles
    teams = raw_config_teams(stack)
    assert teams, f"{stack} registers no team: the test would prove nothing"
    associations = [a["inputs"] for a in plan.of_type(ASSOCIATION)]
    entries = {e["inputs"]["principalArn"]: e["inputs"] for e in plan.of_type(ENTRY)}
    for row in teams:
        suffix = f":role/{PROJECT}-ci-team-{row['name']}-{environment}"
        (arn,) = [a for a in entries if a.endswith(suffix)]
        # Its one group: the platform binds it in the team's namespace only (tests/test_team_tenancy.py).
        assert entries[arn]["type"] == "STANDARD" and entries[arn]["kubernetesGroups"] == [f"team-{row['name']}-deployers"]
        (grant,) = [a for a in associations if a["principalArn"] == arn]
        assert grant["policyArn"] == ADMIN_IN_NAMESPACE
        assert grant["accessScope"] == {"type": "namespace", "namespaces": [f"team-{row['name']}"]}
        assert entries[arn]["clusterName"] == grant["clusterName"] == f"{PROJECT}-{stack}"


def test_a_team_outside_the_registry_gets_no_entry(plan_of):
    plan = plan_of("prod")
    registered = {row["name"] for row in raw_config_teams("prod")}
    team_entries = [e["inputs"]["principalArn"] for e in plan.of_type(ENTRY) if ":role/gpu-training-ci-team-" in
                    e["inputs"]["principalArn"]]
    assert len(team_entries) == len(registered)
    assert not [a for a in plan.of_type(ENTRY) if "ci-team-" in a["inputs"]["principalArn"] and
                not any(a["inputs"]["principalArn"].endswith(f"-ci-team-{t}-prod") for t in registered)]


def test_the_platform_names_the_role_as_the_bootstrap_does():
    for team, environment in (("vision", "prod"), ("audio-x", "dev")):
        assert team_deploy_role_name(PROJECT, team, environment) == bootstrap_role_name(PROJECT, team, environment)
