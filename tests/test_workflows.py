"""The CI workflows: pinned actions, least permissions, credentials never for forks, deploys in
order behind environments, roles named as the bootstrap names them; and the scripts they run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from stack_configs import ROOT

from bootstrap import policies
from bootstrap.config import EnvironmentCi, TeamCi
from bootstrap.policies import teams

WORKFLOWS = ROOT / ".github" / "workflows"
SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository"
# owner/repo, or owner/repo/path of an action inside a repository (actions/cache/restore): one pin per repository.
PINNED = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+)(?:/[\w.-]+)*@(?P<sha>[0-9a-f]{40})$")


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def all_workflows() -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.yml"))}


def triggers(document: dict[str, Any]) -> dict[str, Any]:
    return document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])


def diff_step(jobs: dict[str, Any]) -> str:
    return next(s for s in steps(jobs["plan-diff"]) if s.get("id") == "diff")["run"]


def test_the_four_workflows_exist():
    assert set(all_workflows()) == {"pull-request.yml", "main.yml", "deploy.yml", "team-stack.yml"}


def test_every_action_is_pinned_by_commit_with_its_tag_beside_it():
    pins: dict[str, set[str]] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            match = re.match(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if not match or match[1].startswith("./"):
                continue
            pinned = PINNED.match(match[1])
            assert pinned, f"{path.name}: {match[1]} is not pinned by a full commit SHA"
            assert re.match(r"^\s+#\s+v\d+\.\d+\.\d+$", match[2]), f"{path.name}: {match[1]} has no `# vX.Y.Z` comment"
            pins.setdefault(pinned["action"], set()).add(pinned["sha"] + match[2].strip())
    assert {action for action, shas in pins.items() if len(shas) > 1} == set(), "one pin per action"
    assert "pulumi/actions" in pins and "aws-actions/configure-aws-credentials" in pins


def test_least_permissions_and_no_privileged_triggers():
    for name, document in all_workflows().items():
        assert document["permissions"] == {}, f"{name}: the workflow grants nothing by default"
        assert not {"pull_request_target", "workflow_run"} & set(triggers(document)), name
        for job_name, job in document["jobs"].items():
            assert "permissions" in job, f"{name}/{job_name} must say which permissions it needs"
            for checkout in (s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@")):
                assert checkout["with"]["persist-credentials"] is False, f"{name}/{job_name} leaves the token in .git"


def test_credentials_and_write_tokens_only_for_branches_of_this_repository():
    jobs = workflow("pull-request.yml")["jobs"]
    for job_name, job in jobs.items():
        granted = job["permissions"]
        if granted.get("id-token") == "write" or granted.get("pull-requests") == "write":
            assert SAME_REPOSITORY in job["if"], f"{job_name} would act for forks"
        else:
            assert set(granted.values()) <= {"read"}, job_name
    assert triggers(workflow("pull-request.yml")) == {"pull_request": {"branches": ["main"]}}


def test_the_plan_diff_is_one_sticky_comment():
    jobs = workflow("pull-request.yml")["jobs"]
    assert "scripts/plan-diff" in diff_step(jobs)
    comment = steps(jobs["comment"])
    assert len(comment) == 1 and comment[0]["uses"].startswith("marocchino/sticky-pull-request-comment@")
    assert comment[0]["with"] == {"header": "offline-plan-diff", "message": "${{ needs.plan-diff.outputs.comment }}"}


def uploads(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """artifact name -> the upload step's inputs, of the actions/upload-artifact steps of a job."""
    return {s["with"]["name"]: s["with"] for s in steps(job) if s.get("uses", "").startswith("actions/upload-artifact@")}


def test_pull_requests_upload_each_stacks_architecture_and_the_plan_diff_as_the_readme_says():
    """The README sends reviewers to build/<stack>/architecture.md: the run carries it (and the
    diff as a file), with no permission beyond reading the repository."""
    jobs = workflow("pull-request.yml")["jobs"]
    test_steps = [s.get("run") or s.get("uses", "") for s in steps(jobs["test"])]
    architecture = uploads(jobs["test"])["architecture"]
    assert architecture["path"] == "build/*/architecture.md" and architecture["if-no-files-found"] == "error"
    upload_at = next(i for i, s in enumerate(test_steps) if s.startswith("actions/upload-artifact@"))
    assert "make plans" in test_steps[:upload_at], "the diagrams are uploaded after `make plans` wrote them"
    assert uploads(jobs["plan-diff"])["plan-diff"]["path"] == "plan-diff.md"
    assert "> plan-diff.md" in diff_step(jobs)
    for job in ("test", "plan-diff"):
        assert jobs[job]["permissions"] == {"contents": "read"}, job
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`build/<stack>/architecture.md`" in readme and "`architecture` artifact" in readme
    assert "`plan-diff` artifact" in readme


def preview_command(job: dict[str, Any]) -> str:
    return next(s["run"] for s in steps(job) if "pulumi preview " in s.get("run", ""))


