"""Every IAM role a stack creates carries its environment's permissions boundary
(`iamPermissionsBoundary`), and the config model rejects a value that cannot be that boundary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
from stack_configs import PLATFORM_STACKS, PROJECT, ROOT, environment_of, mutate, raw_config

from bootstrap import policies
from bootstrap.policies.teams import team_boundary_policy_name
from components.common.boundary import bound_roles
from components.config import ConfigError, load_stack_config
from offline.plan import planned_config, synthesize

KEY = f"{PROJECT}:iamPermissionsBoundary"


def boundary_of(stack: str) -> str:
    environment = environment_of(stack)
    return raw_config(environment)[KEY]


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_every_role_of_every_stack_carries_the_environments_boundary(plan_of, stack):
    roles = plan_of(stack).of_type("aws:iam/role:Role")
    assert roles, stack
    platform_boundary = boundary_of(stack)
    # The bootstrap's name for this environment's boundary (bootstrap/policies/names.py).
    assert platform_boundary.endswith(f":policy/{policies.boundary_policy_name(PROJECT, environment_of(stack))}")
    # team-vision-prod names its team's, beside it: it is deployed with its team role (docs/team-stacks.md).
    boundary = team_boundary("vision") if stack == "team-vision-prod" else platform_boundary
    missing = sorted(r["name"] for r in roles if r["inputs"].get("permissionsBoundary") != boundary)
    assert not missing, f"roles of {stack} without {boundary}: {missing}"


def test_without_the_key_no_role_gets_a_boundary(tmp_path: Path):
    """For accounts that run without the bootstrap."""
    source = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text("".join(line for line in source.splitlines(keepends=True) if KEY not in line))
    roles = synthesize("dev", stack_file).of_type("aws:iam/role:Role")
    assert roles and all("permissionsBoundary" not in r["inputs"] for r in roles)


BAD = [
    ("arn:aws:iam::111122223333:role/gpu-training-boundary-dev", "is not the ARN of an IAM managed policy"),
    ("gpu-training-boundary-dev", "is not the ARN of an IAM managed policy"),
    ("arn:aws:iam::1111:policy/gpu-training-boundary-dev", "is not the ARN of an IAM managed policy"),
    ("arn:aws:iam::111122223333:policy/gpu-training-boundary-prod", "the prod environment's boundary"),
]


@pytest.mark.parametrize(("value", "says"), BAD)
def test_a_value_that_cannot_be_the_boundary_is_rejected_naming_key_and_fix(value, says):
    raw = mutate(raw_config("dev"), "iamPermissionsBoundary", value)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    lines = [line for line in str(raised.value).splitlines() if KEY in line]
    assert lines and says in lines[0] and "Fix:" in lines[0], str(raised.value)


def test_a_boundary_of_another_project_or_path_is_accepted():
    for value in ("arn:aws:iam::111122223333:policy/platform/org-boundary",
                  "arn:aws:iam::111122223333:policy/other-project-boundary-prod"):
        config = load_stack_config(mutate(raw_config("dev"), "iamPermissionsBoundary", value), project=PROJECT, stack="dev")
        assert config.iam_permissions_boundary == value


def test_a_team_stack_takes_the_platforms_boundary_and_may_not_set_another():
    """Without the key (a team stack still deployed with the environment's role); team-vision-prod
    sets its team's (test_a_team_stack_with_its_team_boundary_plans_every_role_under_it)."""
    unset = {key: value for key, value in raw_config("team-vision-prod").items() if key != KEY}
    team = planned_config("team-vision-prod", raw=unset)
    assert team.iam_permissions_boundary == boundary_of("prod")
    assert planned_config("team-vision-prod").iam_permissions_boundary == team_boundary("vision")
    other = "arn:aws:iam::111122223333:policy/platform/org-boundary"
    with pytest.raises(ConfigError, match="is neither the platform stack's boundary"):
        planned_config("team-vision-prod", raw=mutate(raw_config("team-vision-prod"), "iamPermissionsBoundary", other))


def team_boundary(team: str, environment: str = "prod") -> str:
    """The bootstrap's team boundary, in the account of the platform's boundary."""
    account = boundary_of("prod").split(":")[4]
    return f"arn:aws:iam::{account}:policy/{team_boundary_policy_name(PROJECT, team, environment)}"


def test_a_team_stack_with_its_team_boundary_plans_every_role_under_it():
    """Issue #41 item 1: the team deploy role creates roles only with the team boundary, so the
    stack it deploys must be able to name that boundary (bootstrap/policies/teams.py)."""
    raw = mutate(raw_config("team-vision-prod"), "iamPermissionsBoundary", team_boundary("vision"))
    assert planned_config("team-vision-prod", raw=raw).iam_permissions_boundary == team_boundary("vision")
    stack_file = ROOT / "stacks" / "Pulumi.team-vision-prod.yaml"
    plan = synthesize("team-vision-prod", stack_file, overrides={KEY: team_boundary("vision")})
    roles = plan.of_type("aws:iam/role:Role")
    assert roles and {r["inputs"].get("permissionsBoundary") for r in roles} == {team_boundary("vision")}


@pytest.mark.parametrize(("value", "says"), [
    (team_boundary("audio"), "is team audio's boundary; team vision's deploy role creates roles only with its own"),
    (team_boundary("vision", "dev"), "the dev environment's boundary"),
    (team_boundary("vision").replace(":111122223333:", ":999999999999:"), "nor team vision's beside it"),
])
def test_a_team_stack_refuses_another_teams_or_environments_boundary_naming_key_value_and_fix(value, says):
    raw = mutate(raw_config("team-vision-prod"), "iamPermissionsBoundary", value)
    with pytest.raises(ConfigError) as raised:
        planned_config("team-vision-prod", raw=raw)
    lines = [line for line in str(raised.value).splitlines() if KEY in line]
    assert len(lines) == 1 and value in lines[0] and says in lines[0], str(raised.value)
    assert "Fix:" in lines[0] and "remove" in lines[0], lines[0]


def test_a_platform_stack_refuses_a_team_boundary():
    raw = mutate(raw_config("prod"), "iamPermissionsBoundary", team_boundary("vision"))
    with pytest.raises(ConfigError, match="is team vision's boundary; a platform stack's roles carry the environment's"):
        load_stack_config(raw, project=PROJECT, stack="prod")


def transformation_args(type_token: str, props: dict[str, Any]) -> pulumi.ResourceTransformationArgs:
    return pulumi.ResourceTransformationArgs(resource=None, type_=type_token, name="r", props=props,  # type: ignore[arg-type]
                                             opts=pulumi.ResourceOptions())


def test_the_transformation_sets_the_boundary_on_roles_only_and_refuses_another():
    transform = bound_roles("arn:aws:iam::1:policy/b")
    result = transform(transformation_args("aws:iam/role:Role", {"assume_role_policy": "{}"}))
    assert result is not None and result.props["permissions_boundary"] == "arn:aws:iam::1:policy/b"
    assert transform(transformation_args("aws:iam/rolePolicy:RolePolicy", {"policy": "{}"})) is None
    with pytest.raises(ValueError, match="sets permissions boundary arn:aws:iam::1:policy/other"):
        transform(transformation_args("aws:iam/role:Role", {"permissions_boundary": "arn:aws:iam::1:policy/other"}))
