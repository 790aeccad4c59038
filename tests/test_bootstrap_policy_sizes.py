"""IAM's size quotas, checked when the bootstrap's config is read (issue 41): a long project,
team or site list is refused with its key, value and fix before any resource, instead of IAM's
LimitExceeded halfway through the first `pulumi up`."""

from __future__ import annotations

import json

import pytest
import yaml
from stack_configs import ROOT
from test_bootstrap import plan_bootstrap

from bootstrap.config import load_bootstrap_config
from bootstrap.policies import sizes
from bootstrap.policies.sizes import MANAGED_POLICY_CHARACTERS, _environment_documents, iam_size
from components.config import ConfigError
from components.config.reader import ConfigProblem

REPO = "example-org/vision-training"
"""The team's repository: not the platform's (bootstrap/config.py refuses that)."""
# The longest project the bootstrap's names allow (its state log bucket within S3's 63 characters:
# sizes.name_length_problems), and the longest team name (components/config/stack_names.py MAX_TEAM_NAME).
LONGEST_PROJECT = "p" * 32
LONGEST_TEAM = "t" * 20


def refused(**overrides: object) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as raised:
        plan_bootstrap(**overrides)
    assert "nothing was created" in str(raised.value)
    return list(raised.value.problems)


def test_a_sites_boundary_over_the_quota_names_the_sites_value_and_fix(monkeypatch):
    """On a quota made smaller than prod's boundary, which its two sites make the longest."""
    monkeypatch.setattr(sizes, "MANAGED_POLICY_CHARACTERS", 5100)
    problems = refused()
    problem = next(p for p in problems if p.key == "gpu-training-bootstrap:environments.prod.sites")
    assert "gpu-training-boundary-prod at " in problem.rule and "5,100" in problem.rule
    assert "IAM and AWS STS quotas" in problem.rule and problem.value and "'usw2': 'us-west-2'" in problem.value
    assert "shorten stacksProject 'gpu-training'" in problem.fix


@pytest.mark.parametrize(("project", "says"), [
    ("p" * 33, "pppp-pulumi-state-logs-000000000000 (64 characters)"),
    ("GPU-training", "S3 holds bucket names of lowercase letters"),
    ("gpu_training", "S3 holds bucket names of lowercase letters"),
])
def test_a_project_name_that_s3_or_iam_would_refuse_in_a_name_is_the_key(project, says):
    (problem,) = refused(stacksProject=project, environments={"dev": {}}, teams={})
    assert problem.key == "gpu-training-bootstrap:stacksProject" and says in problem.rule, problem
    assert "at most 32 characters" in problem.fix


def test_a_team_whose_deploy_role_name_iam_would_refuse_names_the_team():
    (problem,) = refused(stacksProject=LONGEST_PROJECT, environments={"staging": {}},
                         teams={LONGEST_TEAM: {"repository": REPO}})
    assert problem.key == f"gpu-training-bootstrap:teams.{LONGEST_TEAM}" and "(69 characters)" in problem.rule, problem
    assert problem.fix.startswith("use a shorter team name")


def test_without_sites_the_longest_project_name_fits():
    """The longest project name the names allow leaves a boundary without sites or readBuckets
    inside the quota."""
    plan = plan_bootstrap(stacksProject=LONGEST_PROJECT, environments={"dev": {}}, teams={})
    assert all(size <= MANAGED_POLICY_CHARACTERS for size in boundary_sizes(plan).values())


def test_without_sites_the_project_name_is_the_key(monkeypatch):
    """The keying, on a quota made smaller than the longest project's boundary."""
    monkeypatch.setattr(sizes, "MANAGED_POLICY_CHARACTERS", 4000)
    problems = refused(stacksProject=LONGEST_PROJECT, environments={"dev": {}}, teams={})
    assert problems and all(p.key == "gpu-training-bootstrap:stacksProject" for p in problems), problems
    assert all(p.value and p.value.startswith("'ppp") and ("4,000" in p.rule or "10,240" in p.rule) for p in problems)
    assert any(p.rule.startswith("renders policy ") and "-boundary-dev at " in p.rule for p in problems), problems


def test_a_team_boundary_over_the_quota_names_the_team(monkeypatch):
    """On a quota made smaller than a team boundary (the longest names keep it inside the real one)."""
    monkeypatch.setattr(sizes, "MANAGED_POLICY_CHARACTERS", 4000)
    team = "t" * 15  # its deploy role's name within IAM's 64 characters
    problems = refused(stacksProject=LONGEST_PROJECT, environments={"dev": {}}, teams={team: {"repository": REPO}})
    problem = next(p for p in problems if p.key == f"gpu-training-bootstrap:teams.{team}")
    assert problem.rule.startswith("renders team boundary ") and " characters, over the 4,000 " in problem.rule
    assert problem.value == repr(team) and "use a shorter team name" in problem.fix


# The longest bucket names (S3 User Guide, "General purpose bucket naming rules": 3 to 63 characters).
LONGEST_BUCKETS = [letter * 63 for letter in "abcdefgh"]
# Room a boundary keeps with three read buckets of the longest names (the shipped boundaries keep
# tests/test_bootstrap.py BOUNDARY_HEADROOM).
READ_BUCKETS_MARGIN = 100


def boundary_sizes(plan) -> dict[str, int]:
    return {p["inputs"]["name"]: iam_size(json.loads(p["inputs"]["policy"]))
            for p in plan.of_type("aws:iam/policy:Policy") if "-boundary-" in p["inputs"]["name"]}


