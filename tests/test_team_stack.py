"""Team stacks: team-scoped things only, on their platform's cluster and data."""

import json
import re
import subprocess
import sys
import textwrap

import pytest
import yaml
from stack_configs import PROJECT, ROOT, bootstrap_knows, mutate, raw_config

from components.config import ConfigError, TeamStackConfig, decode_raw_config, load_stack_config
from components.config.platform_contract import CONTRACT_OUTPUT, platform_of_contract, read_contract
from components.config.stack_file import stack_config
from offline.plan import synthesize

TEAM, STACK = "vision", "team-vision-prod"
SHARED_INFRASTRUCTURE = (
    "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup",
    "aws:s3/bucket:Bucket", "aws:efs/fileSystem:FileSystem", "aws:ecr/repository:Repository",
    "kubernetes:helm.sh/v3:Release", "aws:eks/addon:Addon",
)


def manifests(plan, kind):
    """The objects of `kind` on the platform's cluster (test_worker_tenancy.py: those on its workers)."""
    return [m for m in plan.manifests_on(None) if m["kind"] == kind]


def role_policy(plan, name):
    return json.loads(next(p["inputs"]["policy"] for p in plan.of_type("aws:iam/rolePolicy:RolePolicy") if p["name"] == name))


def test_team_stack_creates_no_shared_infrastructure(plan_of):
    plan = plan_of(STACK)
    assert not [r["name"] for r in plan.resources if r["type"] in SHARED_INFRASTRUCTURE]
    assert not manifests(plan, "ResourceFlavor"), "flavors are the platform's"
    # The stack's own provider, and one per MultiKueue worker of prod (its region: the team's tenancy there).
    workers = plan_of("prod").outputs["multiKueue"]["workers"]
    assert {r["provider"] for r in plan.resources if r["type"].startswith("aws:")} == {"aws", *(f"aws-{w}" for w in workers)}
    tags = json.loads(plan.of_type("pulumi:providers:aws")[0]["inputs"]["defaultTags"])["tags"]
    assert (tags["team"], tags["environment"]) == (TEAM, "prod")


