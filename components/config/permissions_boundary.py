"""The top-level `iamPermissionsBoundary` key: the managed policy every IAM role of the stack
carries as permissions boundary.

    gpu-training:iamPermissionsBoundary: arn:aws:iam::111122223333:policy/gpu-training-boundary-prod

The bootstrap creates one per environment (`pulumi stack output permissionsBoundaryArns` in
bootstrap/) and its CI deploy roles create no role without it. Optional, for accounts that run
without the bootstrap; when set, every role gets it. A team stack takes its platform stack's, or
its own team boundary, `<project>-boundary-<env>-team-<team>` in the same account (the bootstrap's
team registry: bootstrap/policies/teams.py), the only boundary its team deploy role may create roles
with; never another team's.
"""

from __future__ import annotations

import re

from components.config.reader import Section
from components.facts.regions import ARN_PARTITION

KEY = "iamPermissionsBoundary"
# A customer or AWS managed policy (IAM identifiers: path and name of [\w+=,.@-], ASCII only).
POLICY_ARN = re.compile(r"arn:" + ARN_PARTITION + r":iam::(\d{12}|aws):policy/(?:[\w+=,.@-]+/)*(?P<name>[\w+=,.@-]{1,128})",
                        re.ASCII)
# The bootstrap's names: <project>-boundary-<env> (bootstrap/policies/names.py boundary_policy_name)
# and <project>-boundary-<env>-team-<team> (team_boundary_name, which bootstrap/policies/teams.py calls).
BOOTSTRAP_NAME = re.compile(r"(?P<project>.+)-boundary-(?P<environment>dev|staging|prod)(?:-team-(?P<team>.+))?")


def team_boundary_name(project: str, environment: str, team: str) -> str:
    return f"{project}-boundary-{environment}-team-{team}"


def boundary_problem(arn: str, *, project: str, environment: str, team: str | None = None) -> str | None:
    """Why `arn` cannot be the boundary of this stack (a team stack's when `team` is given), or None."""
    match = POLICY_ARN.fullmatch(arn)
    if not match:
        return "is not the ARN of an IAM managed policy"
    names = BOOTSTRAP_NAME.fullmatch(match["name"])
    if not names or names["project"] != project:
        return None
    if names["environment"] != environment:
        return (f"is the {names['environment']} environment's boundary; the deploy role of {environment} creates roles "
                f"only with {environment}'s")
    if names["team"] and team is None:
        return (f"is team {names['team']}'s boundary; a platform stack's roles carry the environment's "
                f"({project}-boundary-{environment})")
    if names["team"] and names["team"] != team:
        return (f"is team {names['team']}'s boundary; team {team}'s deploy role creates roles only with its own "
                f"({team_boundary_name(project, environment, str(team))})")
    return None


def team_boundary_arn(platform_boundary: str, *, project: str, environment: str, team: str) -> str | None:
    """Team `team`'s boundary beside the platform's (same partition, account and path), or None
    when the platform's is not the bootstrap's environment boundary."""
    match = POLICY_ARN.fullmatch(platform_boundary)
    if not match or match["name"] != f"{project}-boundary-{environment}":
        return None
    return platform_boundary[:match.start("name")] + team_boundary_name(project, environment, team)


def parse_permissions_boundary(root: Section, *, project: str, environment: str, team: str | None = None) -> str | None:
    """None when unset (Pulumi.yaml's default is the empty string: the engine requires a default
    for a typed key a stack may leave out)."""
    if root.data.get(KEY) == "":
        root.ignore(KEY)
        return None
    own = (f"permissionsBoundaryArns.{environment}, e.g. arn:aws:iam::<account-id>:policy/{project}-boundary-{environment}"
           if team is None else
           f"team boundary, arn:aws:iam::<account-id>:policy/{team_boundary_name(project, environment, team)}")
    return root.optional_string(
        KEY, check=lambda arn: boundary_problem(arn, project=project, environment=environment, team=team),
        fix=f"use the bootstrap's {own}, or remove the key")
