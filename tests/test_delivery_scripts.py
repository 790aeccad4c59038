"""The delivery scripts run for real, against fake `pulumi`, `aws`, `docker` and a fake venv
python first on PATH: what they refuse, what they call and in which order, what they leave on
disk. (tests/test_workflows.py checks deploy-environment's --dry-run output against the workflows.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from stack_configs import ROOT

from bootstrap import policies
from components.config import permissions_boundary
from components.config.platform_contract import JUDGED_AGAINST_DEPLOYED_PLATFORM

DEPLOY = ROOT / "scripts" / "deploy-environment"
DEFERRED = f"against {JUDGED_AGAINST_DEPLOYED_PLATFORM}"
BUILD_IMAGE = ROOT / "scripts" / "build-image"
NEW_TEAM_STACK = ROOT / "scripts" / "new-team-stack"
# What `pulumi stack init --secrets-provider awskms://...` adds to a stack file.
CREATED = ("secretsprovider: awskms://alias/gpu-training-pulumi-secrets-{env}?region=us-east-1\n"
           "encryptedkey: AQICAHhZZmFrZWtleQ==\n")


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_path(bin_dir: Path) -> str:
    return f"{bin_dir}:/usr/bin:/bin"


# --- deploy-environment ------------------------------------------------------------------------

@pytest.fixture
def deploy_root(tmp_path) -> Path:
    """A checkout holding the script, Pulumi.yaml, dev's stacks and a fake venv python that writes
    the policy configuration where it is told and logs the path; a fake pulumi that logs its calls
    and fails unless the policy configuration it is given exists."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(DEPLOY, root / "scripts" / "deploy-environment")
    shutil.copy2(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "stacks").mkdir()
    region = "  gpu-training:region: us-east-1\n"
    (root / "stacks" / "Pulumi.dev.yaml").write_text(CREATED.format(env="dev") + "config:\n" + region)
    (root / "stacks" / "Pulumi.team-new-dev.yaml").write_text(CREATED.format(env="dev") + "config:\n" + region)
    log = tmp_path / "calls.log"
    executable(root / ".venv" / "bin" / "python", f"""#!/bin/bash
case "$1" in */_roll_gate.py | */_team_state_guard.py) script=${{1##*/}}; shift
    exec {shlex.quote(sys.executable)} {shlex.quote(str(ROOT / "scripts"))}/"$script" "$@" ;; esac
while [ "$#" -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done
echo "policy_config $out" >> {shlex.quote(str(log))}
echo '{{}}' > "$out"
""")
    executable(tmp_path / "bin" / "pulumi", f"""#!/bin/bash
echo "pulumi $*" >> {shlex.quote(str(log))}
case "$*" in
    "preview "*--json*) cat "${{FAKE_PREVIEW_JSON:-/dev/null}}"; exit 0 ;;
    "stack output kubeconfig "*) echo "apiVersion: v1"; exit 0 ;;
    "stack export "*) cat "${{FAKE_TEAM_STATE:-/dev/null}}"; [ -n "${{FAKE_TEAM_STATE:-}}" ] \
        || echo '{{"version": 3, "deployment": {{"resources": []}}}}'; exit 0 ;;
esac
while [ "$#" -gt 0 ]; do [ "$1" = --policy-pack-config ] && config=$2; shift; done
[ -f "$config" ] || {{ echo "no policy config at $config" >&2; exit 3; }}
case "$config" in *team-*) echo "${{FAKE_TEAM_OUTPUT:-}}"; exit "${{FAKE_TEAM_RC:-0}}" ;; esac
exit "${{FAKE_PULUMI_RC:-0}}"
""")
    executable(tmp_path / "bin" / "kubectl", f"""#!/bin/bash
echo "kubectl $* KUBECONFIG=$KUBECONFIG" >> {shlex.quote(str(log))}
case "$*" in *"get nodes"*) cat "$FAKE_NODES_JSON" ;; *"get pods"*) cat "$FAKE_PODS_JSON" ;; esac
""")
    return root


