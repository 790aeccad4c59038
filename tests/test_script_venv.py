"""Every script the docs run works from a fresh clone without an activated venv: executable, with
a shebang, and started by a python without the project's packages it re-runs itself under
.venv/bin/python (offline/project_venv.py), or exits 2 with one line naming the make target."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from stack_configs import ROOT

SCRIPTS = ROOT / "scripts"
# A script as the docs, the workflows and the Makefile run it (scripts/_*: helpers, not commands).
MENTION = re.compile(r"\bscripts/([A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9_])")
PYTHON_SCRIPTS = ("plan.py", "cost.py", "policy_config.py", "config_docs.py", "doc_figures.py", "new-team-stack", "pin-image", "verify",
                  "gpu-training")
# Standard library only, needing no venv: main.yml's pin-image job, which holds a write token, installs nothing.
STDLIB_SCRIPTS = ("pin-image",)
BASH_SCRIPTS = ("build-image", "deploy-environment", "plan-diff", "check-branch-tip", "check-runner-tools")
# Where the docs' commands are read from.
DOCUMENTS = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile", ROOT / ".ci" / "run",
             *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / ".github" / "workflows").glob("*.yml")))


def documented_scripts() -> set[str]:
    return {name for path in DOCUMENTS for name in MENTION.findall(path.read_text())
            if (SCRIPTS / name).is_file()}


def git_modes() -> dict[str, str]:
    listing = subprocess.run(["git", "ls-files", "-s", "--", "scripts"], cwd=ROOT, capture_output=True, text=True,
                             check=False)
    if listing.returncode != 0 or not listing.stdout:
        pytest.skip("not a git checkout: the committed modes cannot be read")
    return {Path(line.split("\t")[1]).name: line.split()[0] for line in listing.stdout.splitlines()}


def test_the_docs_run_every_script_and_the_test_knows_each():
    assert documented_scripts() == set(PYTHON_SCRIPTS) | set(BASH_SCRIPTS)
    assert {p.name for p in SCRIPTS.iterdir() if p.is_file() and not p.name.startswith("_")} == \
        set(PYTHON_SCRIPTS) | set(BASH_SCRIPTS)


@pytest.mark.parametrize("name", PYTHON_SCRIPTS + BASH_SCRIPTS)
def test_a_documented_script_is_committed_executable_with_a_shebang(name):
    modes = git_modes()
    assert modes.get(name) == "100755", f"scripts/{name} is committed as {modes.get(name)}: `git update-index --chmod=+x`"
    first = (SCRIPTS / name).read_text().splitlines()[0]
    assert first == ("#!/usr/bin/env python3" if name in PYTHON_SCRIPTS else "#!/usr/bin/env bash"), first


def bare_python() -> Path:
    """A python without the project's packages: the system's, or the one the venv was made from."""
    for candidate in (Path("/usr/bin/python3"), Path(getattr(sys, "_base_executable", "") or sys.executable)):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            probe = subprocess.run([str(candidate), "-c", "import pulumi"], capture_output=True, env=bare_env())
            if probe.returncode != 0:
                return candidate
    pytest.skip("every python here has the Pulumi SDK: no bare python to start the scripts with")


def bare_env(path: str = "/usr/bin:/bin") -> dict[str, str]:
    """`env -i PATH=...`: no VIRTUAL_ENV, no PYTHONPATH."""
    return {"PATH": path}


@pytest.mark.parametrize("name", PYTHON_SCRIPTS)
def test_started_by_a_bare_python_a_script_reruns_under_the_venv(name):
    python = bare_python()
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout")
    run = subprocess.run([str(python), f"scripts/{name}", "--help"], cwd=ROOT, capture_output=True, text=True,
                         env=bare_env(), timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "usage:" in run.stdout


@pytest.mark.parametrize("name", PYTHON_SCRIPTS + BASH_SCRIPTS)
def test_run_by_its_shebang_without_a_venv_on_path_a_script_answers_help(name):
    """As docs/team-stacks.md runs them: `scripts/new-team-stack ...`, python3 the system's."""
    python = bare_python()
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout")
    run = subprocess.run([f"scripts/{name}", "--help"], cwd=ROOT, capture_output=True, text=True,
                         env=bare_env(f"{python.parent}:/usr/bin:/bin"), timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "usage" in run.stdout.lower() or name.startswith("check-"), run.stdout
    assert run.stdout.strip()


def checkout_without_venv(tmp_path: Path) -> Path:
    """The scripts and the packages they import, without .venv: a fresh clone before `make venv`."""
    root = tmp_path / "clone"
    for directory in ("scripts", "offline"):
        shutil.copytree(ROOT / directory, root / directory, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.mark.parametrize("name", STDLIB_SCRIPTS)
def test_a_standard_library_script_runs_without_any_venv(name, tmp_path):
    root = checkout_without_venv(tmp_path)
    run = subprocess.run([sys.executable, "-S", f"scripts/{name}", "--help"], cwd=root, capture_output=True,
                         text=True, env=bare_env(), timeout=60)
    assert run.returncode == 0 and "usage:" in run.stdout and run.stderr == "", run.stderr


@pytest.mark.parametrize("name", [name for name in PYTHON_SCRIPTS if name not in STDLIB_SCRIPTS])
def test_without_a_venv_a_script_exits_2_with_the_make_target(name, tmp_path):
    root = checkout_without_venv(tmp_path)
    # -S: no site-packages at all, so even a python that holds the packages lacks them here.
    run = subprocess.run([sys.executable, "-S", f"scripts/{name}", "--help"], cwd=root, capture_output=True,
                         text=True, env=bare_env(), timeout=60)
    target = ".venv/.verify" if name in ("verify", "gpu-training") else "venv"
    assert run.returncode == 2 and run.stdout == "", run.stdout
    assert run.stderr.count("\n") == 1 and f"run `make {target}` in {root}" in run.stderr, run.stderr
    assert run.stderr.startswith(f"{name}: error: no virtualenv at .venv, and this python lacks ")


def test_the_rerun_keeps_the_command_line_and_a_venv_without_the_packages_is_not_rerun_again(tmp_path):
    root = checkout_without_venv(tmp_path)
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    log = tmp_path / "argv"
    (venv_bin / "python").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\n')
    (venv_bin / "python").chmod(0o755)
    run = subprocess.run([sys.executable, "-S", "scripts/plan.py", "--stack", "a b", "--all"], cwd=root,
                         capture_output=True, text=True, env=bare_env(), timeout=60)
    assert run.returncode == 0, run.stderr
    assert log.read_text().splitlines() == ["-S", "scripts/plan.py", "--stack", "a b", "--all"]
    # The venv's own interpreter, lacking the packages (a venv made before requirements.txt
    # changed): it says so, once, instead of starting itself again.
    (venv_bin / "python").unlink()
    (venv_bin / "python").symlink_to(sys.executable)
    run = subprocess.run([sys.executable, "-S", "scripts/cost.py", "--help"], cwd=root, capture_output=True,
                         text=True, env=bare_env(), timeout=60)
    assert run.returncode == 2, run.stderr
    assert run.stderr == (f"cost.py: error: its virtualenv lacks pulumi, pulumi_aws, pulumi_kubernetes, yaml: "
                          f"run `make venv` in {root}, then run it again\n")
