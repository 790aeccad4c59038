"""No team may be named after a word the platform's own names begin with (components/config/
platform_names.py): the team boundary's `<project>-<env>-<team>-*` would include the platform's
roles, alarms and budgets (the review's team `s3` deleting `<project>-prod-s3-replication`)."""

from __future__ import annotations

import json
import re

import pytest
from iam_eval import ALLOW, evaluate_bounded
from stack_configs import PLATFORM_STACKS, PROJECT, mutate, raw_config

from bootstrap.config import load_bootstrap_config
from components.config import ConfigError, load_stack_config
from components.config.platform_names import PLATFORM_NAME_WORDS, first_word
from components.config.stack_names import REGIONAL_STACK


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_name_a_platform_plan_makes_begins_with_a_reserved_word(plan_of, stack):
    plan = plan_of(stack)
    environment = stack.split("-", 1)[0]
    # A manager's plan names its workers' stacks too: every site of the environment.
    sites = {match["site"] for other in PLATFORM_STACKS if (match := REGIONAL_STACK.fullmatch(other))
             and match["env"] == environment}
    pools = {first_word(pool["name"]) for pool in raw_config(stack)[f"{PROJECT}:nodePools"]}
    allowed = PLATFORM_NAME_WORDS | pools | sites
    words = {match[1] for match in re.finditer(rf"{PROJECT}-{environment}-([a-z0-9]+)", json.dumps(plan.resources))}
    assert words <= allowed, f"add to PLATFORM_NAME_WORDS (or name it under an existing word): {sorted(words - allowed)}"


PLATFORM_REFUSAL = "a word the platform's own names begin with"


@pytest.mark.parametrize("team", ["s3", "training", "team", "kueue-x", "us", "system", "gpu-team"])
def test_the_platform_registry_refuses_a_platform_word_or_a_pool_as_a_team(team):
    with pytest.raises(ConfigError) as refused:
        load_stack_config(mutate(raw_config("prod"), "teams", [{"name": team, "gpuQuota": {"gpu-spot": 8}}]),
                          project=PROJECT, stack="prod")
    assert any(e.startswith(f"{PROJECT}:teams[0].name: begins with '{team.split('-')[0]}', {PLATFORM_REFUSAL}")
               and f"(got '{team}')" in e for e in refused.value.errors), refused.value.errors


@pytest.mark.parametrize("team", ["s3", "training", "team", "kueue-x", "usw2"])
def test_the_bootstrap_registry_refuses_a_platform_word_or_a_site_as_a_team(team):
    raw = {"gpu-training-bootstrap:region": "us-east-1", "gpu-training-bootstrap:costCenter": "ml",
           "gpu-training-bootstrap:stacksProject": "gpu-training",
           "gpu-training-bootstrap:github": {"repository": "acme/gpu-training"},
           "gpu-training-bootstrap:environments": {"prod": {"sites": {"usw2": "us-west-2"}}},
           "gpu-training-bootstrap:teams": {team: {"repository": "acme/x"}}}
    with pytest.raises(ConfigError) as refused:
        load_bootstrap_config(raw, project="gpu-training-bootstrap", stack="bootstrap")
    assert any(f"teams.{team}: begins with" in e and PLATFORM_REFUSAL in e for e in refused.value.errors), \
        refused.value.errors
    assert not any(PLATFORM_REFUSAL in e for e in _bootstrap_errors({**raw, "gpu-training-bootstrap:teams": {
        "vision": {"repository": "acme/x"}}})), "the control: a team named vision is no platform word"


def _bootstrap_errors(raw: dict) -> list[str]:
    try:
        load_bootstrap_config(raw, project="gpu-training-bootstrap", stack="bootstrap")
    except ConfigError as error:
        return error.errors
    return []


def test_a_team_named_after_a_platform_word_would_have_reached_the_platforms_role():
    """The control: the prefix rule alone is what made team `s3` own the replication role."""
    boundary = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "iam:DeleteRolePolicy",
                                                        "Resource": "arn:aws:iam::1:role/gpu-training-prod-s3-*"}]}
    assert evaluate_bounded(boundary, boundary, "iam:DeleteRolePolicy",
                            "arn:aws:iam::1:role/gpu-training-prod-s3-replication", {}) == ALLOW