def deploy(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": fake_path(root.parent / "bin"), "TMPDIR": str(root.parent / "tmp"), **env}
    (root.parent / "tmp").mkdir(exist_ok=True)
    return subprocess.run([str(root / "scripts" / "deploy-environment"), *args], capture_output=True, text=True,
                          check=False, env=environment, timeout=60)


def calls(root: Path) -> list[str]:
    log = root.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_deploy_environment_deploys_created_stacks_platform_first(deploy_root):
    result = deploy(deploy_root, "dev")
    assert result.returncode == 0, result.stderr
    pulumi = [line for line in calls(deploy_root) if line.startswith("pulumi ") and "--policy-pack" in line]
    assert [re.search(r"--stack (\S+)", line)[1] for line in pulumi] == ["dev", "team-new-dev"]  # type: ignore[index]
    assert all(line.startswith("pulumi up ") and "--yes" in line for line in pulumi)


@pytest.mark.parametrize(("team_output", "rc"), [
    # Judged against the platform as deployed before this run's up: deferred, with a warning.
    (f"error: 1 configuration error {DEFERRED}; nothing was created:", 0),
    ("error: 1 configuration error; nothing was created:", 255),   # the team's own config: fails the run
])
def test_a_team_preview_waits_for_the_platform_only_when_its_contract_is_behind(deploy_root, team_output, rc):
    result = deploy(deploy_root, "--preview", "dev", FAKE_TEAM_OUTPUT=team_output, FAKE_TEAM_RC="255")
    assert result.returncode == rc, result.stdout + result.stderr
    assert team_output in result.stdout
    assert ("::warning::team stack team-new-dev: preview deferred" in result.stdout) == (rc == 0)


def test_a_failing_team_up_is_never_deferred(deploy_root):
    result = deploy(deploy_root, "dev", FAKE_TEAM_OUTPUT=f"error: 1 configuration error {DEFERRED}", FAKE_TEAM_RC="255")
    assert result.returncode == 255 and "deferred" not in result.stdout


@pytest.mark.parametrize("header", [
    "",                                                            # never `stack init`ed
    "encryptionsalt: v1:abc:v1:def:ghi\n",                         # passphrase provider: CI cannot decrypt
    "secretsprovider: awskms://alias/gpu-training-pulumi-secrets-dev?region=us-east-1\n",  # no data key
], ids=["uncreated", "passphrase", "no-encryptedkey"])
def test_deploy_environment_refuses_a_stack_not_created_with_the_kms_provider(deploy_root, header):
    """A new team stack merged before `pulumi stack init` broke every preview and deploy of its
    environment half-way (pulumi selects stacks, never creates them): now nothing runs, and the
    message names the file and the exact `stack init`."""
    (deploy_root / "stacks" / "Pulumi.team-new-dev.yaml").write_text(header + "config:\n  gpu-training:region: us-east-1\n")
    for args in (["dev"], ["--preview", "dev"]):
        result = deploy(deploy_root, *args)
        assert result.returncode == 2, result.stdout + result.stderr
        provider = policies.secrets_provider_url("gpu-training", "dev", "us-east-1")
        assert "stacks/Pulumi.team-new-dev.yaml" in result.stderr and "Pulumi.dev.yaml" not in result.stderr
        assert f'pulumi stack init team-new-dev --secrets-provider "{provider}"' in result.stderr
        assert calls(deploy_root) == [], "nothing may run before the check, not even the platform stack"


def test_deploy_environment_names_the_key_in_the_bootstraps_region(deploy_root):
    """The secrets key lives in the bootstrap's region, which may differ from the stacks': the
    printed `stack init` used the stack's, unlike scripts/new-team-stack."""
    (deploy_root / "bootstrap").mkdir()
    (deploy_root / "bootstrap" / "Pulumi.bootstrap.yaml").write_text("config:\n  gpu-training-bootstrap:region: eu-west-1\n")
    (deploy_root / "stacks" / "Pulumi.dev.yaml").write_text("config:\n  gpu-training:region: us-east-1\n")
    result = deploy(deploy_root, "dev")
    assert result.returncode == 2
    provider = policies.secrets_provider_url("gpu-training", "dev", "eu-west-1")
    assert f'pulumi stack init dev --secrets-provider "{provider}"' in result.stderr, result.stderr


def test_deploy_environment_dry_run_only_warns(deploy_root):
    """The repository's own stack files are templates until the first-time setup: a dry run
    still shows the commands (tests/test_workflows.py reads them) and warns."""
    (deploy_root / "stacks" / "Pulumi.team-new-dev.yaml").write_text("config: {}\n")
    result = deploy(deploy_root, "--dry-run", "dev")
    assert result.returncode == 0 and "warning: stacks/Pulumi.team-new-dev.yaml" in result.stderr
    assert result.stdout.count("+ pulumi up ") == 2 and calls(deploy_root) == []


def test_deploy_environment_policy_configs_go_to_a_private_directory_removed_on_exit(deploy_root):
    """Outside CI the configurations went to the fixed ${TMPDIR:-/tmp}/policy-config: another
    local user could create it first and choose the CIDRs the policy pack allows."""
    planted = deploy_root.parent / "tmp" / "policy-config"
    planted.mkdir(parents=True)
    (planted / "dev.json").write_text('{"planted": true}')
    for rc in ("0", "1"):  # removed after a failed `pulumi up` too
        (deploy_root.parent / "calls.log").unlink(missing_ok=True)
        result = deploy(deploy_root, "dev", FAKE_PULUMI_RC=rc)
        assert result.returncode == int(rc), result.stderr
        written = [Path(line.split(" ", 1)[1]) for line in calls(deploy_root) if line.startswith("policy_config ")]
        assert written, calls(deploy_root)
        directory = written[0].parent
        assert directory != planted and directory.parent == planted.parent
        assert directory.name.startswith("policy-config.") and not directory.exists()
    assert (planted / "dev.json").read_text() == '{"planted": true}'


def test_deploy_environment_keeps_runner_temp_in_ci(deploy_root, tmp_path):
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    result = deploy(deploy_root, "--preview", "dev", RUNNER_TEMP=str(runner_temp))
    assert result.returncode == 0, result.stderr
    written = [line.split(" ", 1)[1] for line in calls(deploy_root) if line.startswith("policy_config ")]
    assert written == [f"{runner_temp}/policy-config/dev.json", f"{runner_temp}/policy-config/team-new-dev.json"]



# --- deploy-environment's roll gate (offline/roll_gate.py; tests/test_roll_gate.py holds its table) --

def _preview_rolling(group: str, capacity: str = "ON_DEMAND") -> str:
    """`pulumi preview --json` of an update that moves a GPU node group to a new Kubernetes version."""
    urn = "urn:pulumi:dev::gpu-training::gpu-training:cluster:NodePools$aws:eks/nodeGroup:NodeGroup::p5-nodegroup"
    state = {"urn": urn, "type": "aws:eks/nodeGroup:NodeGroup",
             "inputs": {"amiType": "AL2023_x86_64_NVIDIA", "capacityType": capacity, "nodeGroupName": group}}
    return json.dumps({"steps": [{"op": "update", "urn": urn, "oldState": state, "newState": state,
                                  "diffReasons": ["version"], "detailedDiff": None}]})


@pytest.fixture
def gang_running(deploy_root) -> dict[str, str]:
    """A cluster whose node n1 (node group gpu-training-dev-p5, on demand) runs gang training/pretrain."""
    files = deploy_root.parent
    (files / "nodes.json").write_text(json.dumps({"items": [{"metadata": {"name": "n1", "labels": {
        "eks.amazonaws.com/nodegroup": "gpu-training-dev-p5", "eks.amazonaws.com/capacityType": "ON_DEMAND"}}}]}))
    (files / "pods.json").write_text(json.dumps({"items": [{
        "metadata": {"namespace": "training", "labels": {"jobset.sigs.k8s.io/jobset-name": "pretrain"}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}]}))
    (files / "preview.json").write_text(_preview_rolling("gpu-training-dev-p5"))
    return {"FAKE_PREVIEW_JSON": str(files / "preview.json"), "FAKE_NODES_JSON": str(files / "nodes.json"),
            "FAKE_PODS_JSON": str(files / "pods.json")}


def test_deploy_refuses_to_roll_a_node_group_a_gang_runs_on(deploy_root, gang_running):
    result = deploy(deploy_root, "dev", **gang_running)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "node group gpu-training-dev-p5 (`version`) runs training/pretrain" in result.stderr
    assert "scripts/gpu-training job stop" in result.stderr and "--allow-gang-roll" in result.stderr
    assert not [line for line in calls(deploy_root) if line.startswith("pulumi up")], "nothing may be updated"
    kubectl = [line for line in calls(deploy_root) if line.startswith("kubectl ")]
    assert kubectl and all(re.match(r"kubectl get (nodes|pods) ", line) for line in kubectl), "read-only"
    assert all("KUBECONFIG=" + str(deploy_root.parent / "tmp" / "policy-config.") in line for line in kubectl)


def test_allow_gang_roll_deploys_with_a_warning(deploy_root, gang_running):
    result = deploy(deploy_root, "--allow-gang-roll", "dev", **gang_running)
    assert result.returncode == 0, result.stderr
    assert "::warning::--allow-gang-roll" in result.stdout and "training/pretrain" in result.stdout
    assert [line for line in calls(deploy_root) if line.startswith("pulumi up")]


@pytest.mark.parametrize("case", ["spot", "no-roll"])
def test_a_spot_gang_or_an_update_that_rolls_nothing_deploys(deploy_root, gang_running, case):
    preview = deploy_root.parent / "preview.json"
    preview.write_text(_preview_rolling("gpu-training-dev-p5", "SPOT") if case == "spot" else '{"steps": []}')
    result = deploy(deploy_root, "dev", **gang_running)
    assert result.returncode == 0, result.stderr
    assert ("gpu-training-dev-p5\tspot" in result.stdout) == (case == "spot")
    assert [line for line in calls(deploy_root) if line.startswith("pulumi up")]
    if case == "no-roll":  # the cluster is asked only when a GPU node group rolls
        assert not [line for line in calls(deploy_root) if line.startswith("kubectl ")]


def test_previews_and_dry_runs_never_ask_the_cluster(deploy_root, gang_running):
    for args in (["--preview", "dev"], ["--dry-run", "dev"]):
        result = deploy(deploy_root, *args, **gang_running)
        assert result.returncode == 0, result.stderr
    assert not [line for line in calls(deploy_root) if line.startswith("kubectl ") or "--json" in line]

# --- deploy-environment's team-state guard (offline/team_state_guard.py) -----------------------

TEAM_URN = "urn:pulumi:team-new-dev::gpu-training::gpu-training:workload:TrainingNamespace$"


def _team_state(*resources: dict[str, object]) -> str:
    """`pulumi stack export` of team-new-dev holding these resources (apitype.UntypedDeployment)."""
    return json.dumps({"version": 3, "deployment": {"manifest": {}, "resources": list(resources)}})


NAMESPACE = {"urn": TEAM_URN + "kubernetes:core/v1:Namespace::team-namespace-namespace",
             "type": "kubernetes:core/v1:Namespace", "custom": True}
LOCAL_QUEUE = {"urn": TEAM_URN + "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue::team-queue",
               "type": "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", "custom": True}


@pytest.mark.parametrize("operation", [[], ["--preview"]], ids=["up", "preview"])
def test_a_team_state_holding_a_plain_namespace_is_refused_before_any_update(deploy_root, operation):
    state = deploy_root.parent / "state.json"
    state.write_text(_team_state(NAMESPACE, LOCAL_QUEUE))
    result = deploy(deploy_root, *operation, "dev", FAKE_TEAM_STATE=str(state))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "team stack team-new-dev" in result.stderr and NAMESPACE["urn"] in result.stderr
    assert LOCAL_QUEUE["urn"] not in result.stderr, "only what the up would delete is named"
    assert "\"Moving a team's namespace to the platform\", step 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert "pulumi stack export --cwd" in "\n".join(calls(deploy_root))
    assert not [line for line in calls(deploy_root) if "--policy-pack " in line], "no stack is updated or previewed"


@pytest.mark.parametrize("resources", [
    [{**NAMESPACE, "retainOnDelete": True}, LOCAL_QUEUE],   # step 1 done: the up drops it from the state
    [LOCAL_QUEUE],                                           # a team stack that never held one
    [],                                                      # a stack never deployed
], ids=["retained", "no-released-type", "empty"])
def test_a_team_state_the_up_deletes_nothing_of_passes(deploy_root, resources):
    state = deploy_root.parent / "state.json"
    state.write_text(_team_state(*resources))
    result = deploy(deploy_root, "dev", FAKE_TEAM_STATE=str(state))
    assert result.returncode == 0, result.stderr
    updates = [line for line in calls(deploy_root) if line.startswith("pulumi up ")]
    assert [re.search(r"--stack (\S+)", line)[1] for line in updates] == ["dev", "team-new-dev"]  # type: ignore[index]


@pytest.mark.parametrize(("kind", "step"), [
    ("kubernetes:core/v1:PersistentVolume", "\"Moving a team's volumes to the platform\", step 2"),
    ("aws:efs/accessPoint:AccessPoint", "\"Moving a team's volumes to the platform\", step 1"),
    ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "\"Moving a team's ClusterQueue to the platform\", step 2"),
])
def test_the_guard_names_the_step_that_lets_go_of_each_type(tmp_path, capsys, kind, step):
    from offline.team_state_guard import main

    state = tmp_path / "state.json"
    state.write_text(_team_state({"urn": f"urn:pulumi:team-new-dev::gpu-training::{kind}::x", "type": kind},
                                 {**NAMESPACE, "retainOnDelete": True}))
    assert main(["team-new-dev", str(state)]) == 2
    error = capsys.readouterr().err
    assert step in error and NAMESPACE["urn"] not in error
    assert main(["team-new-dev", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the exported state of team stack team-new-dev" in capsys.readouterr().err


# --- deploy-environment and the team's own deploy role (.github/workflows/team-stack.yml) ------

def _team_boundary(team: str = "new", environment: str = "dev") -> str:
    """The line a team stack file sets its team boundary with (components/config/permissions_boundary.py)."""
    name = permissions_boundary.team_boundary_name("gpu-training", environment, team)
    return f"  gpu-training:iamPermissionsBoundary: arn:aws:iam::111122223333:policy/{name}  # its own\n"


def _set_team_stack(root: Path, boundary: str) -> None:
    (root / "stacks" / "Pulumi.team-new-dev.yaml").write_text(
        CREATED.format(env="dev") + "config:\n  gpu-training:region: us-east-1\n" + boundary)


def _stacks_called(root: Path) -> list[str]:
    return [re.search(r"--stack (\S+)", line)[1] for line in calls(root)  # type: ignore[index]
            if line.startswith("pulumi ") and ("--policy-pack " in line or line.startswith("pulumi stack export "))]


@pytest.mark.parametrize("operation", [[], ["--preview"]], ids=["up", "preview"])
def test_the_environments_deploy_leaves_a_team_stack_with_its_team_boundary_to_the_team(deploy_root, operation):
    _set_team_stack(deploy_root, _team_boundary())
    result = deploy(deploy_root, *operation, "dev")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _stacks_called(deploy_root) == ["dev"], "neither the team's state nor its stack is touched"
    skipped = [line for line in result.stdout.splitlines() if "team-new-dev" in line]
    assert len(skipped) == 1 and ".github/workflows/team-stack.yml" in skipped[0], result.stdout


@pytest.mark.parametrize("boundary", [
    "",                                                                              # the platform's, by default
    "  gpu-training:iamPermissionsBoundary: arn:aws:iam::111122223333:policy/gpu-training-boundary-dev\n",
    _team_boundary("newer"),                                                         # not its own team's
    _team_boundary("new", "prod"),                                                   # another environment's
    "  # gpu-training:iamPermissionsBoundary: arn:aws:iam::111122223333:policy/gpu-training-boundary-dev-team-new\n",
], ids=["unset", "platform", "other-team", "other-environment", "commented-out"])
def test_the_environments_deploy_keeps_a_team_stack_without_its_team_boundary(deploy_root, boundary):
    _set_team_stack(deploy_root, boundary)
    result = deploy(deploy_root, "dev")
    assert result.returncode == 0, result.stderr
    assert _stacks_called(deploy_root) == ["team-new-dev", "dev", "team-new-dev"]  # guard, then both ups
    assert "skipping" not in result.stdout


@pytest.mark.parametrize("operation", [[], ["--preview"]], ids=["up", "preview"])
def test_the_team_workflow_deploys_its_stack_alone_guarded_and_judged_by_the_pack(deploy_root, operation):
    _set_team_stack(deploy_root, _team_boundary())
    result = deploy(deploy_root, *operation, "--stack", "team-new-dev")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _stacks_called(deploy_root) == ["team-new-dev", "team-new-dev"]  # the state guard, then the stack
    (run,) = [line for line in calls(deploy_root) if "--policy-pack " in line]
    assert run.startswith(f"pulumi {'preview' if operation else 'up'} ") and "--policy-pack-config" in run


@pytest.mark.parametrize(("args", "boundary", "says"), [
    (["--stack", "team-new-dev"], "", "does not set gpu-training:iamPermissionsBoundary to its team boundary"),
    (["--stack", "team-new-dev"], _team_boundary("newer"), "policy/gpu-training-boundary-dev-team-new "),
    (["--stack", "team-gone-dev"], _team_boundary(), "no stacks/Pulumi.team-gone-dev.yaml"),
    (["--stack", "dev"], _team_boundary(), "--stack must name a team stack"),
    (["--stack", "team-new-qa"], _team_boundary(), "--stack must name a team stack"),
    (["--stack", "team-new-dev", "dev"], _team_boundary(), "no ENVIRONMENT"),
    (["--stack"], _team_boundary(), "--stack takes one team stack"),
])
def test_the_team_workflow_refuses_a_stack_its_role_cannot_deploy(deploy_root, args, boundary, says):
    _set_team_stack(deploy_root, boundary)
    result = deploy(deploy_root, *args)
    assert result.returncode == 2 and says in result.stderr, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and calls(deploy_root) == []


# --- new-team-stack and docs/team-stacks.md: stack init first, with the KMS provider ---------

def test_new_team_stack_prints_stack_init_with_the_environments_kms_key_first(tmp_path):
    result = subprocess.run([sys.executable, str(NEW_TEAM_STACK), "nlp", "staging", "--out-dir", str(tmp_path)],
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    bootstrap = yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())["config"]
    provider = policies.team_secrets_provider_url(policies.secrets_provider_url(
        bootstrap["gpu-training-bootstrap:stacksProject"], "staging", bootstrap["gpu-training-bootstrap:region"]),
        "team-nlp-staging")
    init = next(i for i, line in enumerate(lines)
                if f'pulumi stack init team-nlp-staging --secrets-provider "{provider}"' in line)
    secret = next(i for i, line in enumerate(lines) if "pulumi config set --stack team-nlp-staging" in line)
    commit = next(i for i, line in enumerate(lines) if "commit" in line and "secretsprovider:" in line)
    assert init < secret < commit


def test_new_team_stack_takes_the_platform_stacks_own_provider(tmp_path):
    from test_bad_input import load_script

    script = load_script("new-team-stack")
    own = "awskms:///arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab?region=us-east-1"
    (tmp_path / "Pulumi.prod.yaml").write_text(f"secretsprovider: {own}\nencryptedkey: abc\nconfig: {{}}\n")
    assert script.secrets_provider("prod", "gpu-training", "us-east-1", stacks_dir=tmp_path) == own
    assert script.secrets_provider("dev", "gpu-training", "us-east-1", stacks_dir=tmp_path,
                                   bootstrap_dir=tmp_path) == policies.secrets_provider_url("gpu-training", "dev",
                                                                                            "us-east-1")


def test_team_stacks_doc_creates_the_stack_before_setting_secrets():
    text = (ROOT / "docs" / "team-stacks.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    provider = policies.team_secrets_provider_url(policies.secrets_provider_url("gpu-training", "prod", "us-east-1"),
                                                  "team-nlp-prod")
    init = block.index(f'pulumi stack init team-nlp-prod --secrets-provider "{provider}"')
    assert init < block.index("pulumi config set --stack team-nlp-prod") < block.index("git add stacks/Pulumi.team-nlp-prod.yaml")
    assert "secretsprovider:" in text and "encryptedkey:" in text


# --- build-image: a re-run for a pushed commit -------------------------------------------------

REPOSITORY = "111122223333.dkr.ecr.us-east-1.amazonaws.com/gpu-training-dev/trainer"
DIGEST = "sha256:" + "ab" * 32
PUSHED = "sha256:" + "cd" * 32


@pytest.fixture
def image_checkout(tmp_path) -> tuple[Path, str]:
    """A clean git checkout with the script and a trainer/ (tag = its 12-char commit), and fake
    aws and docker that log their calls."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(BUILD_IMAGE, root / "scripts" / "build-image")
    (root / "trainer").mkdir()
    (root / "trainer" / "Dockerfile").write_text("FROM scratch AS trainer\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "--quiet"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "trainer"], check=True)
    commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    log = shlex.quote(str(tmp_path / "calls.log"))
    executable(tmp_path / "bin" / "aws", f"""#!/bin/bash
echo "aws $*" >> {log}
case "$1 $2" in
    "ecr describe-images")
        case "$FAKE_TAG" in
            exists) echo {DIGEST} ;;
            missing) echo "An error occurred (ImageNotFoundException) when calling the DescribeImages operation: \
The image with imageId {{imageDigest:'null', imageTag:'x'}} does not exist" >&2; exit 254 ;;
            *) echo "An error occurred (AccessDeniedException) when calling the DescribeImages operation" >&2; exit 254 ;;
        esac ;;
    "ecr get-login-password") echo password ;;
