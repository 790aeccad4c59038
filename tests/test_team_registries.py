"""The bootstrap's registry of teams (deploy roles) against the platform stacks' (queues and access
entries), issue 41: a platform row for a team without a deploy role in its environment is refused
at plan time, before any resource; this checkout's own files agree for every team stack."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from stack_configs import PLATFORM_STACKS, PROJECT, ROOT, TEAM_STACKS, environment_of, raw_config

from components.config import ConfigError, load_stack_config
from components.config.bootstrap_registry import (
    bootstrap_team_registries,
    refuse_members_not_in_bootstrap,
    refuse_teams_without_roles,
)
from components.config.stack import StackConfig
from components.config.stack_names import stack_kind
from offline.plan import synthesize

BOOTSTRAP_FILE = ROOT / "bootstrap" / "Pulumi.bootstrap.yaml"
TEAMS = "gpu-training-bootstrap:teams"
MEMBER = "arn:aws:iam::111122223333:role/vision-researchers"
VISION = {"repository": "example-org/vision-training"}


def platform_rows(stack: str) -> list[str]:
    return [row["name"] for row in raw_config(stack).get(f"{PROJECT}:teams", [])]


def checkout_with_bootstrap_teams(tmp_path: Path, teams: dict[str, Any]) -> Path:
    """A copy of stacks/ and of the bootstrap's files whose registry of teams is `teams`."""
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    (tmp_path / "bootstrap").mkdir()
    shutil.copy(ROOT / "bootstrap" / "Pulumi.yaml", tmp_path / "bootstrap" / "Pulumi.yaml")
    document = yaml.safe_load(BOOTSTRAP_FILE.read_text())
    document["config"][TEAMS] = teams
    (tmp_path / "bootstrap" / "Pulumi.bootstrap.yaml").write_text(yaml.safe_dump(document))
    return tmp_path / "stacks"


def problems(stack: str, stacks_dir: Path) -> list[Any]:
    """What a platform stack's plan refuses of its `teams` against the bootstrap beside `stacks_dir`."""
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack, sibling_stacks_dir=stacks_dir)
    assert isinstance(config, StackConfig)
    try:
        refuse_teams_without_roles(config.teams, project=PROJECT, environment=environment_of(stack),
                                   stacks_dir=stacks_dir)
    except ConfigError as error:
        return list(error.problems)
    return []


# --- this checkout ------------------------------------------------------------------------------

def test_the_checkouts_bootstrap_registry_is_read():
    registries, skipped = bootstrap_team_registries(ROOT / "stacks", project=PROJECT)
    assert not skipped and [r.file for r in registries] == ["bootstrap/Pulumi.bootstrap.yaml"]
    assert registries[0].roles == {"vision": frozenset({"dev", "staging", "prod"})}
    assert registries[0].members == {"vision": frozenset({MEMBER})}


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_every_team_stacks_members_are_its_teams_members_in_the_bootstrap(stack):
    """The team deploy role gives access entries to the bootstrap's members of the team only."""
    team, _ = stack_kind(stack)
    (registry,), _ = bootstrap_team_registries(ROOT / "stacks", project=PROJECT)
    members = raw_config(stack).get(f"{PROJECT}:members", [])
    assert team and members and set(members) <= registry.members.get(team, frozenset()), stack


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_platform_row_has_a_deploy_role_in_its_environment(stack):
    (registry,), _ = bootstrap_team_registries(ROOT / "stacks", project=PROJECT)
    for team in platform_rows(stack):
        assert environment_of(stack) in registry.roles.get(team, ()), (stack, team)


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_every_team_stack_has_a_deploy_role_and_its_environments_queue(stack):
    """A team stack deploys with its role and runs on the ClusterQueue its environment's platform makes."""
    team, environment = stack_kind(stack)
    (registry,), _ = bootstrap_team_registries(ROOT / "stacks", project=PROJECT)
    assert team and environment and environment in registry.roles.get(team, ()), stack
    assert team in platform_rows(environment), stack


# --- at plan time -------------------------------------------------------------------------------

@pytest.mark.parametrize(("teams", "why"), [
    ({}, "no team at all"),
    ({"audio": {"repository": "example-org/audio"}}, "another team only"),
    ({"vision": {"repository": "example-org/vision-training", "environments": ["dev", "staging"]}}, "not in prod"),
])
def test_a_platform_row_without_a_deploy_role_is_refused_with_key_value_and_fix(tmp_path, teams, why):
    stacks_dir = checkout_with_bootstrap_teams(tmp_path, teams)
    for stack in ("prod", "prod-usw2"):
        found = [p for p in problems(stack, stacks_dir) if p.key == f"{PROJECT}:teams[0].name"]
        assert len(found) == 1, (why, stack, found)
        assert found[0].value == repr("vision") and "has no deploy role in prod" in found[0].rule
        assert "bootstrap/Pulumi.bootstrap.yaml" in found[0].fix and "pulumi up` the bootstrap" in found[0].fix


