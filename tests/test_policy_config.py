"""The policy pack's per-stack configuration (scripts/policy_config.py): the CIDRs a stack's
security groups may admit, handed to every credentialed preview and `pulumi up`, and wide enough
for what each stack plans."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml
from stack_configs import PLATFORM_STACKS, PROJECT, ROOT, mutate, raw_config

from components.config import load_stack_config
from offline.policy_config import ALLOWED_CIDRS, CIDR_POLICY, load_config, main, policy_config

EXPECTED = {
    "dev": ["10.10.0.0/16"],                          # no collectors: the VPC's endpoints only
    "staging": ["10.20.0.0/16", "10.100.0.0/24"],
    "prod": ["10.30.0.0/16", "10.100.0.0/24"],
    "team-vision-prod": ["10.30.0.0/16", "10.100.0.0/24"],   # its platform stack's network
}


@pytest.mark.parametrize(("stack", "cidrs"), EXPECTED.items())
def test_the_allowed_cidrs_are_the_vpc_and_the_monitoring_collectors(stack, cidrs):
    assert policy_config(load_config(stack)) == {CIDR_POLICY: {ALLOWED_CIDRS: cidrs}}


def test_a_team_whose_platform_reads_an_existing_datasets_bucket_may_read_it(monkeypatch):
    """team-iam-scope's sharedReadBuckets: the platform's storage.datasetsBucket, for its teams only."""
    import dataclasses

    team = load_config("team-vision-prod")
    platform = team.judged_platform
    existing = dataclasses.replace(platform, storage=dataclasses.replace(platform.storage, datasets_bucket="corp-datasets"))
    monkeypatch.setattr(type(team), "judged_platform", property(lambda _: existing))
    assert policy_config(team)["team-iam-scope"] == {"sharedReadBuckets": ["corp-datasets"]}
    assert "team-iam-scope" not in policy_config(load_config("prod"))


def test_a_new_collector_in_the_stack_config_is_allowed_and_nothing_else():
    raw = mutate(raw_config("prod"), "network.monitoringIngress.cidrs", ["10.100.0.0/24", "192.168.7.0/24"])
    config = load_stack_config(raw, project=PROJECT, stack="prod")
    assert policy_config(config)[CIDR_POLICY][ALLOWED_CIDRS] == ["10.30.0.0/16", "10.100.0.0/24", "192.168.7.0/24"]


def cidr_sources(resources: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(resource name, CIDR) of every CIDR-sourced ingress, in the three forms the pack reads."""
    found = []
    for record in resources:
        inputs = record["inputs"]
        if record["type"] == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
            found += [(record["name"], inputs[key]) for key in ("cidrIpv4", "cidrIpv6") if inputs.get(key)]
        elif record["type"] == "aws:ec2/securityGroupRule:SecurityGroupRule" and inputs.get("type") == "ingress":
            found += [(record["name"], cidr) for cidr in inputs.get("cidrBlocks") or []]
        elif record["type"] in ("aws:ec2/securityGroup:SecurityGroup", "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"):
            found += [(record["name"], cidr) for block in inputs.get("ingress") or [] for cidr in block.get("cidrBlocks") or []]
    return found


@pytest.mark.parametrize("stack", EXPECTED)
def test_every_cidr_a_stack_plans_is_inside_its_allowed_cidrs(plan_of, stack):
    """Or its first credentialed preview would be blocked by the pack: the generator and the
    program must agree on where CIDR ingress comes from."""
    allowed = [ipaddress.ip_network(c) for c in policy_config(load_config(stack))[CIDR_POLICY][ALLOWED_CIDRS]]
    sources = cidr_sources(plan_of(stack).resources)
    if stack in PLATFORM_STACKS:
        assert sources, f"{stack} plans no CIDR ingress: the test reads the wrong inputs"
    outside = [(name, cidr) for name, cidr in sources
               if not any(ipaddress.ip_network(cidr).subnet_of(a) for a in allowed)]  # pyright: ignore[reportArgumentType]
    assert not outside, outside