esac
""")
    executable(tmp_path / "bin" / "docker", f"""#!/bin/bash
echo "docker $*" >> {log}
case "$1 $2" in
    "login --username") cat > /dev/null ;;
    "buildx build") ;;
    "buildx imagetools") echo '{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "{PUSHED}"}}' ;;
    *) exit 9 ;;
esac
""")
    return root, commit


def build_image(root: Path, tag_state: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / "scripts" / "build-image"), "--repository", REPOSITORY, *args, "dev"],
                          capture_output=True, text=True, check=False, timeout=60,
                          env={"PATH": fake_path(root.parent / "bin"), "FAKE_TAG": tag_state, "HOME": str(root.parent)})


def test_build_image_rerun_reuses_the_pushed_tag(image_checkout):
    """ECR tags are immutable: pushing the commit's tag again ("Re-run all jobs") failed."""
    root, commit = image_checkout
    result = build_image(root, "exists")
    assert result.returncode == 0, result.stderr
    log = calls(root)
    assert log == [f"aws ecr describe-images --region us-east-1 --registry-id 111122223333 --repository-name "
                   f"gpu-training-dev/trainer --image-ids imageTag={commit} --query imageDetails[0].imageDigest "
                   "--output text"], "no login, build or push"
    assert f"exists: {REPOSITORY}:{commit}" in result.stdout
    assert f"digest: {REPOSITORY}@{DIGEST}\n" in result.stdout  # what main.yml's image job reads
    assert result.stdout.rstrip().splitlines()[-1] == f"  pulumi config set --stack dev trainerImage {REPOSITORY}@{DIGEST}"