def test_pull_requests_preview_dev_stacks_only_with_devs_preview_role_and_the_policy_pack():
    """A pull_request run uses the pull request's own workflow file: only dev's credentials may be
    in reach of it (the bootstrap's preview roles of staging and prod do not trust pull requests)."""
    jobs = workflow("pull-request.yml")["jobs"]
    diff_command = diff_step(jobs)
    environments = re.findall(r"--changed-stacks-environment (\S+)", diff_command)
    assert tuple(environments) == policies.PULL_REQUEST_PREVIEW_ENVIRONMENTS == ("dev",)
    job = jobs["preview"]
    assert job["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.plan-diff.outputs.dev-stacks) }}"
    assert "${{ matrix.stack }}" in job["concurrency"]["group"]
    credentials = next(s for s in steps(job) if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
    role = policies.ci_role_name("gpu-training", "preview", "dev")
    assert credentials["with"]["role-to-assume"] == f"arn:aws:iam::${{{{ vars.AWS_ACCOUNT_ID }}}}:role/{role}"
    command = " ".join(preview_command(job).replace("\\\n", " ").split())
    assert 'pulumi preview --stack "$STACK" --diff --non-interactive' in command
    preview = next(s for s in steps(job) if "pulumi preview " in s.get("run", ""))
    assert preview["env"]["STACK"] == "${{ matrix.stack }}"
    assert preview["env"]["PULUMI_BACKEND_URL"] == "${{ vars.PULUMI_BACKEND_URL }}"


BASE = '"$RUNNER_TEMP/base-policy'
"""Where preview puts base-policy's artifact: the runner's temporary directory, not the checkout."""
LOCKED_INSTALL = re.compile(r"-m pip install [^\n]*--require-hashes --only-binary=:all: (?:\\\n\s*)?-r (?P<lock>\S+)")


def test_the_pull_request_preview_is_judged_by_the_base_branchs_pack_and_config():
    """The pack and its configuration come from the protected base branch, made by a job that checks
    out and runs no code of the pull request (base-policy) and handed to preview as an artifact
    outside the pull request's checkout: a pull request that loosens policy/, its lock file or the
    config script changes nothing of its own preview."""
    jobs = workflow("pull-request.yml")["jobs"]
    base = jobs["base-policy"]
    assert base["permissions"] == {"contents": "read"} and base["runs-on"] == "ubuntu-24.04"
    (checkout,) = [s for s in steps(base) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"] == {"ref": "${{ github.base_ref }}", "persist-credentials": False}
    base_runs = "\n".join(s.get("run", "") for s in steps(base))
    assert [m["lock"] for m in LOCKED_INSTALL.finditer(base_runs)] == ["requirements.lock"]
    assert '.venv/bin/python scripts/policy_config.py "$stack" --output "base-policy/config/$stack.json"' in base_runs
    assert uploads(base)["base-policy"]["path"] == "base-policy"

    job = jobs["preview"]
    assert "base-policy" in job["needs"]
    checkouts = [s for s in steps(job) if s.get("uses", "").startswith("actions/checkout@")]
    assert [c["with"] for c in checkouts] == [{"persist-credentials": False}], "the pull request's tree only"
    (download,) = [s for s in steps(job) if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"]["name"] == "base-policy"
    assert download["with"]["path"].startswith("${{ runner.temp }}/base-policy")
    # Everything of the base branch is in place before the pull request's tree is checked out.
    order = [s.get("uses", "").split("@")[0] or s.get("id", "") for s in steps(job)]
    assert order.index("actions/download-artifact") < order.index("pack-venv") < order.index("actions/checkout")
    runs = "\n".join(s.get("run", "") for s in steps(job))
    assert [m["lock"] for m in LOCKED_INSTALL.finditer(runs)] == [f'{BASE}/policy/requirements.lock"', "requirements.lock"]
    assert "policy_config.py" not in runs and "make " not in runs, "no script or Makefile of the pull request builds the pack"
    command = preview_command(job)
    packs = re.findall(r"--policy-pack (\S+)", command)
    configs = re.findall(r"--policy-pack-config (\S+)", command)
    assert packs == [f'{BASE}/policy"'] and configs == [f'{BASE}/config/$STACK.json"']
    assert "policyPacks" not in str(job), "no pack of the pull request's tree"


def base_policy_digest(runner_temp: Path) -> str:
    """A stand-in for base-policy's artifact in `runner_temp`, and its digest as the workflow takes it."""
    pack = runner_temp / "base-policy"
    (pack / "policy").mkdir(parents=True, exist_ok=True)
    (pack / "policy" / "__main__.py").write_text("# the base branch's pack\n")
    return subprocess.run("find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1",
                          shell=True, cwd=pack, capture_output=True, text=True, check=True).stdout.strip()


def test_the_preview_refuses_a_pack_changed_after_the_pull_requests_code_started(tmp_path):
    """The pack, its configuration and its virtualenv are hashed before the pull request's code
    is on the runner; the preview step hashes them again first and stops on any difference."""
    job = workflow("pull-request.yml")["jobs"]["preview"]
    step = next(s for s in steps(job) if "pulumi preview " in s.get("run", ""))
    assert step["env"]["PACK_DIGEST"] == "${{ steps.pack-venv.outputs.digest }}"
    env = {"STACK": "dev", "PUBLIC_REPOSITORY": "false", "PACK_DIGEST": base_policy_digest(tmp_path)}
    pack = tmp_path / "base-policy"
    stub = '#!/bin/sh\necho "pulumi $*"\n'
    assert run_step(step["run"], tmp_path, env, stub).returncode == 0
    (pack / "policy" / "__main__.py").write_text("# loosened by the pull request\n")
    shutil.rmtree(tmp_path / "preview")
    result = run_step(step["run"], tmp_path, env, stub)
    assert result.returncode == 1 and "changed after the pull request's code started" in result.stdout
    assert not (tmp_path / "preview").exists(), "pulumi never ran"


def test_credentialed_jobs_install_only_from_hashed_lock_files():
    """Every job that holds an OIDC token installs Python packages only with --require-hashes from a
    lock file (wheels only: no package's build script runs), never through make's unhashed pins."""
    found = 0
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            if (job.get("permissions") or {}).get("id-token") != "write":
                continue
            runs = "\n".join(s.get("run", "") for s in steps(job))
            installs = re.findall(r"pip install[^\n]*(?:\\\n[^\n]*)*", runs)
            assert all("--require-hashes" in i and "--only-binary=:all:" in i for i in installs), (name, job_name, installs)
            assert not re.search(r"^\s*make\b.*\b(venv|policy-venv|\.venv/\S+)\b", runs, re.M), (name, job_name)
            found += len(installs)
    assert found >= 5, "preview (pack, program), deploy's preview and up (program, pack each)"


@pytest.mark.parametrize("requirements", ["requirements.txt", "policy/requirements.txt"])
def test_each_lock_file_pins_with_hashes_what_its_requirements_pin(requirements):
    """The lock files are pip-compile --generate-hashes of the pinned requirements: every pin of the
    requirements file is in the lock at the same version, and every locked package has a hash."""
    lock = (ROOT / requirements).with_suffix(".lock").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / requirements).read_text(), re.M))
    locked = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+) \\$", lock, re.M))
    assert {name.lower(): version for name, version in pins.items()}.items() <= locked.items()
    entries = re.split(r"\n(?=[a-z0-9_.-]+==)", lock[lock.index("\n", lock.index("==") - 40):])
    assert all("--hash=sha256:" in entry for entry in entries if "==" in entry)


def run_step(script: str, tmp_path: Path, env: dict[str, str], pulumi: str) -> subprocess.CompletedProcess[str]:
    """Run a workflow step's script as GitHub's default shell does (bash -e), with a stub pulumi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pulumi").write_text(pulumi)
    (bin_dir / "pulumi").chmod(0o755)
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, check=False, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
                                                       **env})


@pytest.mark.parametrize(("public", "exit_code"), [("true", 0), ("false", 0), ("true", 255)])
def test_the_preview_keeps_stack_outputs_out_of_a_public_repositorys_log_and_comment(tmp_path, public, exit_code):
    """In a public repository the job's log and artifacts are readable by anyone: the preview then
    runs with --suppress-outputs, which keeps the stack's outputs out of both (and the comment)."""
    job = workflow("pull-request.yml")["jobs"]["preview"]
    step = next(s for s in steps(job) if "pulumi preview " in s.get("run", ""))
    assert step["env"]["PUBLIC_REPOSITORY"] == "${{ !github.event.repository.private }}"
    result = run_step(step["run"], tmp_path, {"STACK": "team-vision-dev", "PUBLIC_REPOSITORY": public,
                                              "PACK_DIGEST": base_policy_digest(tmp_path)},
                      f'#!/bin/sh\necho "pulumi $*"\necho "Outputs: vpcId"\nexit {exit_code}\n')
    assert result.returncode == exit_code, result.stderr
    markdown = (tmp_path / "preview" / "team-vision-dev.md").read_text()
    called = next(line for line in markdown.splitlines() if line.startswith("pulumi "))
    assert ("--suppress-outputs" in called.split()) is (public == "true")
    assert '--policy-pack ' + str(tmp_path) + '/base-policy/policy' in called
    assert markdown.startswith("### `team-vision-dev`: pulumi preview " + ("passed" if exit_code == 0 else "failed (exit 255)"))
    assert not (tmp_path / "preview" / "output.txt").exists()


def test_the_preview_comment_is_posted_by_a_job_that_runs_no_pull_request_code(tmp_path):
    """The job that runs the pull request's code (preview) holds read permissions and its OIDC
    token; the one holding `pull-requests: write` checks nothing out, runs no script of the
    repository and only turns the previews' files into one comment."""
    jobs = workflow("pull-request.yml")["jobs"]
    preview = jobs["preview"]
    assert preview["permissions"] == {"contents": "read", "id-token": "write"}
    assert not [s for s in steps(preview) if s.get("uses", "").startswith(("pulumi/actions@", "marocchino/"))
                and (s.get("with") or {}).get("command")], "the preview step is the job's own, with no comment"
    upload = uploads(preview)["preview-${{ matrix.stack }}"]
    assert upload["path"] == "preview/${{ matrix.stack }}.md"
    comment = jobs["preview-comment"]
    assert comment["needs"] == "preview" and SAME_REPOSITORY in comment["if"]
    assert comment["permissions"] == {"pull-requests": "write"}
    used = [s["uses"].split("@")[0] for s in steps(comment) if "uses" in s]
    assert used == ["actions/download-artifact", "marocchino/sticky-pull-request-comment"]
    download, post = (s for s in steps(comment) if "uses" in s)
    assert download["with"] == {"pattern": "preview-*", "path": "previews", "merge-multiple": True}
    assert post["with"] == {"header": "pulumi-preview", "path": "preview-comment.md"}
    (script,) = [s["run"] for s in steps(comment) if "run" in s]
    assert not re.search(r"\b(scripts/|make|python|pip|\.venv|\./|source|bash)\b", script), script
    # What it makes of two previews, one of them far too long for a comment.
    (tmp_path / "previews").mkdir()
    (tmp_path / "previews" / "dev.md").write_text("### `dev`: pulumi preview passed\n")
    (tmp_path / "previews" / "team-vision-dev.md").write_text("x" * 70_000)
    result = run_step(script, tmp_path, {}, "#!/bin/sh\nexit 99\n")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "preview-comment.md").read_text()
    assert "### `dev`: pulumi preview passed" in text and len(text.encode()) <= 65_000


