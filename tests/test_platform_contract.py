"""The platform contract: what a platform stack publishes to its team stacks, and how it is read."""

import json

import pytest

from components.config import ConfigError
from components.config.platform_contract import (
    CONTRACT_RESOURCES,
    CONTRACT_VERSION,
    SECRET_NOT_PUBLISHED,
    TEAM_ACCESS_POINTS,
    PublishedAccessPoint,
    platform_of_contract,
    published_config,
    read_contract,
)

REFERENCE = "organization/gpu-training/prod"
POINT = {"id": "fsap-0123456789abcdef0", "arn": "arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-0123456789abcdef0"}
RESOURCES = {**{name: f"{name}-value" for name in CONTRACT_RESOURCES}, TEAM_ACCESS_POINTS: {"vision": POINT}}


@pytest.mark.parametrize(
    ("engine_config", "secret_keys", "published"),
    [
        ({"gpu-training:region": "us-east-1"}, set(), {"gpu-training:region": "us-east-1"}),
        # Secrets by name only, whether the map or an entry is marked secret.
        ({"gpu-training:secrets": '{"wandb-api-key": "s3cr3t"}'}, {"gpu-training:secrets"},
         {"gpu-training:secrets": json.dumps({"wandb-api-key": SECRET_NOT_PUBLISHED})}),
        ({"gpu-training:secrets": '{"a": "x", "b": "y"}'}, {"gpu-training:secrets.a"},
         {"gpu-training:secrets": json.dumps({"a": SECRET_NOT_PUBLISHED, "b": SECRET_NOT_PUBLISHED})}),
        # Any other key with a secret inside is left out whole.
        ({"gpu-training:observability": '{"alertSms": ["+1"]}', "gpu-training:region": "us-east-1"},
         {"gpu-training:observability.alertSms[0]"}, {"gpu-training:region": "us-east-1"}),
        ({"gpu-training:secrets": "not a map"}, set(), {}),
        # A project name with dots: the key is what follows the colon.
        ({"my.project:observability": '{"alertSms": ["+1"]}', "my.project:region": "us-east-1"},
         {"my.project:observability.alertSms[0]"}, {"my.project:region": "us-east-1"}),
    ],
)
def test_published_config(engine_config, secret_keys, published):
    project = next(iter(engine_config)).split(":")[0]
    assert published_config(engine_config, secret_keys, project=project) == published
    assert "s3cr3t" not in json.dumps(published_config(engine_config, secret_keys, project=project))


def test_a_contract_reads_back_as_the_engine_passed_the_config():
    contract = read_contract({"version": CONTRACT_VERSION, "resources": RESOURCES,
                              "config": {"gpu-training:region": "us-east-1", "gpu-training:fabric": '{"rendezvousPorts": [29400]}'}},
                             reference=REFERENCE, project="gpu-training")
    assert contract.config == {"gpu-training:region": "us-east-1", "gpu-training:fabric": {"rendezvousPorts": [29400]}}
    assert contract.resources == {name: RESOURCES[name] for name in CONTRACT_RESOURCES}
    assert contract.team_access_points == {"vision": PublishedAccessPoint(**POINT)}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (None, "is missing"),
        ("text", "is not a platform contract. Fix: check platformStack names a gpu-training platform stack"),
        ({"version": "1"}, "is not a platform contract"),
        ({"version": True, "config": {}, "resources": RESOURCES}, "is not a platform contract"),
        ({"version": 1.5, "config": {}, "resources": RESOURCES}, "is not a platform contract"),
        ({"version": float("inf"), "config": {}, "resources": RESOURCES}, "is not a platform contract"),
        ({"version": 0.0, "config": {}, "resources": RESOURCES}, "version 0, this program reads version 1"),
        ({"version": 1.0, "resources": RESOURCES}, "output platformContract.config: is missing or not a map"),
        ({"version": 1, "config": {}, "resources": {**RESOURCES, "kubeconfig": None}},
         "output platformContract.resources.kubeconfig: is missing"),
        # A platform deployed before it made its teams' access points and volumes (team stacks wait for it).
        ({"version": 1, "config": {}, "resources": {k: v for k, v in RESOURCES.items() if k != TEAM_ACCESS_POINTS}},
         "output platformContract.resources.teamCheckpointAccessPoints: is missing or not a map of team -> {id, arn}. "
         "Fix: deploy the platform stack from this commit first"),
        ({"version": 1, "config": {}, "resources": {**RESOURCES, TEAM_ACCESS_POINTS: {"vision": {"id": POINT["id"]}}}},
         "output platformContract.resources.teamCheckpointAccessPoints: is missing or not a map"),
    ],
)
def test_a_contract_that_cannot_be_read_says_what_to_deploy(value, says):
    with pytest.raises(ConfigError) as raised:
        read_contract(value, reference=REFERENCE, project="gpu-training")
    (error,) = raised.value.errors
    assert error.startswith(f"platform stack {REFERENCE}: output platformContract") and says in error and "Fix: " in error


def test_a_deployed_platform_this_checkout_cannot_read_names_its_source_and_both_ways_out():
    """The platform was deployed from a commit with a key this checkout does not know."""
    config = {"gpu-training:environment": "prod", "gpu-training:nodePool": "[]"}
    contract = read_contract({"version": 1, "config": config, "resources": RESOURCES}, reference=REFERENCE,
                             project="gpu-training")
    with pytest.raises(ConfigError) as raised:
        platform_of_contract(contract, project="gpu-training", environment="prod")
    problems = raised.value.problems
    assert problems and all(p.where == "platform stack 'prod' (its deployed platformContract)" for p in problems)
    assert not any(p.is_about("gpu-training:nodePool") for p in problems), "about the platform, not the team's keys"
    assert all("deploy the platform stack from this commit (pulumi up --stack prod), or update this checkout" in p.fix
               for p in problems), [p.fix for p in problems]


def test_a_team_the_platform_made_no_access_point_for_is_told_to_deploy_the_platform_first():
    contract = read_contract({"version": 1, "config": {}, "resources": RESOURCES}, reference=REFERENCE, project="gpu-training")
    assert contract.access_point_of("vision", where="w", deploy="d") == PublishedAccessPoint(**POINT)
    with pytest.raises(ConfigError) as raised:
        contract.access_point_of("audio", where="platform stack prod", deploy="deploy prod first")
    (problem,) = raised.value.problems
    assert problem.key == f"output platformContract.resources.{TEAM_ACCESS_POINTS}"
    assert "team audio" in problem.rule and problem.fix == "deploy prod first" and problem.where == "platform stack prod"