def test_build_image_pushes_a_new_tag(image_checkout):
    root, commit = image_checkout
    result = build_image(root, "missing")
    assert result.returncode == 0, result.stderr
    log = calls(root)
    assert log[0].startswith("aws ecr describe-images ") and "aws ecr get-login-password --region us-east-1" in log
    build = next(line for line in log if line.startswith("docker buildx build "))
    assert f"--tag {REPOSITORY}:{commit}" in build and "--push" in build
    assert f"pushed: {REPOSITORY}:{commit}" in result.stdout and f"digest: {REPOSITORY}@{PUSHED}\n" in result.stdout


def test_build_image_tags_another_platform_apart(image_checkout):
    """A linux/arm64 build under the commit's tag would reuse the amd64 image's digest on a re-run."""
    root, commit = image_checkout
    result = build_image(root, "missing", "--platform", "linux/arm64")
    assert result.returncode == 0, result.stderr
    log = calls(root)
    assert f"--image-ids imageTag={commit}-linux-arm64 " in log[0]
    build = next(line for line in log if line.startswith("docker buildx build "))
    assert f"--tag {REPOSITORY}:{commit}-linux-arm64" in build and "--platform linux/arm64" in build


def test_build_image_stops_when_ecr_gives_no_answer(image_checkout):
    root, _ = image_checkout
    result = build_image(root, "denied")
    assert result.returncode == 2 and "cannot tell whether" in result.stderr and "AccessDenied" in result.stderr
    assert not any(line.startswith("docker ") for line in calls(root))


