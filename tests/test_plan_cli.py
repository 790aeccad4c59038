"""`make plan` contract: files written, integers kept, bad config -> exit 2, no traceback."""

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stack_configs import ROOT

from offline.cli_errors import replace_atomically

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


def tree_digest(directory):
    """{relative path: sha256} of every file under `directory`."""
    import hashlib
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_the_same_commit_writes_the_same_bytes(tmp_path):
    digests = []
    for run in ("first", "second"):
        result = subprocess.run([*PLAN, "--stack", "prod", "--out", str(tmp_path / run)], capture_output=True, text=True,
                                timeout=300, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        digests.append(tree_digest(tmp_path / run))
    assert len(digests[0]) > 10
    assert digests[0] == digests[1]


@pytest.mark.scenario  # plans every stack twice (27 s)
def test_stacks_planned_together_equal_stacks_planned_alone(tmp_path):
    # As `make plans` does: both projects, the bootstrap's stack after the platform's.
    together = subprocess.run([*PLAN, "--all", "--project", ".", "--project", "bootstrap",
                               "--build-dir", str(tmp_path / "together")], capture_output=True,
                              text=True, timeout=600, cwd=ROOT)
    assert together.returncode == 0, together.stderr
    stacks = sorted(p.name for p in (tmp_path / "together").iterdir())
    assert {"dev", "staging", "prod", "team-vision-prod", "bootstrap"} <= set(stacks)
    # Each stack alone, in the reverse order, so a stack never follows the one it followed before.
    for stack in reversed(stacks):
        project = ["--project", "bootstrap"] if stack == "bootstrap" else []
        alone = subprocess.run([*PLAN, *project, "--stack", stack, "--out", str(tmp_path / "alone" / stack)],
                               capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert alone.returncode == 0, alone.stderr
        assert tree_digest(tmp_path / "together" / stack) == tree_digest(tmp_path / "alone" / stack), stack


def test_one_bad_stack_among_several_exits_2_and_the_others_are_still_written(tmp_path):
    result = subprocess.run([*PLAN, "--stack", "qa", "--stack", "dev", "--build-dir", str(tmp_path)], capture_output=True,
                            text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 2
    assert "no stack file" in result.stderr
    assert (tmp_path / "dev" / "resources.json").is_file()
    assert not (tmp_path / "qa").exists()


def test_a_reader_that_stops_reading_stops_no_plan(tmp_path):
    """`plan.py ... | head -1` ended in a BrokenPipeError traceback, exit 1, and the stacks after it unplanned."""
    with subprocess.Popen([*PLAN, "--stack", "team-vision-prod", "--stack", "dev", "--build-dir", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as process:
        assert process.stdout and process.stderr
        assert process.stdout.readline().startswith("stack team-vision-prod: ")
        process.stdout.close()
        err = process.stderr.read()
    assert process.returncode == 0 and "Traceback" not in err, err
    assert (tmp_path / "dev" / "resources.json").is_file()


def _write_plan_directory_repeatedly(target: str) -> None:
    for round_ in range(40):
        def write(staging: Path, round_: int = round_) -> None:
            (staging / "resources.json").write_text(f"{os.getpid()} {round_}\n")
        replace_atomically(Path(target), write, directory=True)


def test_two_plans_of_one_stack_written_at_once_both_succeed_and_leave_one_whole_plan(tmp_path):
    """`make -j plans`, or `make plan` while the parallel tests plan the same stack: each writer's
    swap of build/<stack> runs in turn, so none fails half-way and nothing is left beside it."""
    target = tmp_path / "dev"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_write_plan_directory_repeatedly, [str(target)] * 4)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dev"]
    assert [path.name for path in target.iterdir()] == ["resources.json"]