def test_the_changed_stacks_filter_keeps_the_named_environments_stacks_only():
    from offline.plan_diff import stacks_of_environments
    stacks = ["dev", "prod", "staging", "team-vision-dev", "team-vision-prod", "team-dev-ops-staging"]
    assert stacks_of_environments(stacks, ["dev"]) == ["dev", "team-vision-dev"]
    assert stacks_of_environments(stacks, ["prod", "staging"]) == ["prod", "staging", "team-vision-prod",
                                                                   "team-dev-ops-staging"]
    assert stacks_of_environments(stacks, []) == stacks


def test_previews_never_refresh():
    """Refreshing a Helm release reads its release Secrets (pulumi-kubernetes helm_release.go: Read
    calls Helm's action.Get), which the preview roles' cluster access (EKS view policy) does not allow."""
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            for step in steps(job):
                assert not (step.get("with") or {}).get("refresh"), f"{name}/{job_name} refreshes"
                assert "--refresh" not in step.get("run", ""), f"{name}/{job_name} refreshes"
    script = subprocess.run([str(ROOT / "scripts" / "deploy-environment"), "--dry-run", "--preview", "prod"],
                            capture_output=True, text=True, check=True).stdout
    # prod, prod-use2, prod-usw2, team-vision-prod
    # prod's three platform stacks; team-vision-prod sets its team boundary: its repository previews it.
    assert script.count("pulumi preview ") == 3 and "--refresh" not in script and "--yes" not in script
    assert "skipping team-vision-prod: it sets its team boundary" in script


# --- runners: a job that talks to a cluster runs inside that environment's VPC -----------------

GITHUB_HOSTED = re.compile(r"^(ubuntu|windows|macos)-")
CLUSTER_COMMAND = re.compile(r"\b(scripts/deploy-environment|pulumi (up|preview|refresh|destroy))\b")
# A self-hosted runner's label (and its runner group's name): whose VPC, and for what. Pull request
# previews and deploys never share runners: a pull request job waiting on a deploy runner could
# take the next deploy's machine (docs/delivery.md, "CI runners").
RUNNER_LABEL = re.compile(r"^gpu-training-(?P<environment>[a-z]+|\$\{\{ inputs\.environment \}\})-(?P<use>pull-request|deploy)$")
RUNNER_USE = {"pull-request.yml": "pull-request", "deploy.yml": "deploy", "team-stack.yml": "deploy"}


def touches_cluster(job: dict[str, Any]) -> bool:
    """`pulumi preview`/`up` of a stack reaches its Kubernetes API (objects and Helm releases)."""
    return any((s.get("uses", "").startswith("pulumi/actions@") and (s.get("with") or {}).get("command"))
               or CLUSTER_COMMAND.search(s.get("run", "")) for s in steps(job))


def runner_labels(job: dict[str, Any]) -> list[str]:
    runs_on = job["runs-on"]
    if isinstance(runs_on, dict):
        return [runs_on["group"], *runs_on.get("labels", [])] if "group" in runs_on else list(runs_on.get("labels", []))
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def self_hosted_problems(name: str, job: dict[str, Any], environments: set[str], uses: set[str]) -> list[str]:
    """A cluster job's runner: one environment, its runner group named, the workflow's own use."""
    runs_on = job["runs-on"]
    labels = runner_labels(job)
    if any(GITHUB_HOSTED.match(label) for label in labels) or "self-hosted" not in labels or len(environments) != 1:
        return [f"{name}: runs pulumi against a cluster, so it needs [self-hosted, gpu-training-<env>-<use>] "
                f"(a runner inside that environment's VPC), got {labels}"]
    if not isinstance(runs_on, dict) or not RUNNER_LABEL.match(runs_on.get("group", "")):
        return [f"{name}: names no runner group (`runs-on: {{group: ..., labels: ...}}`): labels alone are no boundary"]
    if len(uses) != 1:
        return [f"{name}: mixes pull-request and deploy runners ({labels})"]
    return []


def runner_problems(document: dict[str, Any], workflow_name: str = "") -> list[str]:
    problems = []
    for name, job in document["jobs"].items():
        if "uses" in job:  # a call of a reusable workflow: its own jobs are checked there
            continue
        labels = runner_labels(job)
        matches = [m for m in map(RUNNER_LABEL.match, labels) if m]
        environments = {m["environment"] for m in matches}
        uses = {m["use"] for m in matches}
        if not touches_cluster(job):
            if not all(GITHUB_HOSTED.match(label) for label in labels):
                problems.append(f"{name}: needs no cluster, so it stays on a GitHub-hosted runner (got {labels})")
            continue
        found = self_hosted_problems(name, job, environments, uses)
        if found:
            problems += found
            continue
        if workflow_name in RUNNER_USE and uses != {RUNNER_USE[workflow_name]}:
            problems.append(f"{name}: {workflow_name} runs on {RUNNER_USE[workflow_name]} runners only, got {labels}")
        (environment,) = environments
        for step in steps(job):
            if step.get("uses", "").startswith("aws-actions/configure-aws-credentials@"):
                role_arn = step["with"]["role-to-assume"]
                if not role_arn.endswith(f"-{environment}"):
                    problems.append(f"{name}: runner of {environment} but credentials {role_arn}")
    return problems


def test_cluster_jobs_run_inside_their_environments_vpc_and_nothing_else_does():
    for name, document in all_workflows().items():
        assert runner_problems(document, name) == [], name
    cluster_jobs = {(name, job_name) for name, document in all_workflows().items()
                    for job_name, job in document["jobs"].items() if "uses" not in job and touches_cluster(job)}
    assert cluster_jobs == {("pull-request.yml", "preview"), ("deploy.yml", "preview"), ("deploy.yml", "up"),
                            ("team-stack.yml", "stack")}


RUNNER_TOOLS = re.compile(r"^need (\S+) ", re.MULTILINE)


def test_cluster_jobs_check_their_runners_tools_before_using_them():
    """Self-hosted runners carry what their image has: the check names a missing tool up front."""
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            if "uses" in job or not touches_cluster(job):
                continue
            # team-stack.yml's platform-on-main (git alone) runs before any script of platform-ref.
            uses = [s.get("uses", "") or s.get("run", "") for s in steps(job) if s.get("id") != "platform-on-main"]
            if uses[0].startswith("actions/download-artifact@"):
                # The pull request's preview: the base branch's check, shipped with its pack, runs
                # once the artifact's digest is checked, before setup-python and before any code of
                # the pull request is on the runner.
                assert "needs.base-policy.outputs.digest" in str(steps(job)[1].get("env")) and "sha256sum" in uses[1], \
                    f"{name}/{job_name}: check the artifact's digest before running anything of it"
                assert uses[2].startswith('bash "$RUNNER_TEMP/base-policy/check-runner-tools"'), f"{name}/{job_name}"
                continue
            assert uses[0].startswith("actions/checkout@") and uses[1] == "scripts/check-runner-tools", \
                f"{name}/{job_name}: check the runner's tools right after the checkout, before setup-python"


def test_the_runner_tools_are_the_ones_the_runner_section_lists():
    tools = RUNNER_TOOLS.findall((ROOT / "scripts" / "check-runner-tools").read_text())
    assert tools == ["git", "make", "tar", "gzip", "curl", "aws", "kubectl"]
    runners = (ROOT / "docs" / "delivery.md").read_text().split("### The runner image", 1)[1].split("\n## ", 1)[0]
    for tool in tools:
        assert f"`{tool}`" in runners, f"docs/delivery.md, The runner image, does not list {tool}"


def check_runner_tools(tmp_path: Path, tools: list[str], aws_version: str = "aws-cli/2.31.0 Python/3.13.7") -> subprocess.CompletedProcess[str]:
    """Run scripts/check-runner-tools with only `tools` (and bash) on PATH."""
    bin_dir = tmp_path / "bin"
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    for tool in tools:
        (bin_dir / tool).write_text(f"#!/bin/sh\necho '{aws_version}'\n" if tool == "aws" else "#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    return subprocess.run([str(ROOT / "scripts" / "check-runner-tools")], capture_output=True, text=True,
                          env={"PATH": str(bin_dir)}, check=False)


