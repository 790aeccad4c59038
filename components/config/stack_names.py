"""What a stack's name says: its kind (environment, regional platform, team) and environment.

Pure names, no config: the offline plan diff reads them for every stack of two trees before
planning any (offline/affected_stacks.py), without importing the config model.
"""

from __future__ import annotations

import re

ENVIRONMENTS = ("dev", "staging", "prod")
TEAM_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# A team name becomes part of IAM role names (at most 64 characters: IAM User Guide, "IAM and AWS STS
# quotas") after the project and environment; tests/test_bootstrap_policy_sizes.py holds a team of this
# length inside every quota under the shipped project.
MAX_TEAM_NAME = 20
TEAM_STACK = re.compile(rf"team-(?P<team>{TEAM_NAME.pattern})-(?P<env>dev|staging|prod)")
REGIONAL_STACK = re.compile(r"(?P<env>dev|staging|prod)-(?P<site>[a-z][a-z0-9]{1,7})")
"""A platform stack of an environment in a further region: <env>-<site>, e.g. prod-usw2."""


def team_namespace(team: str) -> str:
    """The Kubernetes namespace of a team (its team stack's jobs, its ClusterQueue's name too)."""
    return f"team-{team}"


def team_name_prefix(project: str, team: str, environment: str) -> str:
    """The team stack's name prefix: its physical names, and the bootstrap's patterns for its roles."""
    return f"{project}-{environment}-{team}"


def stack_kind(stack: str) -> tuple[str | None, str | None]:
    """(team, environment) implied by a stack name; (None, None) for an unknown form."""
    if stack in ENVIRONMENTS:
        return None, stack
    if regional := REGIONAL_STACK.fullmatch(stack):
        return None, regional["env"]
    match = TEAM_STACK.fullmatch(stack)
    if match:
        return match["team"], match["env"]
    return None, None
