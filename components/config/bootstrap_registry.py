"""The bootstrap's registry of teams, as a platform stack of this checkout sees it (issue 41).

Two registries name the teams: the bootstrap's `teams` (bootstrap/Pulumi.<stack>.yaml), which makes
each team's deploy role `<project>-ci-team-<team>-<env>` per environment, and a platform stack's
`teams` (components/config/teams.py), which makes the team's ClusterQueue and gives that role an
EKS access entry (components/workload/team_deploy_access.py). The program runs in the checkout, so
a platform stack reads the bootstrap's stack file beside its own (as sibling_stacks.py reads the
other platform stacks'), loosely: the bootstrap's own plan judges its entries.

Which disagreement is an error:
- a platform row for a team the bootstrap gives no role in the environment: the access entry
  would name a role that does not exist, which EKS refuses at `pulumi up` ("The specified
  principalArn is invalid: invalid principal", as terraform-aws-modules/terraform-aws-eks#2969
  reports it), after the stack's other resources were made. An error, before any resource.
- a team stack's `members` role the bootstrap does not list under the team (`teams.<team>.members`):
  the team deploy role may give access entries to those roles only (the team boundary's
  TeamMembersEntries, bootstrap/policies/teams.py), so IAM would refuse that entry at `pulumi up`,
  after the stack's other resources. An error, before any resource (`refuse_members_not_in_bootstrap`).
- a bootstrap role without a platform row: not an error. The onboarding order makes the role
  first (the platform's access entry needs it), then the row; a role no team stack deploys with
  yet grants nothing in the cluster. tests/test_team_registries.py holds this checkout's files to
  it: every team stack file's team has both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.config.reader import ConfigError, ConfigProblem, shown
from components.config.sibling_stacks import STACKS_DIR
from components.config.stack_file import read_stack_file, shown_path
from components.config.teams import TEAMS_KEY, TeamQueueConfig

BOOTSTRAP_DIR_NAME = "bootstrap"
"""The bootstrap program's directory, beside stacks/ (docs/delivery.md, "First-time setup")."""


@dataclass(frozen=True)
class BootstrapTeams:
    """One bootstrap stack file's registry: which environments each team has a deploy role in."""

    file: str
    """The file as messages name it (bootstrap/Pulumi.bootstrap.yaml)."""
    roles: Mapping[str, frozenset[str]]
    path: Path
    project: str
    """The bootstrap program's project (its config keys' prefix)."""
    members: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """team -> the roles its deploy role may give access entries (`teams.<team>.members`)."""


def bootstrap_dir_of(stacks_dir: Path) -> Path:
    return stacks_dir.parent / BOOTSTRAP_DIR_NAME


