"""Each registered team's checkpoints access point and PersistentVolumes are the platform's
(components/workload/team_volumes.py), on the manager and each MultiKueue worker, equal to what the
team stack made before, so its claims bind as they did (docs/team-stacks.md, "Moving a team's
volumes to the platform"); and the platform's own roles reach no team's access point."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import ConfigError
from components.config.platform_contract import CONTRACT_OUTPUT, TEAM_ACCESS_POINTS
from components.data.file_system import TRAINER_GID, TRAINER_UID
from offline.plan import synthesize

FIXTURES = Path(__file__).parent / "fixtures" / "team_volumes_before"
"""team-vision-prod's access points and volumes as its own plan made them before the platform did
(recorded from this code's parent commit, one file per site: the manager `prod` and its workers)."""
SITES = ("prod", "prod-usw2", "prod-use2")
TEAM_STACK = "team-vision-prod"


def registered_teams(plan) -> list[str]:
    return sorted(plan.outputs[CONTRACT_OUTPUT]["resources"][TEAM_ACCESS_POINTS])


def team_access_point(plan, team: str) -> dict[str, Any]:
    (point,) = [r for r in plan.of_type("aws:efs/accessPoint:AccessPoint") if r["name"] == f"team-{team}-checkpoints-ap"]
    return point


def team_volume(plan, volume: str, team: str) -> dict[str, Any]:
    (made,) = [m for m in plan.manifests_on(None)
               if m["kind"] == "PersistentVolume" and m["metadata"]["name"] == f"{volume}-team-{team}"]
    return made


@pytest.mark.parametrize("site", SITES)
def test_every_registered_team_gets_its_directory_as_the_trainers_user(plan_of, site):
    plan = plan_of(site)
    teams = registered_teams(plan)
    assert teams, f"{site} registers no team: nothing to check"
    for team in teams:
        point = team_access_point(plan, team)["inputs"]
        assert point["fileSystemId"] == plan.outputs["checkpointFileSystemId"]
        assert point["rootDirectory"] == {"path": f"/workloads/team-{team}", "creationInfo": {
            "ownerUid": TRAINER_UID, "ownerGid": TRAINER_GID, "permissions": "0750"}}
        assert point["posixUser"] == {"uid": TRAINER_UID, "gid": TRAINER_GID}
        published = plan.outputs[CONTRACT_OUTPUT]["resources"][TEAM_ACCESS_POINTS][team]
        assert published == {"id": f"team-{team}-checkpoints-ap-id", "arn": published["arn"]}
        assert published["arn"].endswith(f"/team-{team}-checkpoints-ap")
        volume = team_volume(plan, "checkpoints", team)
        assert volume["spec"]["csi"]["volumeHandle"] == f"{point['fileSystemId']}::{published['id']}"
        assert volume["spec"]["claimRef"] == {"namespace": f"team-{team}", "name": "checkpoints"}
        datasets = team_volume(plan, "datasets", team)
        assert datasets["spec"]["csi"]["volumeAttributes"]["bucketName"] == plan.outputs["datasetsBucket"]
        assert datasets["spec"]["claimRef"] == {"namespace": f"team-{team}", "name": "datasets"}


@pytest.mark.parametrize("site", SITES)
def test_the_access_point_is_the_one_the_team_stack_made_but_its_name_tag(plan_of, site):
    before = json.loads((FIXTURES / f"{site}--accesspoint.json").read_text())["inputs"]
    made = team_access_point(plan_of(site), "vision")["inputs"]
    assert {k: v for k, v in made.items() if k != "tags"} == {k: v for k, v in before.items() if k != "tags"}
    # Tags change in place: the platform's prefix, not the team stack's.
    assert made["tags"]["workload"] == before["tags"]["workload"] == "team-vision"


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("volume", ["checkpoints", "datasets"])
def test_the_volume_is_the_one_the_team_stack_made(plan_of, site, volume):
    """Field for field, but the access point's id in the checkpoints volume's handle (the platform's
    access point, where the team stack's was: the same one, where it is moved by `pulumi state move`)."""
    before = yaml.safe_load((FIXTURES / f"{site}--persistentvolume-{volume}-team-vision.yaml").read_text())
    made = copy.deepcopy(team_volume(plan_of(site), volume, "vision"))  # the plan is shared by the session's tests
    if volume == "checkpoints":
        file_system, _, point = before["spec"]["csi"].pop("volumeHandle").partition("::")
        assert point.endswith("team-checkpoints-ap-id")
        published = plan_of(site).outputs[CONTRACT_OUTPUT]["resources"][TEAM_ACCESS_POINTS]["vision"]["id"]
        assert made["spec"]["csi"].pop("volumeHandle") == f"{file_system}::{published}"
    assert made == before


def test_the_team_stack_makes_the_claims_and_no_volume_or_access_point(plan_of):
    team = plan_of(TEAM_STACK)
    assert not team.of_type("aws:efs/accessPoint:AccessPoint")
    assert not [m for m in team.manifests() if m["kind"] == "PersistentVolume"]
    claims = [m for m in team.manifests() if m["kind"] == "PersistentVolumeClaim"]
    assert len(claims) == 2 * len(SITES)
    assert {(c["metadata"]["name"], c["spec"]["volumeName"]) for c in claims} == {
        ("checkpoints", "checkpoints-team-vision"), ("datasets", "datasets-team-vision")}


@pytest.mark.parametrize("site", SITES)
def test_each_claim_of_the_team_stack_binds_its_platforms_volume(plan_of, site):
    """A claim binds a volume it names only with the same storage class, and modes the volume offers
    (Kubernetes documentation, "Persistent Volumes", Binding; Class); the volume's claimRef names it."""
    team = plan_of(TEAM_STACK)
    cluster = None if site == "prod" else site
    claims = [m for m in team.manifests_on(cluster) if m["kind"] == "PersistentVolumeClaim"]
    assert len(claims) == 2
    for claim in claims:
        volume = team_volume(plan_of(site), claim["metadata"]["name"], "vision")
        assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
        assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"]
        assert set(claim["spec"]["accessModes"]) <= set(volume["spec"]["accessModes"])
        assert volume["spec"]["claimRef"] == {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"]}


@pytest.mark.parametrize("site", SITES)
def test_the_platforms_roles_reach_no_teams_access_point(plan_of, site):
    plan = plan_of(site)
    team_arns = {p["arn"] for p in plan.outputs[CONTRACT_OUTPUT]["resources"][TEAM_ACCESS_POINTS].values()}
    (efs_csi,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"] == "workload-roles-efs-csi-access"]
    resources = [r for s in json.loads(efs_csi["inputs"]["policy"])["Statement"] for r in s["Resource"]]
    assert any(r.endswith("/checkpoints-efs-ap-training") for r in resources), resources
    assert team_arns and not team_arns & set(resources)
    for policy in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
        assert not [arn for arn in team_arns if arn in policy["inputs"]["policy"]], policy["name"]


@pytest.mark.parametrize(("published", "says"), [
    (None, "is missing or not a map of team -> {id, arn}. Fix: deploy the platform stack from this commit first"),
    ({}, "has no access point of team vision"),
])
def test_a_team_stack_waits_for_a_platform_that_makes_its_volumes(plan_of, published, says):
    """A platform deployed before it made the team's volumes: the team stack, whose claims would bind
    nothing, stops before any resource, saying to deploy the platform first."""
    outputs = copy.deepcopy(plan_of("prod").outputs)
    resources = outputs[CONTRACT_OUTPUT]["resources"]
    if published is None:
        del resources[TEAM_ACCESS_POINTS]
    else:
        resources[TEAM_ACCESS_POINTS] = published
    with pytest.raises(ConfigError) as raised:
        synthesize(TEAM_STACK, platform_outputs=outputs)
    (error,) = raised.value.errors
    assert f"platformContract.resources.{TEAM_ACCESS_POINTS}" in error and says in error, error