def test_team_namespace_queue_and_jobs(plan_of):
    plan = plan_of(STACK)
    # The namespace is the platform's, from its registry of teams (workload/team_tenancy.py).
    assert not manifests(plan, "Namespace")
    (namespace,) = [n for n in manifests(plan_of("prod"), "Namespace") if n["metadata"]["name"] == f"team-{TEAM}"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    # Its queue is the platform's, from its registry of teams; the team's LocalQueue points at it.
    assert not manifests(plan, "ClusterQueue")
    (local,) = [q for q in manifests(plan, "LocalQueue") if q["metadata"]["name"] == "training"]
    assert local["spec"]["clusterQueue"] == f"team-{TEAM}"
    (queue,) = [q for q in manifests(plan_of("prod"), "ClusterQueue") if q["metadata"]["name"] == f"team-{TEAM}"]
    assert queue["spec"]["cohortName"] == "prod"
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": f"team-{TEAM}"}}
    (jobset,) = manifests(plan, "JobSet")
    assert jobset["metadata"]["namespace"] == f"team-{TEAM}"
    platform = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod")
    assert not isinstance(platform, TeamStackConfig)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["sysctls"][0]["value"] == platform.fabric.nccl_port_range.sysctl_value
    (claim,) = [c for c in manifests(plan, "PersistentVolumeClaim") if c["metadata"]["name"] == "checkpoints"]
    assert claim["metadata"]["namespace"] == f"team-{TEAM}"
    # Its volume and access point are the platform's (workload/team_volumes.py): the claim names it.
    assert claim["spec"]["volumeName"] == f"checkpoints-team-{TEAM}"
    assert not manifests(plan, "PersistentVolume") and not plan.of_type("aws:efs/accessPoint:AccessPoint")
    (access_point,) = [a for a in plan_of("prod").of_type("aws:efs/accessPoint:AccessPoint")
                       if a["inputs"]["rootDirectory"]["path"] == f"/workloads/team-{TEAM}"]
    assert access_point["name"] == f"team-{TEAM}-checkpoints-ap"


def test_team_identity_reaches_only_the_teams_data(plan_of):
    plan = plan_of(STACK)
    trainer = role_policy(plan, "team-trainer-access")
    artifact_resources = [r for s in trainer["Statement"] for r in s["Resource"] if "artifacts" in r and r.endswith("*")]
    assert artifact_resources and all(f"/teams/{TEAM}/" in r for r in artifact_resources)
    trust = json.loads(next(r["inputs"]["assumeRolePolicy"] for r in plan.of_type("aws:iam/role:Role") if r["name"] == "team-trainer"))
    assert trust["Statement"][0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == f"team-{TEAM}"
    secrets = [s["inputs"]["name"] for s in plan.of_type("aws:secretsmanager/secret:Secret")]
    assert secrets and all(s.startswith(f"{PROJECT}/prod/teams/{TEAM}/") for s in secrets)
    reader = next(r["inputs"] for r in plan.of_type("aws:iam/role:Role") if r["name"] == "team-secrets-reader")
    assert reader["name"] == f"gpu-training-prod-team-{TEAM}-secrets"
    # Trusted: the deployed platform's External Secrets role, as its contract names it (and each
    # MultiKueue worker's: test_worker_tenancy.py).
    platform_role = plan_of("prod").outputs[CONTRACT_OUTPUT]["resources"]["secretsSyncRoleArn"]
    assert platform_role in json.loads(reader["assumeRolePolicy"])["Statement"][0]["Principal"]["AWS"]
    (store,) = manifests(plan, "SecretStore")
    assert store["metadata"]["namespace"] == f"team-{TEAM}" and store["spec"]["provider"]["aws"]["role"]


def contract_of(plan):
    """The platform contract a platform stack's plan exports, as a team stack reads it."""
    return read_contract(plan.outputs[CONTRACT_OUTPUT], reference=f"organization/{PROJECT}/{plan.stack}", project=PROJECT)


def load_team(raw, stack=STACK, *, platform_plan=None):
    """The team stack judged against its platform's contract (the prod plan's, by default)."""
    contract = contract_of(platform_plan or synthesize("prod"))
    platform = platform_of_contract(contract, project=PROJECT, environment=contract.config[f"{PROJECT}:environment"])
    return load_stack_config(raw, project=PROJECT, stack=stack, platform=platform)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("network", {"vpcCidr": "10.99.0.0/16"}, "gpu-training:network: belongs to the platform stack"),
        ("nodePools", [], "gpu-training:nodePools: belongs to the platform stack"),
        ("platformStack", "organization/gpu-training/dev", "gpu-training:platformStack: a prod team stack must use the prod platform"),
        ("platformStack", "organization/other-project/prod", "gpu-training:platformStack: names the project other-project"),
        ("region", "eu-west-1", "gpu-training:region: differs from the platform's region"),
        ("training.gpuQuota", {"gpu-spot": 8}, "gpu-training:training.gpuQuota: belongs to the platform stack 'prod'"),
        ("training.gpuQuotaBorrowed", ["gpu-spot"], "gpu-training:training.gpuQuotaBorrowed: belongs to the platform"),
        ("teams", [], "gpu-training:teams: belongs to the platform stack"),
    ],
)
def test_invalid_team_config(path, value, expected, plan_of):
    with pytest.raises(ConfigError) as raised:
        load_team(mutate(raw_config(STACK), path, value), platform_plan=plan_of("prod"))
    assert any(e.startswith(expected) for e in raised.value.errors), raised.value.errors


def test_team_jobs_are_judged_against_the_platforms_row_of_the_team(plan_of):
    """The quota a team's gang must fit is its row of the platform's registry, as deployed."""
    deployed = with_contract(plan_of("prod"), config_teams=[{"name": TEAM, "gpuQuota": {"gpu-spot": 8}}])
    with pytest.raises(ConfigError) as raised:
        synthesize(STACK, platform_outputs=deployed)
    assert any(e.startswith("gpu-training:training.jobs[0].nodes") and
               "raise the platform's teams[name=vision].gpuQuota.gpu-spot to at least 16" in e
               for e in raised.value.errors), raised.value.errors