def test_a_deploy_role_without_a_platform_row_is_no_error(tmp_path):
    """The onboarding order: the bootstrap's role first (the access entry needs it), then the row."""
    stacks_dir = checkout_with_bootstrap_teams(tmp_path, {
        "vision": {"repository": "example-org/vision-training"}, "audio": {"repository": "example-org/audio"}})
    assert problems("prod", stacks_dir) == [] and problems("dev", stacks_dir) == []


def test_an_unreadable_bootstrap_file_is_skipped_with_a_warning(tmp_path):
    stacks_dir = checkout_with_bootstrap_teams(tmp_path, {})
    (tmp_path / "bootstrap" / "Pulumi.bootstrap.yaml").write_text("config: [not, a, mapping\n")
    config = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod", sibling_stacks_dir=stacks_dir)
    assert isinstance(config, StackConfig)
    warnings = refuse_teams_without_roles(config.teams, project=PROJECT, environment="prod", stacks_dir=stacks_dir)
    assert any("teams not compared with" in w and "Pulumi.bootstrap.yaml: it does not read" in w for w in warnings)


def test_the_platform_program_refuses_before_any_resource():
    """Wired into the program (__main__.py): a row of a team the checkout's bootstrap does not know."""
    rows = [*raw_config("prod")[f"{PROJECT}:teams"], {"name": "nlp", "gpuQuota": {"gpu-spot": 0}}]
    with pytest.raises(ConfigError) as raised:
        synthesize("prod", overrides={"teams": rows})
    (problem,) = raised.value.problems
    assert problem.key == f"{PROJECT}:teams[1].name" and problem.value == repr("nlp")


def test_without_a_bootstrap_directory_nothing_is_compared(tmp_path):
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    assert problems("prod", tmp_path / "stacks") == []


# --- a team stack's members against the bootstrap's -----------------------------------------------

@pytest.mark.parametrize(("teams", "why"), [
    ({"vision": VISION}, "the team lists no members"),
    ({"vision": {**VISION, "members": ["arn:aws:iam::111122223333:role/vision-interns"]}}, "other members only"),
    ({"vision": {**VISION, "members": ["arn:aws:iam::111122223333:role/Vision-Researchers"]}},
     "the member in another case: IAM compares the ARN as written"),
    ({"vision": VISION, "nlp": {"repository": "example-org/nlp", "members": [MEMBER]}}, "another team's member"),
])
def test_a_team_member_the_bootstrap_does_not_list_is_refused_with_key_value_and_fix(tmp_path, teams, why):
    stacks_dir = checkout_with_bootstrap_teams(tmp_path, teams)
    with pytest.raises(ConfigError) as raised:
        refuse_members_not_in_bootstrap([MEMBER], project=PROJECT, team="vision", stacks_dir=stacks_dir)
    (problem,) = raised.value.problems
    assert problem.key == f"{PROJECT}:members[0]" and problem.value == repr(MEMBER), why
    assert "add it to teams.vision.members in " in problem.fix and "bootstrap/Pulumi.bootstrap.yaml" in problem.fix, why
    assert "`pulumi up` the bootstrap" in problem.fix, why


def test_a_listed_member_and_no_members_pass(tmp_path):
    stacks_dir = checkout_with_bootstrap_teams(tmp_path, {"vision": {**VISION, "members": [MEMBER]}})
    assert refuse_members_not_in_bootstrap([MEMBER], project=PROJECT, team="vision", stacks_dir=stacks_dir) == []
    stacks_dir = checkout_with_bootstrap_teams(tmp_path / "none", {"vision": VISION})
    assert refuse_members_not_in_bootstrap([], project=PROJECT, team="vision", stacks_dir=stacks_dir) == []


def test_the_team_program_refuses_an_unregistered_member_before_any_resource():
    """Wired into the program (__main__.py): a member the checkout's bootstrap does not list."""
    extra = "arn:aws:iam::111122223333:role/vision-interns"
    members = [*raw_config("team-vision-prod")[f"{PROJECT}:members"], extra]
    with pytest.raises(ConfigError) as raised:
        synthesize("team-vision-prod", overrides={"members": members})
    (problem,) = raised.value.problems
    assert problem.key == f"{PROJECT}:members[1]" and problem.value == repr(extra)
