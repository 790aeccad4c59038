"""`make plan` contract: files written, integers kept, bad config -> exit 2, no traceback."""

import json
import subprocess
import sys

from conftest import ROOT

PLAN = [sys.executable, str(ROOT / "scripts" / "plan.py")]


def run_plan(*args, tmp_path):
    return subprocess.run([*PLAN, *args, "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_plan_writes_the_contract_files(tmp_path):
    result = run_plan("--stack", "dev", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    resources = json.loads((tmp_path / "out" / "resources.json").read_text())
    assert (tmp_path / "out" / "manifests").is_dir()
    assert {"type", "name", "parent", "inputs"} <= set(resources[0])
    vpc = next(r for r in resources if r["type"] == "aws:ec2/vpc:Vpc")
    assert vpc["inputs"]["cidrBlock"] == "10.10.0.0/16"
    rule = next(r for r in resources if r["type"] == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert isinstance(rule["inputs"]["fromPort"], int), "whole numbers must be written as integers"
    assert "stack dev:" in result.stdout and "resources" in result.stdout


def test_invalid_config_exits_2_with_every_error_and_no_traceback(tmp_path):
    result = run_plan("--stack", "prod", "--set", "environment=dev",
                      "--set", 'fabric={"rendezvousPorts": [80]}', tmp_path=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert "gpu-training:environment" in result.stderr
    assert "gpu-training:fabric.rendezvousPorts[0]" in result.stderr
    assert not (tmp_path / "out" / "resources.json").exists(), "nothing may be written for an invalid stack"


def test_unknown_stack_is_a_clear_error(tmp_path):
    result = run_plan("--stack", "qa", tmp_path=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no stack file" in result.stderr