def test_non_prod_team_cannot_point_at_prod():
    raw = mutate(mutate(mutate(raw_config(STACK), "environment", "dev"), "training", {}), "platformStack",
                 "organization/gpu-training/prod")
    with pytest.raises(ConfigError, match="a dev team stack must use the dev platform"):
        load_stack_config(raw, project=PROJECT, stack="team-vision-dev")


def test_alone_a_team_stack_is_judged_on_what_needs_no_platform():
    config = load_stack_config(raw_config(STACK), project=PROJECT, stack=STACK)
    assert isinstance(config, TeamStackConfig) and config.platform is None and config.training.jobs
    jobs = [{**job, "nodes": 0} for job in raw_config(STACK)[f"{PROJECT}:training"]["jobs"]]
    with pytest.raises(ConfigError, match=re.escape("gpu-training:training.jobs[0].nodes")):
        load_stack_config(mutate(raw_config(STACK), "training.jobs", jobs), project=PROJECT, stack=STACK)


def with_contract(plan, **changes):
    """The outputs of a platform plan with its contract changed: `version=`, or `config_<key>=` a config value."""
    outputs = json.loads(json.dumps(plan.outputs))
    contract = outputs[CONTRACT_OUTPUT]
    for name, value in changes.items():
        if name == "version":
            contract["version"] = value
        else:
            contract["config"][f"{PROJECT}:{name.removeprefix('config_')}"] = json.dumps(value)
    return outputs


def test_team_jobs_are_judged_against_the_deployed_platform_not_the_stack_file(plan_of):
    """The stack file in this checkout has the gpu-spot pool; the deployed platform (its contract) does not."""
    config = plan_of("prod").outputs[CONTRACT_OUTPUT]["config"]
    pools = [p for p in json.loads(config[f"{PROJECT}:nodePools"]) if p["name"] != "gpu-spot"]
    training = json.loads(config[f"{PROJECT}:training"])
    del training["gpuQuota"]["gpu-spot"]
    deployed = with_contract(plan_of("prod"), config_nodePools=pools, config_training=training,
                             config_teams=[{"name": TEAM, "gpuQuota": {}}])
    with pytest.raises(ConfigError) as raised:
        synthesize(STACK, platform_outputs=deployed)
    assert any(e.startswith("gpu-training:training.jobs[0].pool") or e.startswith("gpu-training:training.gpuQuota.gpu-spot")
               for e in raised.value.errors), raised.value.errors


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (None, "SSM parameter /gpu-training/prod/platform-contract: does not exist in us-east-1 (the platform was "
               "deployed before it published its contract there, or not at all). Fix: deploy the platform stack from "
               "this commit first (pulumi up --stack prod)"),
        (0, "output platformContract: version 0, this program reads version 1. Fix: deploy the platform stack"),
        (2, "output platformContract: version 2, this program reads version 1: the platform was deployed from a newer "
            "commit. Fix: update this checkout"),
    ],
)
def test_a_contract_of_another_version_is_refused_before_any_resource(version, says, plan_of):
    outputs = with_contract(plan_of("prod"), version=version)
    if version is None:
        del outputs[CONTRACT_OUTPUT]
    with pytest.raises(ConfigError) as raised:
        synthesize(STACK, platform_outputs=outputs)
    (error,) = raised.value.errors
    assert error.startswith("platform stack organization/gpu-training/prod: ") and says in error, error
    # The line scripts/deploy-environment defers a team preview by: the platform's up has not run yet.
    assert str(raised.value).splitlines()[0] == (
        "1 configuration error against the deployed platform stack (its platformContract); nothing was created:")