def test_the_runner_check_names_each_missing_tool(tmp_path):
    every = RUNNER_TOOLS.findall((ROOT / "scripts" / "check-runner-tools").read_text())
    assert check_runner_tools(tmp_path, every).returncode == 0
    for tool in every:
        result = check_runner_tools(tmp_path, [t for t in every if t != tool])
        assert result.returncode == 1 and f"::error title=Runner image lacks a tool::{tool}: " in result.stdout, tool
        assert "docs/delivery.md" in result.stderr
    old_cli = check_runner_tools(tmp_path, every, aws_version="aws-cli/1.45.11 Python/3.11.7")
    assert old_cli.returncode == 0 and "::warning" in old_cli.stdout and "AWS CLI v2" in old_cli.stdout


DEPLOY_RUNNER = {"group": "gpu-training-dev-deploy", "labels": ["self-hosted", "gpu-training-dev-deploy"]}


@pytest.mark.parametrize(("name", "job_name", "runs_on", "says"), [
    ("deploy.yml", "up", "ubuntu-24.04", "needs [self-hosted"),
    ("deploy.yml", "preview", ["self-hosted", "ubuntu-24.04"], "needs [self-hosted"),
    ("pull-request.yml", "preview", ["ubuntu-24.04"], "needs [self-hosted"),
    ("pull-request.yml", "preview", {"group": "gpu-training-prod-pull-request",
                                     "labels": ["self-hosted", "gpu-training-prod-pull-request"]},
     "runner of prod but credentials"),
    ("pull-request.yml", "preview", ["self-hosted", "gpu-training-dev-pull-request"], "names no runner group"),
    ("pull-request.yml", "preview", DEPLOY_RUNNER, "runs on pull-request runners only"),
    ("pull-request.yml", "preview", {"group": "gpu-training-dev-pull-request",
                                     "labels": ["self-hosted", "gpu-training-dev-deploy"]}, "mixes pull-request and deploy"),
    ("deploy.yml", "up", {"group": "gpu-training-dev-pull-request", "labels": ["self-hosted", "gpu-training-dev-pull-request"]},
     "runs on deploy runners only"),
    ("pull-request.yml", "test", ["self-hosted", "gpu-training-dev-pull-request"], "stays on a GitHub-hosted runner"),
])
def test_the_runner_check_catches_a_job_on_the_wrong_runner(name, job_name, runs_on, says):
    document = workflow(name)
    document["jobs"][job_name]["runs-on"] = runs_on
    assert any(says in problem for problem in runner_problems(document, name)), runner_problems(document, name)


