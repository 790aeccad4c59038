"""What the command lines say to the mistakes a new user makes first: a stack name in the wrong case,
the bootstrap without its project, a key `pulumi config set` wrote without --path, a team stack's
image, another stack's outputs handed to verify. Each exits 2 with one line naming the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stack_configs import PROJECT, ROOT, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.config.stack_file import missing_stack_fix

STACKS = ROOT / "stacks"
BOOTSTRAP = ROOT / "bootstrap"


@pytest.mark.parametrize(("stack", "stack_dir", "project_dir", "fix"), [
    ("Prod", STACKS, ROOT, "did you mean 'prod'? (stack names are case-sensitive)"),
    ("DEV", STACKS, ROOT, "did you mean 'dev'? (stack names are case-sensitive)"),
    ("prd", STACKS, ROOT, "did you mean 'prod'?"),
    ("team-vision-prd", STACKS, ROOT, "did you mean 'team-vision-prod'?"),
    ("qa", STACKS, ROOT, "use one of dev, prod, prod-use2, prod-usw2, staging, team-vision-prod, or create it "
                         "(scripts/new-team-stack writes team stacks)"),
    ("bootstrap", STACKS, ROOT, "'bootstrap' is the bootstrap project's stack: pass --project bootstrap (`make plan` and "
                                "`make cost` do for STACK=bootstrap)"),
    ("Bootstrap", BOOTSTRAP, BOOTSTRAP, "did you mean 'bootstrap'? (stack names are case-sensitive)"),
    ("prod", BOOTSTRAP, BOOTSTRAP, "'prod' is a stack of the project at the repository root: leave out --project "
                                   "bootstrap"),
    ("qa", BOOTSTRAP, BOOTSTRAP, "use one of bootstrap"),
])
def test_a_stack_without_a_file_is_told_the_name_it_meant(stack, stack_dir, project_dir, fix):
    assert missing_stack_fix(stack, stack_dir, project_dir) == fix


def run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("script", ["plan.py", "cost.py"])
def test_plan_and_cost_of_a_stack_in_the_wrong_case_suggest_the_right_one(script, tmp_path):
    result = run(sys.executable, f"scripts/{script}", "--stack", "Prod", *(["--build-dir", str(tmp_path)]
                                                                           if script == "plan.py" else []))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[1:] == [
        "  - stack 'Prod': no stack file at stacks/Pulumi.Prod.yaml. Fix: did you mean 'prod'? (stack names are "
        "case-sensitive)"]


def test_make_cost_of_the_bootstrap_costs_the_bootstrap():
    dry_run = run("make", "-n", "-o", ".venv/.bytecode", "cost", "STACK=bootstrap").stdout
    assert "scripts/cost.py --project bootstrap --stack bootstrap" in dry_run
    result = run(sys.executable, "scripts/cost.py", "--project", "bootstrap", "--stack", "bootstrap")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("bootstrap: what it costs")
    # Its 4 keys (state, and one secrets key per environment), nothing else priced; no budget of its own.
    assert "  KMS keys                                  $4.00  4 x $1.00/month" in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("Budget")]
    # Without --project the bootstrap is not a stack of the root project: said so, not a traceback.
    wrong = run(sys.executable, "scripts/cost.py", "--stack", "bootstrap")
    assert wrong.returncode == 2 and "pass --project bootstrap" in wrong.stderr and "Traceback" not in wrong.stderr


def errors_of(raw, stack: str = "dev", **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, project=PROJECT, stack=stack, **kwargs)
    return [str(problem) for problem in caught.value.problems]


def test_a_key_written_without_path_says_to_set_it_with_path():
    ciphertext = "AAABAG1vY2stY2lwaGVydGV4dA=="
    raw = {**raw_config("dev"), f"{PROJECT}:secrets.hf-token": {"secure": ciphertext},
           f"{PROJECT}:network.vpcCidr": "10.20.0.0/16"}
    errors = errors_of(raw)
    assert sorted(errors) == [
        f"{PROJECT}:network.vpcCidr: unknown key: a key's name with a path in it. Fix: did you mean `pulumi config set "
        "--path 'network.vpcCidr' <value>`? Without --path the CLI writes the dots into the key's name; remove this key "
        "(`pulumi config rm 'network.vpcCidr'`) and set it again with --path",
        f"{PROJECT}:secrets.hf-token: unknown key: a key's name with a path in it. Fix: did you mean `pulumi config set "
        "--path --secret 'secrets.hf-token' <value>`? Without --path the CLI writes the dots into the key's name; remove "
        "this key (`pulumi config rm 'secrets.hf-token'`) and set it again with --path"]
    assert not any(ciphertext in error or "10.20.0.0" in error for error in errors)


def test_a_dotted_secret_key_with_a_refused_value_gets_both_lines_and_never_its_value(tmp_path):
    """The YAML reader refuses the date (without quoting it: it is a secret's), and the key still
    gets the --path hint: the user must set it again anyway."""
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text((STACKS / "Pulumi.dev.yaml").read_text() + "  gpu-training:secrets.extra: 2024-05-06\n")
    result = subprocess.run([sys.executable, "scripts/plan.py", "--stack", "dev", "--stack-file", str(stack_file),
                             "--build-dir", str(tmp_path / "build")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "2024-05-06" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "secrets.extra" in line]
    assert len(lines) == 2, lines
    assert "a value of the secrets map (value not shown) is ambiguous" in lines[0]
    assert "did you mean `pulumi config set --path --secret 'secrets.extra' <value>`" in lines[1]


def test_the_bootstrap_says_to_set_a_dotted_key_with_path():
    from bootstrap.config import load_bootstrap_config
    from components.config import decode_raw_config
    from components.config.stack_file import stack_config

    project, config, secret_keys = stack_config("bootstrap", project_dir=BOOTSTRAP)
    config[f"{project}:state.versionRetentionDays"] = "30"
    with pytest.raises(ConfigError) as caught:
        load_bootstrap_config(decode_raw_config(config), project=project, stack="bootstrap", secret_keys=secret_keys)
    assert caught.value.errors == [
        f"{project}:state.versionRetentionDays: unknown key: a key's name with a path in it. Fix: did you mean "
        "`pulumi config set --path 'state.versionRetentionDays' <value>`? Without --path the CLI writes the dots into "
        "the key's name; remove this key (`pulumi config rm 'state.versionRetentionDays'`) and set it again with --path"]


def test_a_team_stacks_image_advice_is_its_platforms_repository():
    team = errors_of(mutate(raw_config("team-vision-prod"), "trainerImage", "trainer:latest"), stack="team-vision-prod")
    [image] = [e for e in team if e.startswith(f"{PROJECT}:trainerImage:")]
    assert "scripts/build-image <stack>" not in image
    assert "the prod platform's trainerImage (stacks/Pulumi.prod.yaml)" in image
    assert "`scripts/build-image --repository <trainerRepositoryUrl of stack prod> <this stack>`" in image
    platform = errors_of(mutate(raw_config("dev"), "trainerImage", "trainer:latest"))
    assert [e for e in platform if e.startswith(f"{PROJECT}:trainerImage:")] == [
        f"{PROJECT}:trainerImage: must be an image pinned by digest (repo@sha256:<64 hex>) (got 'trainer:latest'). "
        "Fix: run scripts/build-image <stack> and set the printed trainerImage"]


def test_build_image_for_a_team_stack_says_where_to_push():
    result = run("bash", "scripts/build-image", "--dry-run", "team-nlp-prod")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("build-image: error: team stack team-nlp-prod has no image repository: push to its "
                             "platform's with --repository \"$(pulumi stack output trainerRepositoryUrl --stack prod)\" "
                             "(the digest printed is then pinned in team-nlp-prod)\n")


@pytest.mark.parametrize(("stack", "outputs", "error"), [
    ("prod", {"environment": "dev", "clusterName": "gpu-training-dev"},
     "these are the outputs of stack dev (its `environment` output), not of prod: pass stack prod's"),
    ("prod", {"environment": "prod", "team": "vision"},
     "these are the outputs of stack team-vision-prod (its `environment` and `team` outputs), not of prod"),
    ("team-vision-prod", {"environment": "prod"}, "these are the outputs of stack prod (its `environment` output), "
                                                  "not of team-vision-prod"),
    # The stack's own outputs pass this check; what they lack comes next.
    ("prod", {"environment": "prod"}, "the outputs of stack prod lack what verify needs"),
    # Outputs of a program older than the `environment` output: nothing names their stack.
    ("prod", {}, "the outputs of stack prod lack what verify needs"),
    ("Prod", {"environment": "prod"}, "--stack Prod: no stack file stacks/Pulumi.Prod.yaml; did you mean 'prod'?"),
])
def test_verify_refuses_another_stacks_outputs(stack, outputs, error, tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    result = run(sys.executable, "scripts/verify", "--stack", stack, "--outputs", str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("verify: error: "), result.stderr
    assert error in result.stderr, result.stderr