def test_new_team_stack_writes_a_stack_that_plans(tmp_path, monkeypatch):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "new-team-stack"), "nlp", "staging",
                             "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "Pulumi.team-nlp-staging.yaml"
    _, raw, _ = stack_config("team-nlp-staging", path)
    # The platform's registry with the row the script printed for the operator to add.
    rows = yaml.safe_load(textwrap.dedent("\n".join(line for line in result.stdout.splitlines() if line.startswith("    "))))
    assert [row["name"] for row in rows] == ["nlp"] and "add the team's row to gpu-training:teams in stacks/Pulumi.staging.yaml" in result.stdout
    bootstrap_knows(monkeypatch, tmp_path, "nlp")
    platform = synthesize("staging", overrides={"teams": rows})
    config = load_team(decode_raw_config(raw), "team-nlp-staging", platform_plan=platform)
    assert isinstance(config, TeamStackConfig) and config.training.gpu_quota == rows[0]["gpuQuota"]
    # The platform's own trainer image, pinned by digest: the checkpoint cleanup's image (issue 45).
    assert config.training.trainer_image == config.judged_platform.training.trainer_image
    # Its team boundary, beside the platform's: the team's repository deploys it with its team role.
    assert config.iam_permissions_boundary == "arn:aws:iam::111122223333:policy/gpu-training-boundary-staging-team-nlp"
    plan = synthesize("team-nlp-staging", path, platform_outputs=platform.outputs)
    assert plan.manifests() and not [m for m in plan.manifests() if m["kind"] == "ClusterQueue"]
    again = subprocess.run([sys.executable, str(ROOT / "scripts" / "new-team-stack"), "nlp", "staging",
                            "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "exists" in again.stderr


def test_a_broken_platform_stack_file_is_named_in_a_team_stacks_offline_plan(tmp_path, monkeypatch):
    """Offline, the contract comes from the platform's plan: its problems are the platform file's, not the team's keys."""
    from offline import plan as plan_module

    real = plan_module.stack_config
    broken = tmp_path / "Pulumi.prod.yaml"
    broken.write_text((ROOT / "stacks" / "Pulumi.prod.yaml").read_text().replace("gpu-training:nodePools:",
                                                                                  "gpu-training:nodePool:"))
    monkeypatch.setattr(plan_module, "stack_config",
                        lambda stack, path=None, **kwargs: real(stack, path or (broken if stack == "prod" else None), **kwargs))
    plan_module.forget_platform_plans()
    try:
        with pytest.raises(ConfigError) as raised:
            synthesize(STACK)
    finally:
        plan_module.forget_platform_plans()
    problems = raised.value.problems
    assert problems and all(p.where.startswith("platform stack 'prod' (stacks/Pulumi.prod.yaml)") for p in problems)
    assert not any(p.is_about("gpu-training:nodePools") for p in problems)


def test_new_team_stack_gives_the_team_its_deploy_role_in_the_bootstrap(tmp_path):
    """The platform's row needs the team's deploy role (components/config/bootstrap_registry.py):
    a new team is written into the checkout's bootstrap registry too, its repository an example value."""
    import shutil

    from bootstrap.config import load_bootstrap_config
    from components.config.bootstrap_registry import bootstrap_team_registries
    from components.config.stack_file import read_stack_file

    (tmp_path / "stacks").mkdir()
    shutil.copy(ROOT / "stacks" / "Pulumi.staging.yaml", tmp_path / "stacks")
    shutil.copytree(ROOT / "bootstrap", tmp_path / "bootstrap", ignore=shutil.ignore_patterns("*.py", "__pycache__", "policies"))
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "new-team-stack"), "nlp", "staging",
                             "--out-dir", str(tmp_path / "stacks")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "0a. wrote team nlp into the bootstrap's teams" in result.stdout and "0b. wrote the team's row" in result.stdout
    (registry,) = bootstrap_team_registries(tmp_path / "stacks", project=PROJECT)[0]
    assert "staging" in registry.roles["nlp"] and "vision" in registry.roles
    config = load_bootstrap_config(read_stack_file(registry.path), project=registry.project, stack="bootstrap")
    assert "nlp" in [team.name for team in config.teams]
    # No members: its deploy role gives no access entries until the operator lists its people's roles.
    assert next(team for team in config.teams if team.name == "nlp").members == ()
    assert "nlp: {repository: example-org/nlp-training, members: []}" in registry.path.read_text()
