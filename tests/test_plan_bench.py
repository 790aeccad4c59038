"""Smoke runs of the plan benchmark's parts (what `make bench` runs at full size). They assert no
speed: speed goals are read from `make bench`."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _profile_module():
    spec = importlib.util.spec_from_file_location("plan_profile", ROOT / "bench" / "plan_profile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("filename", "label"), [
    (f"{ROOT}/components/network/vpc.py", "the program"),
    (f"{ROOT}/__main__.py", "the program"),
    (f"{ROOT}/offline/plan.py", "the plan's harness"),
    ("/x/.venv/lib/python3.11/site-packages/pulumi/runtime/rpc.py", "Pulumi SDK"),
    ("/x/.venv/lib/python3.11/site-packages/pulumi_aws/ec2/vpc.py", "provider SDKs"),
    ("/usr/lib/python3.11/asyncio/base_events.py", "asyncio"),
    ("/usr/lib/python3.11/typing.py", "typing"),
    ("/x/.venv/lib/python3.11/site-packages/google/protobuf/json_format.py", "other libraries"),
    ("/usr/lib/python3.11/pathlib.py", "the rest of the standard library"),
])
def test_profile_places_code_by_where_it_lives(filename, label):
    assert _profile_module().place(filename).startswith(label)


def test_profile_shares_add_up():
    run = subprocess.run([sys.executable, "-m", "bench.plan_profile", "--stack", "team-vision-prod"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    shares = {line.split("%", 1)[1].strip(): float(line.split("%", 1)[0])
              for line in run.stdout.splitlines()[1:]}
    assert "the program: components/, __main__.py" in shares
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)


@pytest.mark.parametrize("typed", [[], ["--typed", "pulumi_aws.ec2.SecurityGroup"]])
def test_floor_runs_with_a_list_of_imports(tmp_path, typed):
    modules = tmp_path / "modules.txt"
    modules.write_text("pulumi_aws.s3\n")
    run = subprocess.run([sys.executable, "-m", "bench.plan_floor", "3", "--imports", str(modules), *typed],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert not re.search(r"Traceback|Error", run.stderr)


@pytest.mark.parametrize("arguments", [
    ["--typed"],
    ["--typed", "nosuch.Thing"],
    ["--typed", "pulumi_aws.ec2.Nope"],
    ["--typed", "pulumi_aws.ec2.SecurityGroupArgs"],
    ["--imports", "/nonexistent/modules.txt"],
])
def test_floor_refuses_bad_arguments_without_a_traceback(arguments):
    run = subprocess.run([sys.executable, "-m", "bench.plan_floor", "3", *arguments],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 2
    assert arguments[0] in run.stderr or "No such file" in run.stderr or "module" in run.stderr
    assert "Traceback" not in run.stderr