def test_build_image_dry_run_shows_the_tag_check_and_runs_nothing(image_checkout):
    root, commit = image_checkout
    result = build_image(root, "exists", "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    check = next(i for i, line in enumerate(lines) if line.startswith("+ aws ecr describe-images "))
    assert f"imageTag={commit}" in lines[check]
    assert check < next(i for i, line in enumerate(lines) if line.startswith("+ docker buildx build "))
    assert calls(root) == []


# --- docs/delivery.md: the pin pull request needs no Actions approval setting ------------------

def test_setup_checklist_keeps_actions_pr_approval_off_and_sets_up_the_pin_app():
    """The pin pull request is opened with a GitHub App's token (tests/test_workflows.py), so the
    setting that lets Actions create and approve pull requests stays off, and the checklist says why
    and what the App and its environment need."""
    main = yaml.safe_load((ROOT / ".github" / "workflows" / "main.yml").read_text())
    step = next(s for s in main["jobs"]["pin-image"]["steps"] if s.get("uses", "").startswith("peter-evans/create-pull-request@"))
    assert step["with"]["token"] == "${{ steps.app-token.outputs.token }}"  # never the workflow's own token
    text = (ROOT / "docs" / "delivery.md").read_text()
    checklist = " ".join(text.split("### 3. The GitHub repository", 1)[1].split("\n## ", 1)[0].split())
    assert '"Allow GitHub Actions to create and approve pull requests" off**' in checklist
    assert "could approve itself" in checklist
    for needed in ("Contents: read and write", "Pull requests: read and write", "Environment `pin-image`",
                   "`PIN_IMAGE_APP_CLIENT_ID`", "`PIN_IMAGE_APP_PRIVATE_KEY`", "Not as repository secrets"):
        assert needed in checklist, needed
    assert "PIN_IMAGE_TOKEN" not in text


# --- Makefile: a checkout path with a space -----------------------------------------------------

@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_pytest_passes_checkov_path_with_a_space(tmp_path):
    checkout = tmp_path / "my checkout"
    checkout.mkdir()
    shutil.copy2(ROOT / "Makefile", checkout / "Makefile")
    python = executable(tmp_path / "bin" / "python", '#!/bin/sh\nprintf "%s\\n" "$CHECKOV"\n')
    # -o: take the venvs as made; PY: a stand-in that prints what the recipe hands pytest.
    result = subprocess.run(["make", "-s", "-o", ".venv/.dev", "-o", ".venv-checkov/.installed", "-o", ".venv/.bytecode",
                             "pytest", f"PY={python}"], cwd=checkout, capture_output=True, text=True, check=False,
                            timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{checkout}/.venv-checkov/bin/checkov"
