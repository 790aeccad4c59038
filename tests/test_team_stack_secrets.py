"""A team deploy role and the bootstrap's keys, with ARNs of the real form (issue 41).

The offline plan's key ARNs are stand-ins (`arn:aws:mock:...`) that no `arn:aws:kms:...` pattern of
a policy matches, so these render the team boundary with real-form ARNs and the tags the bootstrap's
provider puts on its keys (bootstrap/__main__.py: project and stack of the bootstrap):
- the team's state and its own stack's config secrets stay readable (NoOtherKeys once refused both:
  the bootstrap's keys carry another stack's tag);
- its config secrets are its own stack's only: the data key of another stack of the environment
  (the platform's, without encryption context; another team's, with its own) is refused."""

from __future__ import annotations

from typing import Any

import pytest
from iam_eval import ALLOW, evaluate_bounded
from test_bootstrap import plan_bootstrap

from bootstrap import policies
from bootstrap.config import load_bootstrap_config
from bootstrap.policies.teams import team_boundary_policy

ACCOUNT = "123456789012"
STATE_KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/11111111-1111-1111-1111-111111111111"
SECRETS_KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/22222222-2222-2222-2222-222222222222"
PLATFORM_KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/33333333-3333-3333-3333-333333333333"
BOOTSTRAP_TAGS = {"aws:ResourceTag/project": "gpu-training-bootstrap", "aws:ResourceTag/stack": "bootstrap"}
CONTEXT = "kms:EncryptionContext:stack"


@pytest.fixture(scope="module")
def vision_prod() -> dict[str, Any]:
    config = load_bootstrap_config({
        "gpu-training-bootstrap:region": "us-east-1", "gpu-training-bootstrap:costCenter": "ml",
        "gpu-training-bootstrap:stacksProject": "gpu-training",
        "gpu-training-bootstrap:github": {"repository": "example-org/gpu-training"},
        "gpu-training-bootstrap:environments": {"dev": None, "prod": None},
        "gpu-training-bootstrap:teams": {"vision": {"repository": "example-org/vision"}},
    }, project="gpu-training-bootstrap", stack="bootstrap")
    return team_boundary_policy(config, "vision", "prod", account_id=ACCOUNT,
                                bucket_arn=f"arn:aws:s3:::gpu-training-pulumi-state-{ACCOUNT}",
                                state_key_arn=STATE_KEY, secrets_key_arn=SECRETS_KEY)


def as_team(policy: dict[str, Any], action: str, key: str, context: dict[str, str]) -> str:
    # The team deploy role: the team boundary is both its inline policy and its boundary.
    return evaluate_bounded(policy, policy, action, key, {"aws:RequestedRegion": "us-east-1", **context})


def test_the_team_reads_its_state_through_s3(vision_prod):
    via_s3 = {**BOOTSTRAP_TAGS, "kms:ViaService": "s3.us-east-1.amazonaws.com"}
    assert as_team(vision_prod, "kms:Decrypt", STATE_KEY, via_s3) == ALLOW
    assert as_team(vision_prod, "kms:GenerateDataKey", STATE_KEY, via_s3) == ALLOW
    assert as_team(vision_prod, "kms:Decrypt", STATE_KEY, BOOTSTRAP_TAGS) != ALLOW  # not outside S3


def test_the_team_decrypts_its_own_stacks_data_key_only(vision_prod):
    assert as_team(vision_prod, "kms:Decrypt", SECRETS_KEY, {**BOOTSTRAP_TAGS, CONTEXT: "team-vision-prod"}) == ALLOW
    for other in ({}, {CONTEXT: "team-audio-prod"}, {CONTEXT: "team-vision-dev"}, {CONTEXT: "prod"},
                  {"kms:EncryptionContext:Stack-x": "team-vision-prod"}):
        assert as_team(vision_prod, "kms:Decrypt", SECRETS_KEY, {**BOOTSTRAP_TAGS, **other}) != ALLOW, other


def test_the_bootstrap_keys_stay_out_of_the_teams_hands(vision_prod):
    """Only using the keys' data keys, as the team's statements name it; not re-tagging them as the
    team's own (the tags CreateTeamKeys lets it put on a key), which would make them TeamKeys'."""
    own_tags = {"aws:RequestTag/team": "vision", "aws:RequestTag/stack": "team-vision-prod"}
    for action in ("kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:TagResource", "kms:UntagResource",
                   "kms:Encrypt", "kms:DisableKey", "kms:CreateGrant"):
        for key in (STATE_KEY, SECRETS_KEY):
            for request in ({}, own_tags):
                assert as_team(vision_prod, action, key,
                               {**BOOTSTRAP_TAGS, CONTEXT: "team-vision-prod", **request}) != ALLOW, (action, request)
    platform = {"aws:ResourceTag/project": "gpu-training", "aws:ResourceTag/stack": "prod"}
    assert as_team(vision_prod, "kms:Decrypt", PLATFORM_KEY, platform) != ALLOW


def test_the_bootstrap_exports_each_team_stacks_secrets_provider():
    providers = plan_bootstrap().outputs["teamSecretsProviders"]
    assert providers["team-vision-prod"] == ("awskms://alias/gpu-training-pulumi-secrets-prod?region=us-east-1"
                                             "&context_stack=team-vision-prod")
    assert set(providers) == {"team-vision-dev", "team-vision-staging", "team-vision-prod"}
    assert policies.team_secrets_provider_url("awskms://alias/k", "team-a-dev") == "awskms://alias/k?context_stack=team-a-dev"