def test_every_environment_has_room_for_three_read_buckets_of_the_longest_names():
    """The size check on: three read buckets of 63 characters each in dev, staging and prod (prod,
    with two sites, has the longest boundary) fit with READ_BUCKETS_MARGIN to spare."""
    prod_sites = {"sites": {"usw2": "us-west-2", "use2": "us-east-2"}}  # as bootstrap/Pulumi.bootstrap.yaml
    plan = plan_bootstrap(environments={env: {"readBuckets": LONGEST_BUCKETS[:3], **(prod_sites if env == "prod" else {})}
                                        for env in ("dev", "staging", "prod")})
    sizes = {name: size for name, size in boundary_sizes(plan).items() if "-team-" not in name}
    assert len(sizes) == 3, sizes
    assert all(size <= MANAGED_POLICY_CHARACTERS - READ_BUCKETS_MARGIN for size in sizes.values()), sizes


def test_a_read_bucket_list_that_overflows_the_boundary_names_read_buckets():
    """Eight read buckets of 63 characters are past the 6,144 a boundary holds: refused with the key,
    before `pulumi up` of the bootstrap would fail with LimitExceeded."""
    problems = refused(environments={"dev": {"readBuckets": LONGEST_BUCKETS}})
    problem = next(p for p in problems if p.key == "gpu-training-bootstrap:environments.dev.readBuckets")
    assert "gpu-training-boundary-dev at " in problem.rule and problem.value and LONGEST_BUCKETS[0][:20] in problem.value
    assert "remove readBuckets" in problem.fix


def test_the_longest_team_name_fits_under_the_shipped_project():
    """MAX_TEAM_NAME and the shipped project leave every team boundary inside the quota."""
    plan = plan_bootstrap(teams={LONGEST_TEAM: {"repository": REPO}})
    boundaries = [p for p in plan.of_type("aws:iam/policy:Policy") if LONGEST_TEAM in p["inputs"]["name"]]
    assert boundaries and all(iam_size(json.loads(p["inputs"]["policy"])) <= MANAGED_POLICY_CHARACTERS for p in boundaries)


def test_the_check_counts_no_fewer_characters_than_the_plan_renders(plan_of):
    """Its stand-in ARNs are as long as the planned ones, so a document it passes fits as planned."""
    raw = yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())["config"]
    config = load_bootstrap_config(raw, project="gpu-training-bootstrap", stack="bootstrap")
    planned = {p["inputs"]["name"]: iam_size(json.loads(p["inputs"]["policy"]))
               for p in plan_of("bootstrap").of_type("aws:iam/policy:Policy")}
    checked = {what.removeprefix("policy "): size for env in config.environments
               for what, size, _ in _environment_documents(config, env.name) if what.startswith("policy ")}
    assert checked and set(checked) <= set(planned)
    assert all(checked[name] >= planned[name] for name in checked), {n: (checked[n], planned[n]) for n in checked}


def identity_center_role(index: int) -> str:
    """An IAM Identity Center role as IAM writes it (IAM Identity Center User Guide, "Referencing
    permission sets"): a long path and name, so each member adds the most characters."""
    return (f"arn:aws:iam::111122223333:role/aws-reserved/sso.amazonaws.com/eu-west-2/"
            f"AWSReservedSSO_VisionResearchers{index:03d}_1234567890abcdef")


def typical_member(index: int) -> str:
    """A role of one person, as a team would list it (51 characters)."""
    return f"arn:aws:iam::111122223333:role/vision-researcher-{index:02d}"


def vision_with(members: list[str]) -> dict[str, object]:
    return {"vision": {"repository": REPO, "members": members}}


def test_a_team_boundary_its_members_overflow_names_the_members():
    """The members are in the team boundary (TeamMembersEntries): past its 6,144 because of them,
    the key is `teams.<team>.members`, with what they add and what fits."""
    members = [identity_center_role(i) for i in range(8)]
    problems = refused(teams=vision_with(members))
    (problem,) = [p for p in problems if p.key.startswith("gpu-training-bootstrap:teams.vision")]
    assert problem.key == "gpu-training-bootstrap:teams.vision.members", problem
    assert "team boundary gpu-training-boundary-" in problem.rule and "6,144" in problem.rule
    assert "its 8 members add " in problem.rule and " fit" in problem.rule
    assert "list fewer roles" in problem.fix and problem.value and "Researchers007_1234567890abcdef" in problem.value


TYPICAL_MEMBERS_THAT_FIT = 9
"""With the example config (project gpu-training, team vision; staging's boundary the longest) and
100 characters to spare for a statement yet to come: nine members of one person's role each."""


def test_the_example_team_has_room_for_nine_typical_members_and_a_statement_more():
    plan = plan_bootstrap(teams=vision_with([typical_member(i) for i in range(TYPICAL_MEMBERS_THAT_FIT)]))
    sizes_ = {n: s for n, s in boundary_sizes(plan).items() if "-team-vision" in n}
    assert len(sizes_) == 3 and all(s <= MANAGED_POLICY_CHARACTERS - 100 for s in sizes_.values()), sizes_


def test_the_members_check_counts_no_fewer_characters_than_the_plan_renders():
    members = [identity_center_role(i) for i in range(3)]
    plan = plan_bootstrap(teams=vision_with(members))
    raw = yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())["config"]
    raw["gpu-training-bootstrap:teams"] = vision_with(members)
    config = load_bootstrap_config(raw, project="gpu-training-bootstrap", stack="bootstrap")
    planned = boundary_sizes(plan)
    for environment in ("dev", "staging", "prod"):
        name = f"gpu-training-boundary-{environment}-team-vision"
        checked = sizes.team_boundary_size(config, config.teams[0], environment)
        assert checked >= planned[name] > 0, (environment, checked, planned[name])
