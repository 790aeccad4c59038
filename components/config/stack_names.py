"""What a stack's name says: its kind (environment, regional platform, team) and environment.

Pure names, no config: the offline plan diff reads them for every stack of two trees before
planning any (offline/affected_stacks.py), without importing the config model.
"""

from __future__ import annotations

import re

ENVIRONMENTS = ("dev", "staging", "prod")
TEAM_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
TEAM_STACK = re.compile(rf"team-(?P<team>{TEAM_NAME.pattern})-(?P<env>dev|staging|prod)")
REGIONAL_STACK = re.compile(r"(?P<env>dev|staging|prod)-(?P<site>[a-z][a-z0-9]{1,7})")
"""A platform stack of an environment in a further region: <env>-<site>, e.g. prod-usw2."""


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