def test_the_generator_names_the_packs_policy_and_option():
    """The pack lives in its own virtualenv (no components/ there): its source names them (a policy's
    name is its check function's, hyphenated: policy/gpu_training_policy/rules.py policy_name)."""
    network = (ROOT / "policy" / "gpu_training_policy" / "network.py").read_text()
    assert f"def {CIDR_POLICY.replace('-', '_')}(" in network and f'"{ALLOWED_CIDRS}": {{' in network
    assert f'get("{ALLOWED_CIDRS}")' in network


def test_the_command_writes_the_file_and_rejects_an_unknown_stack(tmp_path, capsys):
    output = tmp_path / "prod.json"
    assert main(["prod", "--output", str(output)]) == 0
    assert json.loads(output.read_text()) == {CIDR_POLICY: {ALLOWED_CIDRS: EXPECTED["prod"]}}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "policy_config.py"), "qa"], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 2 and "no stack file" in result.stderr and "Traceback" not in result.stderr


def test_every_credentialed_preview_and_up_gets_the_stacks_policy_configuration(tmp_path):
    # team-vision-prod sets its team boundary: the environment's run skips it, and the team's
    # repository runs it alone (.github/workflows/team-stack.yml: deploy-environment --stack).
    lines = [line for command in (["--preview", "prod"], ["--stack", "team-vision-prod"]) for line in subprocess.run(
        [str(ROOT / "scripts" / "deploy-environment"), "--dry-run", *command],
        capture_output=True, text=True, check=True).stdout.splitlines()]
    for stack in ("prod", "team-vision-prod"):
        written = next(i for i, line in enumerate(lines) if f"scripts/policy_config.py {stack} --output " in line)
        config = lines[written].rsplit("--output ", 1)[1]
        assert config.endswith(f"/{stack}.json")
        assert f"--stack {stack} " in lines[written + 1] and f"--policy-pack-config {config}" in lines[written + 1]
    # A pull request's preview: base-policy runs the base branch's script on its own checkout of the
    # base branch (tests/test_workflows.py), and the preview hands that very file to the base pack.
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "pull-request.yml").read_text())["jobs"]
    (generate,) = [s for s in jobs["base-policy"]["steps"] if "scripts/policy_config.py" in s.get("run", "")]
    steps = jobs["preview"]["steps"]
    (judge,) = [s for s in steps if s.get("id") == "config"]
    (preview,) = [s for s in steps if "pulumi preview " in s.get("run", "")]
    assert steps.index(judge) < steps.index(preview) and preview["env"]["STACK"] == judge["env"]["STACK"]
    assert preview["if"] == f"steps.{judge['id']}.outputs.judged == 'true'", "no preview without its configuration"
    (config,) = re.findall(r'--policy-pack-config "\$RUNNER_TEMP/(\S+)"', preview["run"])
    base = tmp_path / "base"  # the base branch's checkout: this tree
    shutil.copytree(ROOT / "policy", base / "policy", ignore=shutil.ignore_patterns("venv", "__pycache__"))
    for name in ("scripts", "stacks", ".venv"):
        (base / name).symlink_to(ROOT / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=base, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "base"], cwd=base, check=True)
    subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", generate["run"]], cwd=base, check=True,
                   env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(tmp_path / "base.out"),
                        "STACKS": json.dumps(["dev", "team-qa-dev"])})  # the second: new in the pull request
    (tmp_path / "runner").mkdir()
    (base / "base-policy").rename(tmp_path / "runner" / "base-policy")  # the artifact, downloaded
    assert not (tmp_path / "runner" / "base-policy" / "policy" / "venv").exists()
    for stack, judged in (("dev", "true"), ("team-qa-dev", "false")):
        outputs = tmp_path / f"{stack}.out"
        subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", judge["run"]], cwd=tmp_path, check=True,
                       env={"PATH": "/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path / "runner"),
                            "GITHUB_OUTPUT": str(outputs), "STACK": stack})
        assert outputs.read_text() == f"judged={judged}\n"
    written = json.loads((tmp_path / "runner" / config.removesuffix('"').replace("$STACK", "dev")).read_text())
    assert written == {CIDR_POLICY: {ALLOWED_CIDRS: EXPECTED["dev"]}}