def _bootstrap_project(bootstrap_dir: Path) -> str | None:
    try:
        document = yaml.safe_load((bootstrap_dir / "Pulumi.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    name = document.get("name") if isinstance(document, Mapping) else None
    return name if isinstance(name, str) else None


def _members(config: Mapping[str, Any], prefix: str) -> dict[str, frozenset[str]]:
    """team -> its `members` as written (strings only: the bootstrap's own plan judges the rest)."""
    teams = config.get(f"{prefix}teams") or {}
    return {team: frozenset(m for m in (entry.get("members") or []) if isinstance(m, str))
            for team, entry in teams.items() if isinstance(entry, Mapping) and isinstance(entry.get("members") or [], list)}


def _roles(config: Mapping[str, Any], prefix: str) -> dict[str, frozenset[str]] | None:
    """team -> environments, as the bootstrap reads them (bootstrap/config.py _parse_teams: by
    default every configured environment); None where the values are not of that shape."""
    environments, teams = config.get(f"{prefix}environments"), config.get(f"{prefix}teams", {})
    if not isinstance(environments, Mapping) or not isinstance(teams or {}, Mapping):
        return None
    configured = [env for env in environments if isinstance(env, str)]
    roles: dict[str, frozenset[str]] = {}
    for team, entry in (teams or {}).items():
        listed = (entry or {}).get("environments", configured) if isinstance(entry or {}, Mapping) else None
        if not isinstance(team, str) or not isinstance(listed, list):
            return None
        roles[team] = frozenset(env for env in listed if env in configured)
    return roles


def bootstrap_team_registries(stacks_dir: Path, *, project: str) -> tuple[list[BootstrapTeams], list[str]]:
    """(the registries of the bootstrap stack files beside `stacks_dir` that deploy `project`'s
    stacks, warnings for files skipped). No bootstrap directory says nothing: the checkout keeps
    its bootstrap elsewhere."""
    bootstrap_dir = bootstrap_dir_of(stacks_dir)
    bootstrap_project = _bootstrap_project(bootstrap_dir)
    if bootstrap_project is None:
        return [], []
    prefix = f"{bootstrap_project}:"
    found, skipped = [], []
    for path in sorted(bootstrap_dir.glob("Pulumi.*.yaml")):
        try:
            config = read_stack_file(path)
        except ConfigError:
            skipped.append(f"teams not compared with {shown_path(path)}: it does not read; plan the bootstrap to see why")
            continue
        if config.get(f"{prefix}stacksProject") != project:
            continue
        roles = _roles(config, prefix)
        if roles is None:
            skipped.append(f"teams not compared with {shown_path(path)}: its environments or teams are not "
                           "mappings of names; plan the bootstrap to see why")
            continue
        found.append(BootstrapTeams(shown_path(path), roles, path, bootstrap_project, _members(config, prefix)))
    return found, skipped


def team_role_problems(teams: Sequence[TeamQueueConfig], *, project: str, environment: str,
                       stacks_dir: Path) -> tuple[list[ConfigProblem], list[str]]:
    """Each row of a platform stack's `teams` against the bootstrap's registry of the checkout:
    (a problem for each team without a deploy role in `environment`, this module's docstring; the
    warnings for bootstrap files skipped)."""
    registries, skipped = bootstrap_team_registries(stacks_dir, project=project) if teams else ([], [])
    files = " and ".join(registry.file for registry in registries)
    problems = [
        ConfigProblem(f"{project}:{TEAMS_KEY}[{index}].name",
                      f"has no deploy role in {environment}: the bootstrap's teams ({files}) give team {row.name} none, "
                      "and EKS refuses the access entry this stack makes for that role (no such principal)",
                      f"add `{row.name}: {{repository: OWNER/REPO}}` to teams in {files} (with {environment} in its "
                      "environments, if it lists them) and `pulumi up` the bootstrap before this stack, or remove "
                      "this row", shown(row.name))
        for index, row in enumerate(teams)
        if registries and not any(environment in registry.roles.get(row.name, ()) for registry in registries)]
    return problems, skipped


CHECKOUT_STACKS_DIR = STACKS_DIR
"""The stacks directory whose bootstrap/ a platform stack's program reads (read at each call)."""


def refuse_teams_without_roles(teams: Sequence[TeamQueueConfig], *, project: str, environment: str,
                               stacks_dir: Path | None = None) -> list[str]:
    """Before any resource of a platform stack: ConfigError for its rows without a deploy role; else
    the warnings for bootstrap files skipped. (Not in load_stack_config: scripts/new-team-stack
    judges a platform with a team's row before the operator adds the team to the bootstrap.)"""
    problems, skipped = team_role_problems(teams, project=project, environment=environment,
                                           stacks_dir=stacks_dir or CHECKOUT_STACKS_DIR)
    if problems:
        raise ConfigError(problems)
    return skipped


def refuse_members_not_in_bootstrap(members: Sequence[str], *, project: str, team: str,
                                    stacks_dir: Path | None = None) -> list[str]:
    """Before any resource of a team stack: ConfigError for each of its `members` that no bootstrap
    registry of the checkout lists under the team; else the warnings for bootstrap files skipped.
    Compared as written: IAM compares the ARN so (the team boundary's ArnEquals)."""
    registries, skipped = bootstrap_team_registries(stacks_dir or CHECKOUT_STACKS_DIR, project=project) \
        if members else ([], [])
    if not registries:
        return skipped
    files = " and ".join(registry.file for registry in registries)
    listed = frozenset().union(*(registry.members.get(team, frozenset()) for registry in registries))
    problems = [
        ConfigProblem(f"{project}:members[{index}]",
                      f"is not among team {team}'s members in the bootstrap's teams ({files}): the team's deploy role "
                      "may give access entries to those roles only, so IAM would refuse this one",
                      f"add it to teams.{team}.members in {files} and `pulumi up` the bootstrap before this stack, "
                      "or remove it here", shown(arn))
        for index, arn in enumerate(members) if arn not in listed]
    if problems:
        raise ConfigError(problems)
    return skipped