def test_no_pull_request_job_can_land_on_a_deploy_runner():
    """Every label and runner group a pull-request.yml job names is a pull request one; deploy.yml's
    are deploy ones; the two sets share nothing but `self-hosted`."""
    def named(name: str) -> set[str]:
        return {label for job in workflow(name)["jobs"].values() if "runs-on" in job for label in runner_labels(job)}
    pull_request, deploy = named("pull-request.yml"), named("deploy.yml")
    assert pull_request & deploy == {"self-hosted"}
    assert {label for label in pull_request if RUNNER_LABEL.match(label)} == {"gpu-training-dev-pull-request"}
    assert not [label for label in pull_request if "deploy" in label]
    assert {RUNNER_LABEL.match(label)["use"] for label in deploy if RUNNER_LABEL.match(label)} == {"deploy"}  # type: ignore[index]
    configured = yaml.safe_load((WORKFLOWS.parent / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    assert configured == ["gpu-training-dev-pull-request", *(f"gpu-training-{env}-deploy" for env in ("dev", "staging", "prod"))]


def test_fork_pull_requests_never_reach_a_self_hosted_runner():
    """A fork's code must not run on a machine inside a VPC: each self-hosted job of pull-request.yml
    runs only when the head repository is this one."""
    jobs = workflow("pull-request.yml")["jobs"]
    hosted = {name: job for name, job in jobs.items() if "self-hosted" in runner_labels(job)}
    assert set(hosted) == {"preview"}
    for name, job in hosted.items():
        assert job["if"].startswith(SAME_REPOSITORY + " && "), f"{name} would run a fork's code on a self-hosted runner"


def test_deploys_go_dev_then_staging_then_prod_each_behind_its_environment():
    jobs = workflow("main.yml")["jobs"]
    order = [("deploy-dev", "test", "dev"), ("deploy-staging", "deploy-dev", "staging"), ("deploy-prod", "deploy-staging", "prod")]
    for job_name, after, environment in order:
        job = jobs[job_name]
        assert job["uses"] == "./.github/workflows/deploy.yml" and job["needs"] == after
        assert job["with"] == {"environment": environment}
    up = workflow("deploy.yml")["jobs"]["up"]
    assert up["environment"] == "${{ inputs.environment }}" and up["needs"] == "preview"
    assert up["concurrency"] == {"group": "deploy-${{ inputs.environment }}", "cancel-in-progress": False}
    credentials = next(s for s in steps(up) if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
    role = policies.ci_role_name("gpu-training", "deploy", "${{ inputs.environment }}")
    assert credentials["with"]["role-to-assume"] == f"arn:aws:iam::${{{{ vars.AWS_ACCOUNT_ID }}}}:role/{role}"
    assert "scripts/deploy-environment" in steps(up)[-1]["run"]


def rendered(text: str, **values: str) -> str:
    """`text` with each `${{ inputs.<name> }}` replaced by values[<name>] (dashes as underscores)."""
    return re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: values[m[1].replace("-", "_")], text)


@pytest.mark.parametrize(("team", "environment"), [("vision", "prod"), ("audio-x", "dev")])
def test_a_team_stack_deploys_with_the_role_and_environment_the_bootstrap_trusts(team, environment):
    """team-stack.yml, called by the team's repository, assumes the role the bootstrap names for the
    team and stage (teams.team_deploy_role_name), in the GitHub environment whose OIDC subject
    (repo:<the caller>:environment:<env>) that role's trust admits (teams.team_subject)."""
    document = workflow("team-stack.yml")
    assert set(triggers(document)) == {"workflow_call"}
    assert {name for name, spec in triggers(document)["workflow_call"]["inputs"].items() if spec["required"]} == {
        "team", "environment", "platform-ref"}
    job = document["jobs"]["stack"]
    values = {"team": team, "environment": environment}
    credentials = next(s for s in steps(job) if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
    role = rendered(credentials["with"]["role-to-assume"], **values)
    assert role == f"arn:aws:iam::${{{{ vars.AWS_ACCOUNT_ID }}}}:role/{teams.team_deploy_role_name('gpu-training', team, environment)}"
    # The subject the role's trust admits, read from its document as the bootstrap renders it
    # (bootstrap/ci_identity.py: json.dumps), against the job's: GitHub's subject for a job in an
    # environment is the calling repository's with that environment (docs.github.com, "OpenID
    # Connect reference"), so the trust must name the caller and the environment the job runs in.
    caller = TeamCi(name=team, repository=f"example-org/{team}", environments=(environment,))
    trust = json.loads(json.dumps(teams.team_trust_policy(
        "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com", caller, environment)))
    admitted = trust["Statement"][0]["Condition"]["StringEquals"]["token.actions.githubusercontent.com:sub"]
    claim = re.fullmatch(r"repo:(?P<repository>[^:]+):environment:(?P<environment>[^:]+)", admitted)
    assert claim, admitted
    assert (claim["repository"], claim["environment"]) == (caller.repository, rendered(job["environment"], **values))
    assert rendered(steps(job)[-1]["env"]["STACK"], **values) == teams.team_stack(team, environment)
    assert "scripts/deploy-environment" in steps(job)[-1]["run"] and "--stack" in steps(job)[-1]["run"]
    # The program and the pack are the platform's at the pinned commit, not the caller's.
    platform = steps(job)[0]
    assert platform["with"]["ref"] == "${{ inputs.platform-ref }}" and platform["with"]["repository"]
    assert rendered(job["runs-on"]["group"], **values) == f"gpu-training-{environment}-deploy"
    assert "inputs.environment" in job["if"] and all(f'"{env}"' in job["if"] for env in ("dev", "staging", "prod"))



def conjuncts(condition: str) -> set[str]:
    """The terms of an `a && b && c` condition, or a failure when it is anything else (an `||` or a `!`)."""
    assert "||" not in condition and "!" not in condition.replace("!=", ""), condition
    return {" ".join(term.split()) for term in condition.split("&&")}


def team_event_step() -> dict[str, Any]:
    (step,) = steps(workflow("team-stack.yml")["jobs"]["event"])
    return step


def team_event(tmp_path: Path, event: str, ref: str = "refs/heads/main", deploy_branch: str = "main",
               environment: str = "prod") -> tuple[subprocess.CompletedProcess[str], str]:
    """The event job's step as GitHub would run it for `event` on `ref`: its result and its outputs."""
    output = tmp_path / "github-output"
    output.write_text("")
    result = run_step(team_event_step()["run"], tmp_path, {
        "EVENT": event, "REF": ref, "DEPLOY_BRANCH": deploy_branch, "ENVIRONMENT": environment,
        "STACK": f"team-vision-{environment}", "GITHUB_OUTPUT": str(output)}, "#!/bin/sh\nexit 1\n")
    return result, output.read_text()


def test_a_team_stack_is_updated_only_by_a_push_to_the_deploy_branch():
    """pull_request_target, workflow_dispatch, schedule, merge_group and issue_comment run on the
    default branch: they would pass the environment's branch rule and the tip check. The job that
    holds the deploy role runs for a push to the deploy branch only, checked where GitHub decides
    whether the job runs at all (before the environment's rules and any runner)."""
    document = workflow("team-stack.yml")
    inputs = triggers(document)["workflow_call"]["inputs"]
    assert inputs["deploy-branch"] == {"description": inputs["deploy-branch"]["description"], "required": False,
                                       "type": "string", "default": "main"}
    jobs = document["jobs"]
    assert set(jobs) == {"event", "stack"}
    assert jobs["stack"]["needs"] == "event"
    assert conjuncts(jobs["stack"]["if"]) == {
        "needs.event.outputs.deploy == 'true'", "github.event_name == 'push'",
        "github.ref == format('refs/heads/{0}', inputs.deploy-branch)",
        """contains(fromJSON('["dev", "staging", "prod"]'), inputs.environment)"""}
    # The event job decides with no token, no environment and no runner of the environment.
    event = jobs["event"]
    assert event["permissions"] == {} and event["runs-on"] == "ubuntu-24.04" and "environment" not in event
    assert event["outputs"] == {"deploy": "${{ steps.event.outputs.deploy }}"}
    assert team_event_step()["id"] == "event"
    assert team_event_step()["env"] == {
        "EVENT": "${{ github.event_name }}", "REF": "${{ github.ref }}", "DEPLOY_BRANCH": "${{ inputs.deploy-branch }}",
        "ENVIRONMENT": "${{ inputs.environment }}", "STACK": "team-${{ inputs.team }}-${{ inputs.environment }}"}


@pytest.mark.parametrize(("event", "ref", "deploy_branch"), [
    ("push", "refs/heads/main", "main"),
    ("push", "refs/heads/release", "release"),
])
def test_the_team_event_job_lets_a_push_to_the_deploy_branch_deploy(tmp_path, event, ref, deploy_branch):
    result, outputs = team_event(tmp_path, event, ref, deploy_branch)
    assert result.returncode == 0 and outputs == "deploy=true\n", result.stdout


@pytest.mark.parametrize("event", ["pull_request_target", "workflow_dispatch", "schedule", "merge_group",
                                   "issue_comment", "workflow_run", "release"])
def test_the_team_event_job_fails_every_other_event_naming_it(tmp_path, event):
    result, outputs = team_event(tmp_path, event)
    assert result.returncode == 1 and outputs == "", result.stdout
    assert f"::error title=team-stack: event {event} refused::" in result.stdout
    assert f"remove {event} from the calling workflow's on:" in result.stdout


@pytest.mark.parametrize(("ref", "environment", "says"), [
    ("refs/heads/feature", "prod", "this push is to refs/heads/feature; team-vision-prod is updated on pushes to main only"),
    ("refs/tags/v1", "prod", "this push is to refs/tags/v1"),
    ("refs/heads/main", "qa", "the input environment is 'qa'; it must be dev, staging or prod"),
    # The stack job's own `if:` compares without regard to case (GitHub's `==` and contains()), so
    # this job's case-sensitive checks are the gate: Main is another branch, PROD no stage.
    ("refs/heads/Main", "prod", "this push is to refs/heads/Main"),
    ("refs/heads/main", "PROD", "the input environment is 'PROD'"),
])
def test_the_team_event_job_fails_a_push_it_must_not_deploy(tmp_path, ref, environment, says):
    result, outputs = team_event(tmp_path, "push", ref, environment=environment)
    assert result.returncode == 1 and outputs == "" and says in result.stdout, result.stdout


def test_a_team_pull_request_gets_a_notice_and_no_credentials(tmp_path):
    """No read-only team preview role exists; previewing with the deploy role would need the
    environment's branch rule to admit every branch, and so hand the write role to every branch."""
    result, outputs = team_event(tmp_path, "pull_request", "refs/pull/7/merge")
    assert result.returncode == 0 and outputs == "deploy=false\n", result.stdout
    assert "::notice title=team-stack: no preview of team-vision-prod::" in result.stdout
    assert "read-only team preview role, which is not built yet" in result.stdout
    assert "make plan STACK=team-vision-prod" in result.stdout and "policy/check_plans.py build/team-vision-prod" in result.stdout
    stack = workflow("team-stack.yml")["jobs"]["stack"]
    text = yaml.safe_dump(stack)
    assert "pull_request" not in text and "--preview" not in text, "nothing of the deploy job previews"
    assert steps(stack)[-1]["run"] == 'scripts/deploy-environment --stack "$STACK"'
    assert steps(stack)[-1]["if"] == "steps.tip.outputs.current == 'true'"
    tip = next(s for s in steps(stack) if s.get("id") == "tip")
    assert "if" not in tip, "every run of the deploy job is a push: the tip check always runs"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main",
                           *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def platform_clone(tmp_path) -> tuple[Path, dict[str, str]]:
    """A clone of a platform repository as the checkout leaves it (all branches' history): main with
    two commits, a branch with one of its own; the commits by name."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "--quiet")
    commits = {}
    for name in ("old", "main"):
        git(origin, "commit", "--quiet", "--allow-empty", "-m", name)
        commits[name] = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "--quiet", "-b", "unmerged")
    git(origin, "commit", "--quiet", "--allow-empty", "-m", "unmerged")
    commits["unmerged"] = git(origin, "rev-parse", "HEAD")
    git(tmp_path, "clone", "--quiet", "--no-checkout", str(origin), "clone")
    return tmp_path / "clone", commits


def platform_on_main(clone: Path, commit: str) -> subprocess.CompletedProcess[str]:
    step = next(s for s in steps(workflow("team-stack.yml")["jobs"]["stack"]) if s.get("id") == "platform-on-main")
    git(clone, "checkout", "--quiet", "--detach", commit)
    return run_step(step["run"], clone, {"PLATFORM_REF": commit}, "#!/bin/sh\nexit 1\n")


@pytest.mark.parametrize(("commit", "deploys"), [("main", True), ("old", True), ("unmerged", False)])
def test_a_team_stack_deploys_only_with_a_platform_ref_on_the_platforms_main(platform_clone, commit, deploys):
    """platform-ref is the caller's choice: a commit outside the platform's main (a branch, a fork's
    commit GitHub serves through the fork network) would run its own program and policy pack on
    the deploy runners. An older commit of main still passes (docs/team-stacks.md says so)."""
    clone, commits = platform_clone
    result = platform_on_main(clone, commits[commit])
    assert (result.returncode == 0) == deploys, result.stdout + result.stderr
    if not deploys:
        assert result.returncode == 1 and "::error title=team-stack: platform-ref not on main::" in result.stdout
        assert f"platform-ref {commits[commit]} is {commits[commit]}, which is not on" in result.stdout


def test_a_platform_ref_whose_ancestry_cannot_be_read_is_refused(platform_clone):
    clone, commits = platform_clone
    git(clone, "update-ref", "-d", "refs/remotes/origin/main")  # a checkout without main's history
    result = platform_on_main(clone, commits["main"])
    assert result.returncode == 1 and "::error title=team-stack: platform-ref unchecked::" in result.stdout
    assert "not deploying" in result.stdout


def test_the_platform_checkout_has_mains_history_and_an_optional_token_and_is_checked_first():
    document = workflow("team-stack.yml")
    secret = triggers(document)["workflow_call"]["secrets"]["platform-token"]
    assert secret["required"] is False
    job = document["jobs"]["stack"]
    checkout, check = steps(job)[:2]
    assert checkout["with"] == {"repository": "example-org/gpu-training", "ref": "${{ inputs.platform-ref }}",
                                "token": "${{ secrets.platform-token || github.token }}", "fetch-depth": 0,
                                "persist-credentials": False}
    assert check["id"] == "platform-on-main", "before any script of platform-ref runs"
    assert "refs/remotes/origin/main" in check["run"]

def test_an_older_commit_is_never_deployed_over_a_newer_one():
    """The deploy-<env> group keeps one pending job and a newer one replaces it, and runs reach it
    in any order: `pulumi up` runs only while the run's commit is the branch's tip, and a
    superseded run goes no further (its newer run deploys the next environments)."""
    deploy = workflow("deploy.yml")
    up = deploy["jobs"]["up"]
    names = [s.get("id") for s in steps(up)]
    tip = steps(up)[names.index("tip")]
    assert tip["run"] == "scripts/check-branch-tip" and tip["env"] == {"GH_TOKEN": "${{ github.token }}"}
    assert steps(up)[names.index("tip") + 1] is steps(up)[-1], "the check runs right before pulumi up"
    assert steps(up)[-1]["if"] == "steps.tip.outputs.current == 'true'"
    assert up["outputs"] == {"deployed": "${{ steps.tip.outputs.current }}"}
    assert triggers(deploy)["workflow_call"]["outputs"]["deployed"]["value"] == "${{ jobs.up.outputs.deployed }}"
    jobs = workflow("main.yml")["jobs"]
    assert "if" not in jobs["deploy-dev"]
    assert jobs["deploy-staging"]["if"] == "needs.deploy-dev.outputs.deployed == 'true'"
    assert jobs["deploy-prod"]["if"] == "needs.deploy-staging.outputs.deployed == 'true'"


HEAD_SHA, NEWER_SHA = "a" * 40, "b" * 40


def check_branch_tip(tmp_path: Path, answer: str | None, ref: str = "refs/heads/main") -> tuple[subprocess.CompletedProcess[str], str]:
    """Run scripts/check-branch-tip with a curl that answers `answer` (None: the request fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    curl = bin_dir / "curl"
    curl.write_text("#!/bin/sh\n" + (f'echo "$@" > "{tmp_path}/curl-args"\nprintf %s {shlex.quote(answer)}\n' if answer
                                     else 'echo "curl: (22) The requested URL returned error: 404" >&2; exit 22\n'))
    curl.chmod(0o755)
    output = tmp_path / "github-output"
    output.write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GITHUB_SHA": HEAD_SHA, "GITHUB_REF": ref, "GH_TOKEN": "t",
           "GITHUB_REPOSITORY": "example-org/gpu-training", "GITHUB_API_URL": "https://api.github.com",
           "GITHUB_OUTPUT": str(output)}
    result = subprocess.run([str(ROOT / "scripts" / "check-branch-tip")], capture_output=True, text=True, env=env,
                            check=False)
    return result, output.read_text()


def test_the_tip_check_deploys_the_tip_and_stops_a_superseded_commit(tmp_path):
    result, output = check_branch_tip(tmp_path, HEAD_SHA)
    assert result.returncode == 0 and output == "current=true\n", result.stderr
    args = (tmp_path / "curl-args").read_text()
    assert "https://api.github.com/repos/example-org/gpu-training/commits/heads/main" in args
    assert "Accept: application/vnd.github.sha" in args
    result, output = check_branch_tip(tmp_path, NEWER_SHA)
    assert result.returncode == 0 and output == "current=false\n"
    assert f"::notice title=Not deployed: superseded::main moved on to {NEWER_SHA}" in result.stdout


@pytest.mark.parametrize(("answer", "ref", "says"), [
    (None, "refs/heads/main", "could not read the tip of main"),
    (HEAD_SHA, "refs/pull/42/merge", "is not a branch"),
    # A 200 that is not a SHA (an HTML or JSON body) must not read as "superseded" and skip prod.
    ("<html>rate limited</html>", "refs/heads/main", "unexpected answer for the tip of main"),
    ('{"message": "Not Found"}', "refs/heads/main", "unexpected answer for the tip of main"),
])
def test_the_tip_check_refuses_to_deploy_when_it_cannot_tell(tmp_path, answer, ref, says):
    result, output = check_branch_tip(tmp_path, answer, ref)
    assert result.returncode == 1 and says in result.stderr and output == ""


def test_each_environment_is_previewed_from_main_before_its_approval_and_its_up():
    """Staging's and prod's previews run reviewed code (main) with the preview role, which trusts
    the branch's subject, so the job names no environment; prod's reviewers see it before approving."""
    preview = workflow("deploy.yml")["jobs"]["preview"]
    assert "environment" not in preview
    credentials = next(s for s in steps(preview) if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
    role = policies.ci_role_name("gpu-training", "preview", "${{ inputs.environment }}")
    assert credentials["with"]["role-to-assume"] == f"arn:aws:iam::${{{{ vars.AWS_ACCOUNT_ID }}}}:role/{role}"
    assert re.search(r"scripts/deploy-environment --preview \S+", steps(preview)[-1]["run"])
    assert triggers(workflow("main.yml")) == {"push": {"branches": ["main"]}}


def test_a_trainer_change_builds_the_image_and_proposes_the_pin():
    jobs = workflow("main.yml")["jobs"]
    assert jobs["image"]["if"] == "needs.changes.outputs.trainer == 'true'"
    assert jobs["image"]["environment"] == "dev-image"
    assert "scripts/build-image dev" in steps(jobs["image"])[-1]["run"]
    pin = steps(jobs["pin-image"])
    assert pin[1]["run"] == 'python3 scripts/pin-image dev "$IMAGE"'
    assert pin[3]["uses"].startswith("peter-evans/create-pull-request@")
    assert pin[3]["with"]["add-paths"] == "stacks/Pulumi.dev.yaml"


def test_the_pin_pull_request_is_opened_with_a_short_lived_app_token_from_an_environment():
    """Not the workflow's token (whose pull requests start no workflow, and which needs Actions to
    be allowed to create pull requests) and no repository secret any branch's workflow can read:
    an installation token of a GitHub App whose key is a secret of the `pin-image` environment."""
    job = workflow("main.yml")["jobs"]["pin-image"]
    assert job["environment"] == "pin-image" and job["permissions"] == {"contents": "read"}
    token = next(s for s in steps(job) if s.get("uses", "").startswith("actions/create-github-app-token@"))
    assert token["id"] == "app-token"
    assert token["with"] == {"client-id": "${{ vars.PIN_IMAGE_APP_CLIENT_ID }}",
                             "private-key": "${{ secrets.PIN_IMAGE_APP_PRIVATE_KEY }}",
                             "permission-contents": "write", "permission-pull-requests": "write"}
    assert "skip-token-revoke" not in token["with"], "revoked when the job ends"
    create = next(s for s in steps(job) if s.get("uses", "").startswith("peter-evans/create-pull-request@"))
    assert create["with"]["token"] == "${{ steps.app-token.outputs.token }}"
    assert steps(job).index(token) == steps(job).index(create) - 1, "made right before its one use"
    for path in sorted(WORKFLOWS.glob("*.yml")):
        assert "PIN_IMAGE_TOKEN" not in path.read_text(), path.name


def test_secrets_are_read_only_by_jobs_of_an_environment():
    """A repository secret is readable by every branch's workflow; an environment's only by jobs the
    environment admits (deployment branch `main`)."""
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            if "secrets." in yaml.safe_dump(job):
                assert job.get("environment"), f"{name}/{job_name} reads a secret outside an environment"


# What installs packages: pip itself, or make (whose venv targets run pip from requirements files).
INSTALLS = re.compile(r"\bpip3? install\b|\bmake\b|\brequirements[\w-]*\.txt\b")


def holds_a_write_token(job: dict[str, Any]) -> bool:
    """A GitHub write scope, or a token of its own (an App's, a secret)."""
    granted = {scope: level for scope, level in (job.get("permissions") or {}).items() if scope != "id-token"}
    return "write" in granted.values() or "secrets." in yaml.safe_dump(job)


def test_jobs_holding_a_write_token_install_nothing_unhashed():
    """No package index can hand code to a job that holds a write token: such a job installs with
    `pip install --require-hashes` from a hashed lock file, or installs nothing (every one today)."""
    holders = set()
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            if "uses" in job or not holds_a_write_token(job):
                continue
            holders.add((name, job_name))
            for step in steps(job):
                run = step.get("run", "")
                for line in run.splitlines():
                    if INSTALLS.search(line):
                        assert "pip install" in line and "--require-hashes" in line, f"{name}/{job_name}: {line}"
    # team-stack.yml's job: the caller's optional platform-token (meant to read the platform's
    # repository only, but the caller's to scope), for the checkout; it installs from hashed locks.
    assert holders == {("pull-request.yml", "comment"), ("pull-request.yml", "preview-comment"),
                       ("main.yml", "pin-image"), ("team-stack.yml", "stack")}


def test_pin_image_runs_with_the_standard_library_only(tmp_path):
    """The pin job installs nothing: scripts/pin-image imports no package outside the standard library."""
    source = (ROOT / "scripts" / "pin-image").read_text()
    imported = set(re.findall(r"^(?:from|import) ([A-Za-z_]\w*)", source, re.MULTILINE))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


# --- CODEOWNERS: who must review what guards the pipeline --------------------------------------

CODEOWNERS = ROOT / ".github" / "CODEOWNERS"


def codeowners_rules() -> list[tuple[str, list[str]]]:
    rules = []
    for line in CODEOWNERS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            pattern, *owners = line.split()
            rules.append((pattern, owners))
    return rules


def owners_of(path: str) -> list[str]:
    """The owners of a path (the last matching rule wins), for the patterns this file uses:
    `/dir/` (everything under it) and anchored file globs."""
    owners: list[str] = []
    for pattern, rule_owners in codeowners_rules():
        assert pattern.startswith("/"), f"{pattern}: anchor it at the repository root"
        under = pattern.endswith("/") and ("/" + path).startswith(pattern)
        # A `*` of a CODEOWNERS pattern stays within one path segment, as in .gitignore.
        file_glob = not pattern.endswith("/") and re.fullmatch(re.escape(pattern).replace(r"\*", "[^/]*"), "/" + path)
        if under or file_glob:
            owners = rule_owners
    return owners


@pytest.mark.parametrize("path", [
    ".github/workflows/deploy.yml", ".github/actionlint.yaml", ".github/CODEOWNERS",
    "bootstrap/policies/boundary.py", "bootstrap/Pulumi.bootstrap.yaml", "policy/PulumiPolicy.yaml",
    "policy/gpu_training_policy/network.py", "scripts/policy_config.py", "offline/policy_config.py",
    "stacks/Pulumi.prod.yaml", "stacks/Pulumi.staging.yaml", "stacks/Pulumi.team-vision-prod.yaml",
    "stacks/Pulumi.team-new-staging.yaml", "stacks/Pulumi.prod-usw2.yaml", "stacks/Pulumi.staging-euw1.yaml",
])
def test_codeowners_review_what_guards_the_pipeline(path):
    assert owners_of(path) == ["@example-org/gpu-training-admins"], path


@pytest.mark.parametrize("path", ["stacks/Pulumi.dev.yaml", "stacks/Pulumi.team-vision-dev.yaml", "components/platform.py",
                                  "trainer/launcher/main.py"])
def test_codeowners_leave_the_rest_to_ordinary_review(path):
    assert owners_of(path) == [], path


def test_codeowners_are_enforced_by_the_setting_the_docs_name():
    for pattern, owners in codeowners_rules():
        assert owners and all(re.fullmatch(r"@[\w.-]+/[\w.-]+", owner) for owner in owners), pattern
    for stack in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        environment = stack.stem.rsplit("-", 1)[-1].removeprefix("Pulumi.")
        if environment in ("prod", "staging"):
            assert owners_of(f"stacks/{stack.name}"), stack.name
    checklist = " ".join((ROOT / "docs" / "delivery.md").read_text().split("### 3. The GitHub repository", 1)[1]
                         .split("\n## ", 1)[0].split())
    assert "Require review from Code Owners" in checklist and "`.github/CODEOWNERS`" in checklist


def assumed_roles() -> list[tuple[str, str, str]]:
    """(workflow, job, role-to-assume) of every credentials step of every workflow."""
    return [(name, job_name, step["with"]["role-to-assume"])
            for name, document in all_workflows().items() for job_name, job in document["jobs"].items()
            for step in steps(job) if step.get("uses", "").startswith("aws-actions/configure-aws-credentials@")]


def test_the_image_job_pushes_with_devs_image_role_and_no_other_job_assumes_it():
    """The image job runs third-party build steps on a GitHub-hosted runner: it gets the role that
    reads dev's stack output and pushes to dev's trainer repository, not dev's deploy role."""
    image_role = policies.ci_role_name("gpu-training", "image", "dev")
    image = workflow("main.yml")["jobs"]["image"]
    assert [(name, job, arn) for name, job, arn in assumed_roles() if (name, job) == ("main.yml", "image")] == [
        ("main.yml", "image", f"arn:aws:iam::${{{{ vars.AWS_ACCOUNT_ID }}}}:role/{image_role}")]
    assert [(name, job) for name, job, arn in assumed_roles() if image_role in arn] == [("main.yml", "image")]
    # The role trusts dev's image environment (bootstrap/ci_identity.py), which the deploy role does
    # not: the job must name it.
    dev = EnvironmentCi(name="dev", deploy_branch="main", github_environment="dev")
    assert image["environment"] == dev.image_github_environment and image["permissions"] == {"contents": "read", "id-token": "write"}
    # The role may list dev's state file name only: the CLI's scan for legacy stack files is off.
    build = steps(image)[-1]
    assert build["env"]["PULUMI_DIY_BACKEND_NO_LEGACY_WARNING"] == "true"
    # The setup checklist says where the role's ARN comes from.
    checklist = (ROOT / "docs" / "delivery.md").read_text().split("### 3. The GitHub repository", 1)[1].split("\n## ", 1)[0]
    assert f"`{image_role}`" in checklist


def test_the_tests_get_the_cpu_build_of_torch_from_make_test_itself_in_ci_and_locally():
    """PyPI's torch wheel is the CUDA build (several GB of nvidia-* wheels); `make test` takes the
    pinned version from PyTorch's CPU index first wherever that answers (tests/test_makefile.py
    runs the recipe), so no workflow or .ci/run needs a step of its own for it."""
    for name, document in all_workflows().items():
        for job_name, job in document["jobs"].items():
            runs = [s.get("run", "") for s in steps(job)]
            assert not [r for r in runs if "torch" in r], f"{name}/{job_name}: `make test` installs torch itself"
    assert "torch" not in (ROOT / ".ci" / "run").read_text()
    pins = [line for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if line.startswith("torch==")]
    assert len(pins) == 1, pins
    makefile = (ROOT / "Makefile").read_text()
    dev = re.search(r"^\$\(VENV\)/\.dev:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert dev and dev[1].startswith("\t$(install_torch_cpu)\n"), "torch first, before requirements-dev.txt"
    assert re.search(r"^test: .*\blint\b.*\bpytest\b", makefile, re.MULTILINE)
    assert re.search(r"^lint: \$\(VENV\)/\.dev", makefile, re.MULTILINE) and \
        re.search(r"^pytest: \$\(VENV\)/\.dev", makefile, re.MULTILINE)


def test_the_cli_version_is_the_sdk_version():
    sdk = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert sdk
    for name, document in all_workflows().items():
        assert document["env"]["PULUMI_VERSION"] == sdk[1], name


ZIZMOR = Path(sys.executable).parent / "zizmor"
ZIZMOR_IGNORE = re.compile(r"#\s*zizmor:\s*ignore\[(?P<rules>[^\]]+)\](?P<reason>.*)$")


def zizmor_findings(directory: Path) -> list[dict[str, Any]]:
    """zizmor's auditor persona, offline, as JSON: every finding it does not drop as ignored."""
    result = subprocess.run([str(ZIZMOR), "--persona", "auditor", "--offline", "--no-progress", "--format", "json",
                             str(directory)], capture_output=True, text=True, check=False, timeout=120)
    assert result.stdout.strip().startswith("["), result.stderr  # a report, not zizmor's own failure
    return json.loads(result.stdout)


def medium_or_high(findings: list[dict[str, Any]]) -> list[str]:
    return [f"{f['ident']} ({f['determinations']['severity']}): {f['locations'][0]['symbolic']['key']}"
            for f in findings if f["determinations"]["severity"] in ("Medium", "High") and not f.get("ignored")]


@pytest.mark.skipif(not ZIZMOR.exists(), reason="zizmor is not installed in this venv (pip install zizmor)")
def test_zizmor_finds_nothing_medium_or_high_that_the_workflow_does_not_justify(tmp_path):
    """Every finding of severity medium or high is fixed, or ignored by a `# zizmor: ignore[rule]`
    comment on its line that says why; and the check can fail: without those comments zizmor reports
    the self-hosted runners again."""
    assert medium_or_high(zizmor_findings(WORKFLOWS)) == []
    ignores = [(path.name, line) for path in sorted(WORKFLOWS.glob("*.yml")) for line in path.read_text().splitlines()
               if "zizmor:" in line]
    assert ignores, "the self-hosted runners are justified where they are asked for"
    for name, line in ignores:
        match = ZIZMOR_IGNORE.search(line)
        assert match and len(match["reason"].split()) >= 5, f"{name}: an ignore without its reason: {line.strip()}"
    unjustified = tmp_path / ".github" / "workflows"  # where zizmor collects workflows from
    unjustified.mkdir(parents=True)
    for path in WORKFLOWS.glob("*.yml"):
        (unjustified / path.name).write_text(re.sub(r"#\s*zizmor:[^\n]*", "", path.read_text()))
    assert any(problem.startswith("self-hosted-runner (Medium)") for problem in medium_or_high(zizmor_findings(unjustified)))


def test_actionlint_runs_and_catches_a_broken_workflow(tmp_path):
    actionlint = Path(sys.executable).parent / "actionlint"
    assert actionlint.exists(), "make lint installs actionlint from requirements-dev.txt"
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    text = (WORKFLOWS / "pull-request.yml").read_text()
    assert "steps.diff.outputs.comment" in text
    broken.write_text(text.replace("steps.diff.outputs.comment", "steps.dif.outputs.comment", 1))
    shutil.copy2(WORKFLOWS.parent / "actionlint.yaml", broken.parent.parent / "actionlint.yaml")  # the runner labels
    subprocess.run(["git", "init", "--quiet"], cwd=tmp_path, check=True)
    result = subprocess.run([str(actionlint), "-no-color"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 1 and 'property "dif" is not defined' in result.stdout, result.stdout
    clean = subprocess.run([str(actionlint), "-no-color"], cwd=ROOT, capture_output=True, text=True, check=False,
                           env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert clean.returncode == 0, clean.stdout


# --- the scripts the workflows run -------------------------------------------------------------

def test_deploy_environment_updates_the_platform_stacks_before_their_team_stacks():
    result = subprocess.run([str(ROOT / "scripts" / "deploy-environment"), "--dry-run", "prod"], capture_output=True,
                            text=True, check=True)
    updates = [line for line in result.stdout.splitlines() if line.startswith("+ pulumi ")]
    stacks = [re.search(r"--stack (\S+)", line)[1] for line in updates]  # type: ignore[index]
    # the MultiKueue manager, then its workers in the other regions (docs/multi-region.md), then the
    # teams deployed with the environment's role: none, team-vision-prod sets its team boundary
    assert stacks == ["prod", "prod-use2", "prod-usw2"]
    assert "skipping team-vision-prod: it sets its team boundary" in result.stderr + result.stdout
    assert all("--policy-pack" in line and "--yes" in line for line in updates)
    team = subprocess.run([str(ROOT / "scripts" / "deploy-environment"), "--dry-run", "--stack", "team-vision-prod"],
                          capture_output=True, text=True, check=True)
    assert [re.search(r"--stack (\S+)", line)[1] for line in team.stdout.splitlines()  # type: ignore[index]
            if line.startswith("+ pulumi ")] == ["team-vision-prod"]
    dev = subprocess.run([str(ROOT / "scripts" / "deploy-environment"), "--dry-run", "dev"], capture_output=True,
                         text=True, check=True)
    assert "team-vision-prod" not in dev.stdout
    bad = subprocess.run([str(ROOT / "scripts" / "deploy-environment"), "qa"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "dev, staging or prod" in bad.stderr


DIGEST = "sha256:" + "ab" * 32
REPOSITORY = "111122223333.dkr.ecr.us-east-1.amazonaws.com/gpu-training-dev/trainer"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of what pin-image touches: itself (and the venv check it starts with), Pulumi.yaml and
    the stack files."""
    for name in ("scripts/pin-image", "offline/__init__.py", "offline/project_venv.py", "Pulumi.yaml", *(f"stacks/{p.name}" for p in (ROOT / "stacks").glob("*.yaml"))):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "stacks" / "Pulumi.unpinned.yaml").write_text("config:\n  gpu-training:environment: dev\n")
    return tmp_path


def pin_image(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(checkout / "scripts" / "pin-image"), *args], capture_output=True, text=True,
                          check=False)


def test_pin_image_rewrites_only_the_trainer_image_line(checkout):
    stack_file = checkout / "stacks" / "Pulumi.dev.yaml"
    before = stack_file.read_text()
    result = pin_image(checkout, "dev", f"{REPOSITORY}@{DIGEST}")
    assert result.returncode == 0, result.stderr
    after = stack_file.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert changed == [(next(line for line in before.splitlines() if "gpu-training:trainerImage:" in line),
                        f"  gpu-training:trainerImage: {REPOSITORY}@{DIGEST}")]
    assert yaml.safe_load(after)["config"]["gpu-training:trainerImage"] == f"{REPOSITORY}@{DIGEST}"
    assert pin_image(checkout, "dev", f"{REPOSITORY}@{DIGEST}").returncode == 0 and stack_file.read_text() == after


@pytest.mark.parametrize(("args", "says"), [
    (("dev", f"{REPOSITORY}:latest"), "never tags"),
    (("dev", f"{REPOSITORY}@sha256:1234"), "never tags"),
    (("qa", f"{REPOSITORY}@{DIGEST}"), "no stack file"),
    (("unpinned", f"{REPOSITORY}@{DIGEST}"), "expected one `gpu-training:trainerImage:` line, found 0"),
    (("dev",), "usage"),
])
def test_pin_image_refuses_what_it_cannot_pin_safely(checkout, args, says):
    result = pin_image(checkout, *args)
    assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr


def test_jobs_that_run_the_policy_pack_build_its_virtualenv():
    """PulumiPolicy.yaml runs the pack with the venv beside it (policy/venv), not the program's:
    built from the pack's own hashed lock file where it runs."""
    runners = {"pull-request.yml": ("preview", f'{BASE}/policy/venv"'), "deploy.yml": ("up", "policy/venv")}
    for name, (job_name, venv) in runners.items():
        runs = "\n".join(s.get("run", "") for s in steps(workflow(name)["jobs"][job_name]))
        assert f"python -m venv {venv}" in runs, f"{name}: {job_name} lacks the pack's virtualenv"
