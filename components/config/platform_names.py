"""The words the platform's own names begin with, which no team may be named after.

A team's IAM roles, policies, alarms, dashboards and budget are `<project>-<env>-<team>-*`, the team
boundary's prefix (bootstrap/policies/teams.py). The platform names its own under the same
`<project>-<env>-` (components/config/stack.py StackConfig.name_prefix): a team named `s3` would own
`<project>-prod-s3-replication`, a team `training` the platform's `training-*` alarms, a team `team`
every team's secrets reader `<project>-<env>-team-<team>-secrets`. So a team name's first word may
be none of the words below, nor a node pool's first word, nor a site of the environment (a
regional stack `<env>-<site>` names everything `<project>-<env>-<site>-*`).
tests/test_team_names.py keeps this list in step with every platform stack's plan.
"""

from __future__ import annotations

from collections.abc import Iterable

PLATFORM_NAME_WORDS = frozenset({
    "access", "alerts", "artifacts", "checkpoints", "ci", "control", "data", "datasets", "default", "efa", "efs",
    "eks", "kueue", "logs", "lustre", "monthly", "multikueue", "nat", "node", "nodes", "private", "public",
    "registry", "s3", "secrets", "socket", "team", "to", "training", "viewer", "vpc",
    # Availability zone names (nat-us-east-1a, private-eu-west-1b): the regions' first words.
    "af", "ap", "ca", "cn", "eu", "il", "me", "mx", "sa", "us",
})


def first_word(name: str) -> str:
    return name.split("-", 1)[0]


def reserved_team_word(team: str, pools: Iterable[str] = (), sites: Iterable[str] = ()) -> str | None:
    """The platform word `team`'s names would share (its first word), or None when it shares none."""
    word = first_word(team)
    taken = PLATFORM_NAME_WORDS | {first_word(pool) for pool in pools} | set(sites)
    return word if word in taken else None


def reserved_team_name_problem(team: str, pools: Iterable[str] = (), sites: Iterable[str] = ()) -> str | None:
    word = reserved_team_word(team, pools, sites)
    if word is None:
        return None
    return (f"begins with '{word}', a word the platform's own names begin with: the team's <project>-<env>-{team}-* "
            "IAM, alarm and budget names would include the platform's")
